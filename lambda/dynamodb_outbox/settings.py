"""Settings read from environment variables, with errors that name the variable.

Shared by the functions (publisher, sweeper, reference consumer) and
``outbox-ops``; standard library only at import (the sinks and boto3 are
imported on first use), so the command line stays fast to start.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, Literal, Protocol, overload

from dynamodb_outbox._public_names import present_as

if TYPE_CHECKING:
    # boto3-stubs (dev only, requirements-dev.txt): the clients' real types.
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sns import SNSClient

    from dynamodb_outbox.regions import RegionScope
    from dynamodb_outbox.sinks import PublishTo, Sink
    from dynamodb_outbox.table_keys import TableKeys

__all__ = [
    "CONSUMER_SENDER_ENVIRONMENT",
    "DEFAULT_EXPIRES_AFTER_SECONDS",
    "DEFAULT_METRICS_NAMESPACE",
    "ENV_ADOPTED_REGIONS",
    "ENV_ADOPT_AFTER_SECONDS",
    "ENV_AWS_REGION",
    "ENV_CONSUMER_EVENT_BUS_ARN",
    "ENV_CONSUMER_FORWARDED_FROM_REGIONS",
    "ENV_CONSUMER_NAME",
    "ENV_CONSUMER_TOPIC_ARN",
    "ENV_CONSUMER_TRANSPORT",
    "ENV_EVENT_BUS_NAME",
    "ENV_EXPIRES_AFTER_SECONDS",
    "ENV_IDEMPOTENCY_TABLE",
    "ENV_MAX_ITEMS",
    "ENV_MIN_AGE_SECONDS",
    "ENV_MULTI_REGION",
    "ENV_PARTITION_KEY",
    "ENV_PENDING_INDEX",
    "ENV_PENDING_SHARDS",
    "ENV_PUBLISHES_UNSTAMPED",
    "ENV_PUBLISH_TO",
    "ENV_SORT_KEY",
    "ENV_SWEEPER_ENABLED",
    "ENV_TABLE_NAME",
    "ENV_TOPIC_ARN",
    "ClientFactory",
    "ConfigurationError",
    "boto3_client",
    "integer_env",
    "multi_region_from_environment",
    "pending_index_from_environment",
    "pending_shards_from_environment",
    "publish_to_from_environment",
    "region_scope_from_environment",
    "required_env",
    "sink_from_environment",
    "sweeper_enabled_from_environment",
    "table_key_names_from_environment",
    "table_keys_from_environment",
]

# The publisher and the sweeper.
ENV_EVENT_BUS_NAME: Final = "OUTBOX_EVENT_BUS_NAME"
ENV_TABLE_NAME: Final = "OUTBOX_TABLE_NAME"
ENV_PUBLISH_TO: Final = "OUTBOX_PUBLISH_TO"
ENV_TOPIC_ARN: Final = "OUTBOX_TOPIC_ARN"
DEFAULT_METRICS_NAMESPACE: Final = "DynamoDBOutbox"

# The table's key attribute names (the publisher, the sweeper and ``outbox-ops``).
ENV_PARTITION_KEY: Final = "OUTBOX_PARTITION_KEY"
ENV_SORT_KEY: Final = "OUTBOX_SORT_KEY"

# The sweeper (and ``outbox-ops`` for the pending index).
ENV_PENDING_INDEX: Final = "OUTBOX_PENDING_INDEX"
ENV_PENDING_SHARDS: Final = "OUTBOX_PENDING_SHARDS"
ENV_MIN_AGE_SECONDS: Final = "OUTBOX_SWEEPER_MIN_AGE_SECONDS"
ENV_MAX_ITEMS: Final = "OUTBOX_SWEEPER_MAX_ITEMS"

# The publisher: whether a sweeper runs (sweeper.enabled), so an event may be left
# pending for it on the ordered path.
ENV_SWEEPER_ENABLED: Final = "OUTBOX_SWEEPER_ENABLED"

# Multi-region on a global table (dynamodb_outbox.regions): the writer stamps its
# region (Lambda's AWS_REGION) when OUTBOX_MULTI_REGION is true; the publisher
# and sweeper of each region take that region's items, the unstamped ones only
# where OUTBOX_PUBLISHES_UNSTAMPED is true, and the sweeper those of the regions
# in OUTBOX_ADOPTED_REGIONS too (failover, comma-separated).
ENV_MULTI_REGION: Final = "OUTBOX_MULTI_REGION"
ENV_PUBLISHES_UNSTAMPED: Final = "OUTBOX_PUBLISHES_UNSTAMPED"
ENV_ADOPTED_REGIONS: Final = "OUTBOX_ADOPTED_REGIONS"
ENV_ADOPT_AFTER_SECONDS: Final = "OUTBOX_ADOPT_AFTER_SECONDS"
ENV_AWS_REGION: Final = "AWS_REGION"

# The reference consumer.
ENV_IDEMPOTENCY_TABLE: Final = "OUTBOX_IDEMPOTENCY_TABLE"
ENV_EXPIRES_AFTER_SECONDS: Final = "OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"

#: The idempotency window when neither ``expires_after_seconds`` nor
#: ``$OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS`` gives one. Behind the module
#: the window is derived from every place a copy of an event can still come
#: from (modules/windows, docs/seams.md "Windows": 20 days with its defaults)
#: and given to each consumer in its environment; this default is only for a
#: consumer fed some other way, and is too short for a queue whose DLQ keeps
#: messages 14 days. The consumer and the sequence tracker both read it here.
DEFAULT_EXPIRES_AFTER_SECONDS: Final = 7 * 24 * 60 * 60
ENV_CONSUMER_NAME: Final = "OUTBOX_CONSUMER_NAME"

# Every consumer (dynamodb_outbox.sender_checks): the sender its messages must
# show, the transport it RECEIVES from. Names of their own, apart from
# OUTBOX_PUBLISH_TO / OUTBOX_TOPIC_ARN (the transport a writer or publisher
# publishes to), so that a consumer may also write outbox events, to this
# outbox or another one (writer_environment merged in). OUTBOX_CONSUMER_TRANSPORT
# picks the body shape; the bus's ARN (EventBridge) or the topic's (SNS) the
# account, region or topic. The module sets them on its reference consumers and
# lists them in its `consumer_environment` output for callers' own functions.
ENV_CONSUMER_TRANSPORT: Final = "OUTBOX_CONSUMER_TRANSPORT"
ENV_CONSUMER_EVENT_BUS_ARN: Final = "OUTBOX_CONSUMER_EVENT_BUS_ARN"
ENV_CONSUMER_TOPIC_ARN: Final = "OUTBOX_CONSUMER_TOPIC_ARN"
# Multi-region (EventBridge): the other regions whose outbox buses forward their
# events to this bus (multi_region.receive_forwarded_from); a forwarded event
# keeps its own region, so the consumer accepts these regions too.
ENV_CONSUMER_FORWARDED_FROM_REGIONS: Final = "OUTBOX_CONSUMER_FORWARDED_FROM_REGIONS"
CONSUMER_SENDER_ENVIRONMENT: Final = (
    ENV_CONSUMER_TRANSPORT,
    ENV_CONSUMER_EVENT_BUS_ARN,
    ENV_CONSUMER_TOPIC_ARN,
    ENV_CONSUMER_FORWARDED_FROM_REGIONS,
)


class ConfigurationError(RuntimeError):
    """An environment variable is missing or invalid; the message names it."""


def required_env(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The non-empty value of ``name``, or :class:`ConfigurationError` naming it."""
    value = (os.environ if environ is None else environ).get(name, "")
    if not value:
        raise ConfigurationError(f"environment variable {name} must be set")
    return value


def integer_env(
    environ: Mapping[str, str], name: str, default: int, minimum: int, maximum: int | None = None
) -> int:
    """``name`` as an integer in ``minimum..maximum``, ``default`` when unset or blank."""
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise ConfigurationError(
            f"environment variable {name} must be an integer {bounds}, got {text!r}"
        )
    return value


def pending_shards_from_environment(environ: Mapping[str, str]) -> int:
    """``OUTBOX_PENDING_SHARDS``, which may only repeat the one shard count.

    The writer always spreads pending items over
    :data:`~dynamodb_outbox.outbox_item.DEFAULT_PENDING_SHARDS` shards; a sweeper
    or ``outbox-ops`` reading another count would miss items, so it is refused
    (:func:`~dynamodb_outbox.outbox_item.writers_shard_count`).
    """
    from dynamodb_outbox.outbox_item import DEFAULT_PENDING_SHARDS, writers_shard_count

    text = environ.get(ENV_PENDING_SHARDS, "").strip()
    if not text:
        return DEFAULT_PENDING_SHARDS
    value: object = DEFAULT_PENDING_SHARDS if text == str(DEFAULT_PENDING_SHARDS) else text
    try:
        return writers_shard_count(value, f"environment variable {ENV_PENDING_SHARDS}")
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def pending_index_from_environment(environ: Mapping[str, str] | None = None) -> str:
    """``OUTBOX_PENDING_INDEX``, the sparse pending index's name; ``outbox-pending`` when unset."""
    from dynamodb_outbox.pending_index import DEFAULT_PENDING_INDEX

    text = (os.environ if environ is None else environ).get(ENV_PENDING_INDEX, "")
    return text.strip() or DEFAULT_PENDING_INDEX


def sweeper_enabled_from_environment(environ: Mapping[str, str] | None = None) -> bool:
    """``OUTBOX_SWEEPER_ENABLED``: ``true`` or ``false``; unset means no sweeper (the safe side).

    Raises :class:`ConfigurationError` naming the variable for any other value.
    """
    text = (os.environ if environ is None else environ).get(ENV_SWEEPER_ENABLED, "")
    value = text.strip().lower()
    if value in ("", "false"):
        return False
    if value == "true":
        return True
    raise ConfigurationError(
        f"environment variable {ENV_SWEEPER_ENABLED} must be true or false, got {text!r}"
    )


def _boolean_env(environ: Mapping[str, str], name: str, default: bool) -> bool:
    text = environ.get(name, "")
    value = text.strip().lower()
    if value == "":
        return default
    if value in ("true", "false"):
        return value == "true"
    raise ConfigurationError(f"environment variable {name} must be true or false, got {text!r}")


def multi_region_from_environment(environ: Mapping[str, str] | None = None) -> bool:
    """``OUTBOX_MULTI_REGION``: ``true`` or ``false``; unset means a single-region deployment."""
    return _boolean_env(os.environ if environ is None else environ, ENV_MULTI_REGION, False)


def region_scope_from_environment(environ: Mapping[str, str] | None = None) -> RegionScope:
    """Which items this region's publisher or sweeper takes (a ``RegionScope``).

    Single-region (every item) unless ``OUTBOX_MULTI_REGION`` is true; then the
    region is ``AWS_REGION`` (set by Lambda), unstamped items are taken only when
    ``OUTBOX_PUBLISHES_UNSTAMPED`` is true, and the regions listed in
    ``OUTBOX_ADOPTED_REGIONS`` are adopted once ``OUTBOX_ADOPT_AFTER_SECONDS``
    old. Raises :class:`ConfigurationError`.
    """
    from dynamodb_outbox.regions import SINGLE_REGION, RegionScope, parse_regions

    environ = os.environ if environ is None else environ
    if not multi_region_from_environment(environ):
        if environ.get(ENV_ADOPTED_REGIONS, "").strip():
            raise ConfigurationError(
                f"environment variable {ENV_ADOPTED_REGIONS} is set but {ENV_MULTI_REGION} "
                "is not true: only a multi-region deployment adopts another region's items"
            )
        return SINGLE_REGION
    region = environ.get(ENV_AWS_REGION, "").strip()
    if not region:
        raise ConfigurationError(
            f"environment variable {ENV_MULTI_REGION} is true but {ENV_AWS_REGION} is not set"
        )
    try:
        return RegionScope(
            region,
            unstamped=_boolean_env(environ, ENV_PUBLISHES_UNSTAMPED, False),
            adopted=parse_regions(environ.get(ENV_ADOPTED_REGIONS, "")),
            adopt_after_seconds=integer_env(environ, ENV_ADOPT_AFTER_SECONDS, 0, 0),
        )
    except ValueError as exc:
        raise ConfigurationError(
            f"environment variables {ENV_AWS_REGION}/{ENV_ADOPTED_REGIONS}: {exc}"
        ) from None


def table_key_names_from_environment(environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """``OUTBOX_PARTITION_KEY`` and ``OUTBOX_SORT_KEY`` as given, each ``PK``/``SK`` when unset.

    Unchecked: ``outbox-ops`` shows them as its options' defaults, and
    :func:`table_keys_from_environment` checks them.
    """
    from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS

    environ = os.environ if environ is None else environ
    return (
        environ.get(ENV_PARTITION_KEY) or DEFAULT_TABLE_KEYS.partition,
        environ.get(ENV_SORT_KEY) or DEFAULT_TABLE_KEYS.sort,
    )


def table_keys_from_environment(environ: Mapping[str, str] | None = None) -> TableKeys:
    """The table's key names: ``OUTBOX_PARTITION_KEY``/``OUTBOX_SORT_KEY``, else ``PK``/``SK``.

    Raises :class:`ConfigurationError` naming the variable at fault.
    """
    from dynamodb_outbox.table_keys import InvalidTableKeys, TableKeys

    variables = {"partition": ENV_PARTITION_KEY, "sort": ENV_SORT_KEY}
    partition, sort = table_key_names_from_environment(environ)
    try:
        return TableKeys(partition, sort)
    except InvalidTableKeys as exc:
        named = " and ".join(variables[role] for role in exc.roles)
        raise ConfigurationError(f"environment variable {named}: {exc}") from None


class ClientFactory(Protocol):
    """Makes the boto3 client of a service: :func:`boto3_client`, or a test's fakes."""

    @overload
    def __call__(self, service: Literal["dynamodb"]) -> DynamoDBClient: ...
    @overload
    def __call__(self, service: Literal["events"]) -> EventBridgeClient: ...
    @overload
    def __call__(self, service: Literal["sns"]) -> SNSClient: ...


@overload
def boto3_client(service: Literal["dynamodb"]) -> DynamoDBClient: ...
@overload
def boto3_client(service: Literal["events"]) -> EventBridgeClient: ...
@overload
def boto3_client(service: Literal["sns"]) -> SNSClient: ...
def boto3_client(service: Literal["dynamodb", "events", "sns"]) -> object:
    """The default boto3 client of ``service`` (region and endpoint from the environment)."""
    import boto3

    return boto3.client(service)


def publish_to_from_environment(environ: Mapping[str, str] | None = None) -> PublishTo:
    """``OUTBOX_PUBLISH_TO``: ``eventbridge`` (when unset or blank), ``sns`` or ``sns_fifo``.

    The writer's :meth:`~dynamodb_outbox.writer.OutboxWriter.from_environment`,
    the publisher, the sweeper and ``outbox-ops`` read it here. Raises
    :class:`ConfigurationError` naming the variable.
    """
    from dynamodb_outbox.sinks import PUBLISH_TO_EVENTBRIDGE, parse_publish_to

    text = (os.environ if environ is None else environ).get(ENV_PUBLISH_TO, "")
    if not text.strip():
        return PUBLISH_TO_EVENTBRIDGE
    try:
        return parse_publish_to(text)
    except ValueError as exc:
        raise ConfigurationError(f"environment variable {ENV_PUBLISH_TO}: {exc}") from None


def sink_from_environment(
    environ: Mapping[str, str] | None = None,
    client_factory: ClientFactory | None = None,
) -> Sink:
    """The sink ``OUTBOX_PUBLISH_TO`` selects: ``eventbridge`` (default), ``sns`` or ``sns_fifo``.

    EventBridge needs ``OUTBOX_EVENT_BUS_NAME`` (name or ARN), SNS needs
    ``OUTBOX_TOPIC_ARN`` (for ``sns_fifo`` a FIFO topic, whose name ends in
    ``.fifo``). Shared by the publisher and the sweeper, so both send the same way.
    Raises :class:`ConfigurationError` naming the variable at fault.
    """
    from dynamodb_outbox.sinks import (
        PUBLISH_TO_EVENTBRIDGE,
        PUBLISH_TO_SNS_FIFO,
        EventBridgeSink,
        SnsSink,
        parse_topic_arn,
    )
    from dynamodb_outbox.sizes import FIFO_SUFFIX

    environ = os.environ if environ is None else environ
    make_client: ClientFactory = client_factory or boto3_client
    publish_to = publish_to_from_environment(environ)
    if publish_to == PUBLISH_TO_EVENTBRIDGE:
        bus = required_env(ENV_EVENT_BUS_NAME, environ)
        try:
            return EventBridgeSink(make_client("events"), bus)
        except ValueError as exc:
            raise ConfigurationError(f"environment variable {ENV_EVENT_BUS_NAME}: {exc}") from None
    try:
        topic = parse_topic_arn(required_env(ENV_TOPIC_ARN, environ))
    except ValueError as exc:
        raise ConfigurationError(f"environment variable {ENV_TOPIC_ARN} {exc}") from None
    if publish_to == PUBLISH_TO_SNS_FIFO and not topic.fifo:
        # A standard topic would take the events without their order.
        raise ConfigurationError(
            f"environment variable {ENV_TOPIC_ARN} must name a FIFO topic (ending in "
            f"{FIFO_SUFFIX}) when {ENV_PUBLISH_TO}={PUBLISH_TO_SNS_FIFO}, got {topic.arn!r}"
        )
    return SnsSink(make_client("sns"), topic.arn)


# Documented as dynamodb_outbox.ConfigurationError (docs/python.md): the name
# tracebacks, pickles and logged exception types show.
present_as("dynamodb_outbox", ConfigurationError)
