"""Write an entity and the events it announces in one DynamoDB transaction.

The outbox only works if the entity and its outbox items commit together: an
event without its change is a lie, a change without its event is lost. So every
write here is ONE ``TransactWriteItems``: a Put of the entity, one Put per event
(partition key = the entity's, sort key = ``OUTBOX#<event id>``; the key
attributes are ``PK``/``SK`` unless the writer is told other names), and any
extra actions the caller needs in the same unit (a ``ConditionCheck`` on another
item, an ``Update`` of a counter...).

DynamoDB refuses a transaction with more than 100 actions, over 4 MB, with an
item over 400 KB or with two actions on the same item, and it does so with a
terse ``ValidationException`` after a network round trip. This module checks
those rules first and raises an :class:`InvalidWrite` that names the rule, the
action and the figure. When DynamoDB cancels a transaction, the per-action
cancellation reasons are mapped back to the actions that caused them
(:class:`TransactionCancelled`).

Every transaction item costs two underlying writes (prepare + commit), so an
entity plus one event costs 4 write units where a plain Put costs 1; a
cancelled transaction still consumes capacity.

An event the table's sink would never accept (too large for it, a field it
refuses) is refused too, by the sink's own rules (:mod:`dynamodb_outbox.sinks`,
chosen with ``publish_to``): committed, it could only be quarantined.

Which events reach consumers in order: with ``publish_to = "sns_fifo"`` (the
ordered path), the events of one envelope ``subject`` (the FIFO message group)
that carry a ``sequence`` go out in ``sequence`` order, and a consumer's
:class:`~dynamodb_outbox.sequence_check.SequenceTracker` reports a gap or a
reordering. Take the sequence from the aggregate's version, set in the same
transaction with a condition on the previous one, so sequence order is commit
order. Without a sequence, order is best effort: the stream's order for one
partition key (AWS orders stream records per item only, and every event is an
item of its own) and id order in the sweeper. Give every event of an aggregate
the aggregate's key as ``PK`` and its id as ``subject``. Nothing else is
ordered: not two subjects, and nothing on the ``eventbridge`` and ``sns`` paths
(README, "Guarantees"; docs/decisions.md, "What "in order per subject" means").

This module ships to application code (Lambda layer): it imports only the
standard library, boto3/botocore, python-ulid, the envelope and sink rules and
the trace context finder (which uses OpenTelemetry or the X-Ray SDK only when
the application has them).
"""

from __future__ import annotations

import base64
import contextlib
import math
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal, DecimalException, InvalidOperation
from typing import TYPE_CHECKING, Any, Final, TypedDict, cast
from uuid import UUID

import boto3
from boto3.dynamodb.types import TypeSerializer
from botocore.exceptions import ClientError

from dynamodb_outbox import trace_context
from dynamodb_outbox._clock import iso_milliseconds
from dynamodb_outbox.envelope import (
    ATTR_PK,
    ATTR_SK,
    DEFAULT_PENDING_SHARDS,
    OUTBOX_SK_PREFIX,
    Envelope,
    InvalidEnvelope,
    outbox_item,
    writers_shard_count,
)
from dynamodb_outbox.event_ids import event_id_datetime, new_event_id
from dynamodb_outbox.payload_json import JsonDefault, PayloadNotEncodable, to_json_value
from dynamodb_outbox.regions import RegionScope
from dynamodb_outbox.settings import (
    ENV_AWS_REGION,
    ENV_MULTI_REGION,
    ENV_TABLE_NAME,
    ConfigurationError,
    multi_region_from_environment,
    publish_to_from_environment,
    table_keys_from_environment,
)
from dynamodb_outbox.sinks import PUBLISH_TO_EVENTBRIDGE, OutboundEvent, SinkRules, rules_for
from dynamodb_outbox.table_keys import InvalidTableKeys, TableKeys
from dynamodb_outbox.trace_context import TraceContext
from dynamodb_outbox.write_errors import (
    CancellationReason,
    DuplicateItemInTransaction,
    EventTooLarge,
    IdempotentParameterMismatch,
    InvalidWrite,
    ItemTooLarge,
    LimitExceeded,
    NoEvents,
    OutboxWriteError,
    Role,
    TooManyActions,
    TransactionCancelled,
    TransactionInProgress,
    TransactionTooLarge,
    UnpublishableEvent,
    is_retryable,
    translate_client_error,
)

if TYPE_CHECKING:
    # boto3-stubs[dynamodb] (dev only): a Table resource or an async client
    # passed as ``client`` fails type checking. Without the stubs it is Any.
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "MAX_CLIENT_REQUEST_TOKEN_LENGTH",
    "MAX_EVENT_ID_LEAD_SECONDS",
    "MAX_ITEM_BYTES",
    "MAX_NESTING_LEVELS",
    "MAX_TRANSACTION_ACTIONS",
    "MAX_TRANSACTION_BYTES",
    "CancellationReason",
    "Condition",
    "DuplicateItemInTransaction",
    "EventTooLarge",
    "IdempotentParameterMismatch",
    "InvalidWrite",
    "ItemTooLarge",
    "LimitExceeded",
    "NoEvents",
    "OutboxWriteError",
    "OutboxWriter",
    "Role",
    "TooManyActions",
    "TransactItem",
    "TransactionCancelled",
    "TransactionInProgress",
    "TransactionTooLarge",
    "UnpublishableEvent",
    "WriteResult",
    "attribute_value_size",
    "condition_check_action",
    "delete_action",
    "is_retryable",
    "item_size",
    "put_action",
    "serialize_item",
    "update_action",
]

# --------------------------------------------------------------------------- limits

MAX_TRANSACTION_ACTIONS: Final = 100
"""``TransactWriteItems`` accepts at most 100 actions."""

MAX_TRANSACTION_BYTES: Final = 4 * 1024 * 1024
"""Aggregate size of the items of one transaction (AWS: "4 MB")."""

MAX_ITEM_BYTES: Final = 400 * 1024
"""Largest DynamoDB item (AWS: "400 KB"); sizes are estimated from above, see :func:`item_size`."""

MAX_NESTING_LEVELS: Final = 32
"""DynamoDB "supports nested attributes up to 32 levels deep"."""

MAX_CLIENT_REQUEST_TOKEN_LENGTH: Final = 36

MAX_EVENT_ID_LEAD_SECONDS: Final = 300
"""How far in the future a caller's ``event_id`` may be (clock skew). The sweeper
finds pending events by the time in their id (``SK < OUTBOX#<ULID of now - min
age>``): an id far ahead would hide its event from the sweeper until then."""

_ACTION_KINDS: Final = ("ConditionCheck", "Put", "Delete", "Update")
_RETURN_OLD: Final = "ReturnValuesOnConditionCheckFailure"

# -------------------------------------------------------------- conditions, actions


class TransactItem(TypedDict, total=False):
    """One element of ``TransactItems`` in the low-level client's shape: exactly one key."""

    ConditionCheck: dict[str, Any]
    Put: dict[str, Any]
    Delete: dict[str, Any]
    Update: dict[str, Any]


@dataclass(frozen=True)
class Condition:
    """A condition expression with its placeholders.

    ``values`` hold plain Python values (``str``, ``int``, ``Decimal``, ``float``,
    ``bytes``, ``dict``...); they are converted like entity attributes.

    :meth:`item_absent` and :meth:`item_exists` test the ``PK`` attribute unless
    given another name: on a table keyed otherwise, pass its partition key
    (``Condition.item_absent("pk")``), or the writer refuses the condition
    rather than let it test an attribute the item never has.

    ``return_old_item=True`` asks DynamoDB for the item as it was when the
    condition failed (``ReturnValuesOnConditionCheckFailure=ALL_OLD``): it comes
    back in plain Python on the action's :class:`CancellationReason` ``item``,
    so "already paid" can answer with the current state without a second read
    (which could see a newer state than the one that failed the condition).
    """

    expression: str
    names: Mapping[str, str] | None = None
    values: Mapping[str, Any] | None = None
    return_old_item: bool = False

    @classmethod
    def item_absent(
        cls, key_attribute: str = ATTR_PK, *, return_old_item: bool = False
    ) -> Condition:
        """Create-only: the write fails if an item with this key already exists."""
        return cls(
            "attribute_not_exists(#absent_key)",
            {"#absent_key": key_attribute},
            return_old_item=return_old_item,
        )

    @classmethod
    def item_exists(cls, key_attribute: str = ATTR_PK) -> Condition:
        """Replace-only: the write fails if no item with this key exists."""
        return cls("attribute_exists(#present_key)", {"#present_key": key_attribute})

    def to_request(self) -> dict[str, Any]:
        """The ``ConditionExpression`` / ``ExpressionAttribute*`` parameters of one action."""
        if not self.expression or not isinstance(self.expression, str):
            raise InvalidWrite("a condition needs a non-empty expression")
        request: dict[str, Any] = {"ConditionExpression": self.expression}
        if self.names:
            request["ExpressionAttributeNames"] = dict(self.names)
        if self.values:
            request["ExpressionAttributeValues"] = {
                placeholder: _serialize(value, f"condition value {placeholder}")
                for placeholder, value in self.values.items()
            }
        if self.return_old_item:
            request[_RETURN_OLD] = "ALL_OLD"
        return request


def condition_check_action(
    key: Mapping[str, Any], condition: Condition, *, table_name: str | None = None
) -> TransactItem:
    """A ``ConditionCheck`` that makes the write depend on another item (nothing is written).

    ``key`` holds plain Python values. Without ``table_name`` the writer's table
    is used.
    """
    body = {"Key": serialize_item(key), **condition.to_request()}
    return {"ConditionCheck": _with_table(body, table_name)}


def update_action(
    key: Mapping[str, Any],
    update_expression: str,
    *,
    names: Mapping[str, str] | None = None,
    values: Mapping[str, Any] | None = None,
    condition: Condition | None = None,
    table_name: str | None = None,
) -> TransactItem:
    """An ``Update`` in the same transaction; placeholders are shared with ``condition``."""
    body: dict[str, Any] = {"Key": serialize_item(key), "UpdateExpression": update_expression}
    merged_names = dict(names or {})
    merged_values = {p: _serialize(v, f"update value {p}") for p, v in (values or {}).items()}
    if condition is not None:
        cond = condition.to_request()
        body["ConditionExpression"] = cond["ConditionExpression"]
        if _RETURN_OLD in cond:
            body[_RETURN_OLD] = cond[_RETURN_OLD]
        _merge_placeholders(merged_names, cond.get("ExpressionAttributeNames", {}))
        _merge_placeholders(merged_values, cond.get("ExpressionAttributeValues", {}))
    if merged_names:
        body["ExpressionAttributeNames"] = merged_names
    if merged_values:
        body["ExpressionAttributeValues"] = merged_values
    return {"Update": _with_table(body, table_name)}


def delete_action(
    key: Mapping[str, Any], *, condition: Condition | None = None, table_name: str | None = None
) -> TransactItem:
    """A ``Delete`` in the same transaction."""
    body = {"Key": serialize_item(key), **(condition.to_request() if condition else {})}
    return {"Delete": _with_table(body, table_name)}


def put_action(
    item: Mapping[str, Any], *, condition: Condition | None = None, table_name: str | None = None
) -> TransactItem:
    """A ``Put`` of another item in the same transaction (``item`` holds plain Python values)."""
    body = {"Item": serialize_item(item), **(condition.to_request() if condition else {})}
    return {"Put": _with_table(body, table_name)}


def _with_table(body: dict[str, Any], table_name: str | None) -> dict[str, Any]:
    return {"TableName": table_name, **body} if table_name else body


def _merge_placeholders(into: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for placeholder, value in extra.items():
        if placeholder in into and into[placeholder] != value:
            raise InvalidWrite(
                f"placeholder {placeholder} means two different things in the update "
                "expression and its condition; rename one of them"
            )
        into[placeholder] = value


# ------------------------------------------------------------------ serialization

_SERIALIZER: Final = TypeSerializer()


def serialize_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """Plain Python attributes to low-level attribute values.

    Floats are accepted and stored as ``Decimal(repr(x))``: the shortest decimal
    that reads back as the same float, i.e. the number Python prints (``0.1``
    stays ``0.1``, not ``0.1000000000000000055...``). NaN and infinities are
    refused (DynamoDB numbers have none), as are empty sets (DynamoDB has no
    empty set) and numbers beyond DynamoDB's 38 digits or 1E-130..1E+126 range.
    """
    if not isinstance(item, Mapping):
        raise InvalidWrite(f"an item must be a mapping of attributes, got {type(item).__name__}")
    result: dict[str, Any] = {}
    for name, value in item.items():
        if not isinstance(name, str) or not name:
            raise InvalidWrite(f"attribute names must be non-empty strings, got {name!r}")
        result[name] = _serialize(value, name)
    return result


def _serialize(value: Any, path: str) -> dict[str, Any]:
    prepared = _prepare(value, path)
    try:
        serialized = cast(dict[str, Any], _SERIALIZER.serialize(prepared))
    except DecimalException as exc:
        raise InvalidWrite(
            f"attribute {path!r}: a number does not fit DynamoDB "
            f"(38 significant digits, magnitude from 1E-130 to below 1E+126): "
            f"{type(exc).__name__}"
        ) from exc
    except TypeError as exc:
        raise InvalidWrite(
            f"attribute {path!r} cannot be stored in DynamoDB: {exc}; convert it first to "
            "str, int, Decimal, bool, bytes, None, a list, a dict or a set (datetime, date "
            "and UUID are stored as their ISO 8601 / canonical text)"
        ) from exc
    return serialized


def _prepare(value: Any, path: str, depth: int = 1) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidWrite(
                f"attribute {path!r} is {value!r}; DynamoDB numbers have no NaN or Infinity"
            )
        return Decimal(repr(value))
    if isinstance(value, Mapping | list | tuple) and depth > MAX_NESTING_LEVELS:
        raise InvalidWrite(
            f"attribute {path[:200]!r} nests deeper than DynamoDB's {MAX_NESTING_LEVELS} levels"
        )
    if isinstance(value, Mapping):
        prepared = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidWrite(f"attribute {path!r} has a non-string map key {key!r}")
            prepared[key] = _prepare(item, f"{path}.{key}", depth + 1)
        return prepared
    if isinstance(value, list | tuple):
        return [_prepare(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
    if isinstance(value, datetime | date | UUID):
        # Stored as the text event data gets (dynamodb_outbox.payload_json): one
        # rule for both halves of a write; read back, it is that string.
        try:
            return to_json_value(value, path=path)
        except PayloadNotEncodable as exc:
            raise InvalidWrite(f"attribute {exc}") from exc
    if isinstance(value, set | frozenset):
        if not value:
            raise InvalidWrite(
                f"attribute {path!r} is an empty set; DynamoDB cannot store one, omit the attribute"
            )
        return {_prepare(item, path, depth) for item in value}
    return value


# --------------------------------------------------------------------------- sizes


def item_size(item: Mapping[str, Any]) -> int:
    """Size in bytes of a low-level item per AWS's rules, rounded up where AWS says "approximately".

    Attribute name (UTF-8 bytes) + value, for every attribute. See
    :func:`attribute_value_size` for the values. The estimate never undercounts,
    so the writer may refuse an item a few bytes under the real limit but never
    sends one that DynamoDB would reject for its size.
    """
    return sum(_utf8_len(name) + attribute_value_size(value) for name, value in item.items())


def attribute_value_size(value: Mapping[str, Any]) -> int:
    """Size of one low-level attribute value (``{"S": ...}``, ``{"N": ...}``, ``{"M": ...}``...).

    Strings: UTF-8 bytes. Binary: raw bytes. Boolean/null: 1. Numbers: AWS says
    "about 1 byte per two significant digits + 1"; counted here as
    ``ceil((digits + 2) / 2) + 1`` plus 1 for a minus sign, an upper bound that
    covers digit pairs aligned on the decimal point. Map/list: 3 bytes + 1 byte
    per element + the elements (map keys count like attribute names). Sets: sum
    of their elements.
    """
    if not isinstance(value, Mapping) or len(value) != 1:
        raise InvalidWrite(f"not a low-level attribute value: {value!r:.80}")
    ((kind, data),) = value.items()
    if kind == "S":
        return _utf8_len(data)
    if kind == "N":
        return _number_size(data)
    if kind == "B":
        return _binary_len(data)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(_utf8_len(s) for s in data)
    if kind == "NS":
        return sum(_number_size(n) for n in data)
    if kind == "BS":
        return sum(_binary_len(b) for b in data)
    if kind == "L":
        return 3 + sum(1 + attribute_value_size(element) for element in data)
    if kind == "M":
        return 3 + sum(1 + _utf8_len(k) + attribute_value_size(v) for k, v in data.items())
    raise InvalidWrite(f"unknown attribute value type {kind!r}")


def _utf8_len(text: Any) -> int:
    if not isinstance(text, str):
        raise InvalidWrite(f"expected a string, got {type(text).__name__}")
    return len(text.encode("utf-8"))


def _binary_len(data: Any) -> int:
    if isinstance(data, bytes | bytearray | memoryview):
        return len(data)
    if isinstance(data, str):  # botocore sends a str blob as its UTF-8 bytes
        return _utf8_len(data)
    raise InvalidWrite(f"expected bytes for a binary value, got {type(data).__name__}")


def _number_size(text: Any) -> int:
    if not isinstance(text, str):
        raise InvalidWrite(f"a low-level number must be a string, got {type(text).__name__}")
    try:
        digits = Decimal(text).as_tuple().digits
    except InvalidOperation as exc:
        raise InvalidWrite(f"{text!r} is not a number") from exc
    significant = "".join(map(str, digits)).strip("0") or "0"
    negative = text.lstrip().startswith("-")
    return math.ceil((len(significant) + 2) / 2) + 1 + (1 if negative else 0)


# ---------------------------------------------------------------------- the writer


@dataclass(frozen=True)
class WriteResult:
    """What was committed: the event ids (the end-to-end idempotency keys) and outbox SKs."""

    pk: str
    event_ids: tuple[str, ...]
    outbox_sks: tuple[str, ...]
    action_count: int


@dataclass(frozen=True)
class _Action:
    request: dict[str, Any]
    label: str
    role: Role
    identity: tuple[Any, ...] | None
    size: int


class OutboxWriter:
    """Writes entities and their events atomically to the outbox table.

    ``client`` is a low-level boto3 DynamoDB client (``boto3.client("dynamodb")``,
    not a ``Table`` resource); inject one in tests or to share a configured
    client. Without it, a default client is created on first use, not at
    construction, so building a writer at import time costs nothing and needs
    no credentials; threads sharing the writer share that one client.
    ``pending_shards`` is not a setting: the pending index has
    :data:`~dynamodb_outbox.envelope.DEFAULT_PENDING_SHARDS` shards, which the
    sweeper reads, and any other value is refused (kept for callers that pass it).
    ``partition_key`` and ``sort_key`` name the table's key attributes (both
    strings), ``PK`` and ``SK`` by default: the module's ``table.partition_key``
    and ``table.sort_key``, which the publisher and sweeper get too. Outbox
    items carry ``OUTBOX#<event id>`` under the sort key, whatever its name.
    ``key_schemas`` names the key attributes of OTHER tables touched by extra
    Puts, so duplicate actions on them are caught before calling AWS.
    ``publish_to`` is the module's setting of the same name (``eventbridge``,
    the default, ``sns``, or ``sns_fifo`` for a FIFO topic): events are checked
    against that sink's rules (size, field limits), so an event it would never
    accept is refused here instead of being committed and quarantined.
    ``region`` (multi-region deployments on a global table, see
    :mod:`dynamodb_outbox.regions`) is the region this writer writes in: it is
    stamped on every outbox item, so that only that region's publisher and
    sweeper publish it. It must be the region of the client's endpoint (the
    region whose replica takes the write); :meth:`from_environment` reads it
    from ``AWS_REGION``. None (the default): a single-region deployment, no stamp.
    """

    def __init__(
        self,
        table_name: str,
        client: DynamoDBClient | None = None,
        *,
        pending_shards: int = DEFAULT_PENDING_SHARDS,
        source: str | None = None,
        key_schemas: Mapping[str, Sequence[str]] | None = None,
        publish_to: str = PUBLISH_TO_EVENTBRIDGE,
        partition_key: str = ATTR_PK,
        sort_key: str = ATTR_SK,
        region: str | None = None,
    ) -> None:
        if not table_name or not isinstance(table_name, str):
            raise InvalidWrite("table_name must be a non-empty string")
        if region is not None:
            try:
                RegionScope(region)
            except ValueError as exc:
                raise InvalidWrite(f"region: {exc}") from None
        self.region = region
        try:
            pending_shards = writers_shard_count(pending_shards, "pending_shards")
        except ValueError as exc:
            raise InvalidWrite(str(exc)) from None
        try:
            self.table_keys = TableKeys(partition_key, sort_key)
        except InvalidTableKeys as exc:
            arguments = " and ".join(f"{role}_key" for role in exc.roles)
            raise InvalidWrite(f"{arguments}: {exc}") from None
        self.table_name = table_name
        self.pending_shards = pending_shards
        self.source = source
        try:
            self.sink_rules: SinkRules = rules_for(publish_to)
        except ValueError as exc:
            raise InvalidWrite(str(exc)) from None
        self._client = client
        self._client_lock = threading.Lock()
        self._key_schemas: dict[str, tuple[str, ...]] = {
            name: tuple(attrs) for name, attrs in (key_schemas or {}).items()
        }
        self._key_schemas[table_name] = self.table_keys.names

    @classmethod
    def from_environment(
        cls,
        environ: Mapping[str, str] | None = None,
        client: DynamoDBClient | None = None,
        *,
        source: str | None = None,
        key_schemas: Mapping[str, Sequence[str]] | None = None,
    ) -> OutboxWriter:
        """A writer configured the way the module configured its publisher and sweeper.

        Reads the variables of the module's ``writer_environment`` output
        (``OUTBOX_TABLE_NAME``, ``OUTBOX_PUBLISH_TO``, ``OUTBOX_PARTITION_KEY``,
        ``OUTBOX_SORT_KEY``): set that map on the producer function and the
        table, its keys and its sink have one source, the module's inputs.
        With ``OUTBOX_MULTI_REGION=true`` (the output sets it when the module is
        deployed per region on a global table) the writer stamps its items with
        the runtime's region, ``AWS_REGION`` (Lambda sets it; elsewhere set it to
        the region of the client's endpoint).
        Raises :class:`InvalidWrite` naming a missing or bad variable.
        """
        environ = os.environ if environ is None else environ
        table_name = environ.get(ENV_TABLE_NAME, "").strip()
        if not table_name:
            raise InvalidWrite(f"environment variable {ENV_TABLE_NAME} is not set")
        try:
            keys = table_keys_from_environment(environ)
            publish_to = publish_to_from_environment(environ)
        except ConfigurationError as exc:
            raise InvalidWrite(str(exc)) from None
        region = _writing_region(environ)
        client_region = getattr(getattr(client, "meta", None), "region_name", None)
        if region is not None and isinstance(client_region, str) and client_region != region:
            # The stamp must name the replica that takes the write: a stamp of a region
            # without an outbox instance is published by no region (no filter admits it,
            # no sweeper reads its shards).
            raise InvalidWrite(
                f"{ENV_AWS_REGION} is {region} but the client writes to {client_region}: "
                "a multi-region writer stamps the region whose replica takes its writes; "
                f"give it a client of {region}, or set {ENV_AWS_REGION} to {client_region}"
            )
        return cls(
            table_name,
            client,
            source=source,
            key_schemas=key_schemas,
            publish_to=publish_to,
            partition_key=keys.partition,
            sort_key=keys.sort,
            region=region,
        )

    @property
    def client(self) -> DynamoDBClient:
        """The DynamoDB client, created once on first use when none was injected."""
        client = self._client
        if client is None:
            # boto3's default session is not thread-safe to create clients from,
            # and each client holds its own connection pool: make exactly one.
            with self._client_lock:
                client = self._client
                if client is None:
                    # Multi-region: the replica of the region it stamps (botocore reads
                    # AWS_DEFAULT_REGION, not AWS_REGION, where the stamp comes from).
                    client = self._client = boto3.client("dynamodb", region_name=self.region)
        return client

    def new_event(
        self,
        entity: Mapping[str, Any] | str,
        event_type: str,
        data: Mapping[str, Any],
        *,
        subject: str | None = None,
        source: str | None = None,
        correlation_id: str | None = None,
        traceparent: str | None = None,
        tracestate: str | None = None,
        dataschema: str | None = None,
        default: JsonDefault | None = None,
        event_id: str | None = None,
        time: datetime | str | None = None,
        sequence: int | None = None,
    ) -> Envelope:
        """An envelope about ``entity`` (an entity item or its partition key), with a fresh ULID.

        ``subject`` defaults to the entity's partition key and ``source`` to the writer's.
        Build events once and reuse the same envelopes when retrying with a
        ``client_request_token``: the id and time are part of the request.

        The envelope is a CloudEvents 1.0 event (:mod:`dynamodb_outbox.envelope`):
        ``data`` is its body, ``correlation_id`` its ``correlationid`` extension,
        ``dataschema`` an optional URI of the data's schema.

        ``traceparent`` (and ``tracestate``) record the trace the event belongs
        to, so the publisher and consumers continue it. Left out, the caller's
        own trace is recorded (OpenTelemetry's current span, the X-Ray SDK's
        segment or Lambda's X-Ray header, see :mod:`dynamodb_outbox.trace_context`),
        except with ``event_id``: a retried request runs in another trace, and a
        different envelope under the same ``client_request_token`` would be
        refused by DynamoDB (``IdempotentParameterMismatch``).

        ``data`` may hold what DynamoDB and Python hand you: ``Decimal``
        (written with its exact digits), aware ``datetime`` and ``date`` (ISO
        8601), ``UUID`` (string); see :mod:`dynamodb_outbox.payload_json` for
        the whole rule. ``default`` converts anything else, like
        :func:`json.dumps`'s (``default=bytes.hex``...).

        ``event_id`` (a canonical ULID, at most :data:`MAX_EVENT_ID_LEAD_SECONDS`
        ahead of now) replaces the fresh id, for a request a client may retry:
        derive it from the request's key with
        :func:`dynamodb_outbox.event_ids.event_id_for` and every retry builds the
        same event. ``time`` (an aware ``datetime`` or ISO 8601 text) defaults
        to the id's own time when ``event_id`` is given, so a retry is the same
        request byte for byte (what ``client_request_token`` needs).

        ``sequence`` (an integer from 1) is the event's place among its
        subject's events, carried as the envelope's ``sequence`` extension: on
        the ordered path the sweeper sends a subject's events in that order and
        the consumer toolkit can tell a gap or a reordering
        (:mod:`dynamodb_outbox.sequence_check`). Take it from the aggregate's
        version in the same transaction (the new version, with a ``condition``
        on the old one), so that sequence order is commit order.
        """
        partition_key = self.table_keys.partition
        pk = entity if isinstance(entity, str) else entity.get(partition_key)
        if subject is None:
            if not isinstance(pk, str) or not pk:
                raise InvalidWrite(
                    f"the entity has no string {partition_key} (the table's partition key); "
                    "pass subject= explicitly"
                )
            subject = pk
        source = source if source is not None else self.source
        if not source:
            raise InvalidWrite("an event needs a source: pass source= or OutboxWriter(source=...)")
        explicit_id = event_id
        if event_id is None:
            event_id = new_event_id()
        elif time is None:
            time = event_id_datetime(_checked_event_id(event_id))
        else:
            _checked_event_id(event_id)
        time_text = _event_time_text(datetime.now(UTC) if time is None else time)
        trace = _event_trace(traceparent, tracestate, captured=explicit_id is None)
        try:
            if default is not None:
                data = to_json_value(data, default=default)
            return Envelope(
                type=event_type,
                source=source,
                subject=subject,
                data=data,
                dataschema=dataschema,
                correlation_id=correlation_id,
                traceparent=trace.traceparent if trace else None,
                tracestate=trace.tracestate if trace else None,
                id=event_id,
                time=time_text,
                sequence=sequence,
            )
        except (InvalidEnvelope, PayloadNotEncodable) as exc:
            raise InvalidWrite(str(exc)) from exc

    def write(
        self,
        entity: Mapping[str, Any],
        events: Envelope | Iterable[Envelope],
        *,
        condition: Condition | None = None,
        extra_actions: Iterable[Mapping[str, Any]] = (),
        client_request_token: str | None = None,
        allow_no_events: bool = False,
    ) -> WriteResult:
        """Put ``entity`` and one outbox item per event, plus ``extra_actions``, all or nothing.

        ``entity`` holds plain Python values and must carry the table's string
        key attributes (``PK`` and ``SK`` by default); every event's outbox
        item goes into the entity's partition.
        ``condition`` guards the entity Put (``Condition.item_absent()`` for
        create-only). ``extra_actions`` are ``TransactItems`` elements (see the
        ``*_action`` builders); a missing ``TableName`` means this table.
        Actions are sent as: entity (0), events (1..n), extra actions; error
        messages and cancellation reasons use those indexes.

        Writing no event is refused (:class:`NoEvents`) unless
        ``allow_no_events``: a code path that forgot its event would otherwise
        lose it silently. ``client_request_token`` (≤ 36 characters) makes a
        retry of the same request idempotent for 10 minutes; botocore already
        sets one per call for its own retries, pass yours to cover your retries.

        Raises :class:`InvalidWrite` (nothing sent), :class:`TransactionCancelled`,
        :class:`IdempotentParameterMismatch` or :class:`TransactionInProgress`;
        other AWS errors propagate as botocore ``ClientError``.
        """
        pk, entity_action = self._entity_action(entity, condition)
        return self._transact(
            pk, [entity_action], events, extra_actions, client_request_token, allow_no_events
        )

    def update(
        self,
        key: Mapping[str, Any],
        update_expression: str,
        events: Envelope | Iterable[Envelope],
        *,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
        condition: Condition | None = None,
        extra_actions: Iterable[Mapping[str, Any]] = (),
        client_request_token: str | None = None,
    ) -> WriteResult:
        """Update the entity at ``key`` and put one outbox item per event, all or nothing.

        The counterpart of :meth:`write` for a change rather than a whole item:
        ``key`` holds the entity's string key attributes (``PK`` and ``SK`` by
        default), ``update_expression`` its ``UpdateExpression`` with
        ``names``/``values`` placeholders, shared with ``condition`` (e.g.
        ``Condition("#status = :placed", ...)``; with ``return_old_item=True``
        the item that failed it comes back on the :class:`CancellationReason`).
        The Update is action 0 with role ``"entity"``, the events follow, then
        ``extra_actions``.

        Raises like :meth:`write`.
        """
        pk, entity_action = self._entity_update_action(
            key, update_expression, names, values, condition
        )
        return self._transact(
            pk, [entity_action], events, extra_actions, client_request_token, False
        )

    def write_events(
        self,
        pk: str,
        events: Envelope | Iterable[Envelope],
        *,
        extra_actions: Iterable[Mapping[str, Any]] = (),
        client_request_token: str | None = None,
    ) -> WriteResult:
        """Write events into the partition ``pk`` without putting an entity.

        For changes expressed as extra actions instead of a full Put, e.g. an
        ``update_action`` on the entity plus its event, still in one transaction.
        """
        if not isinstance(pk, str) or not pk:
            raise InvalidWrite("pk must be a non-empty string")
        return self._transact(pk, [], events, extra_actions, client_request_token, False)

    # -- building the transaction

    def _transact(
        self,
        pk: str,
        actions: list[_Action],
        events: Envelope | Iterable[Envelope],
        extra_actions: Iterable[Mapping[str, Any]],
        client_request_token: str | None,
        allow_no_events: bool,
    ) -> WriteResult:
        envelopes = [events] if isinstance(events, Envelope) else list(events)
        if not envelopes and not allow_no_events:
            raise NoEvents(
                "no event to write: an outbox write without an event is almost always a "
                "forgotten event; pass allow_no_events=True if this write really has none"
            )
        for position, envelope in enumerate(envelopes):
            actions.append(self._event_action(pk, envelope, len(actions), position))
        _check_sequences(envelopes, pk, self.table_keys.partition)
        for position, raw in enumerate(extra_actions):
            actions.append(self._extra_action(raw, len(actions), position))
        _check_limits(actions)

        request: dict[str, Any] = {"TransactItems": [action.request for action in actions]}
        if client_request_token is not None:
            _check_token(client_request_token)
            request["ClientRequestToken"] = client_request_token
        try:
            self.client.transact_write_items(**request)
        except ClientError as error:
            translated = translate_client_error(error, actions)
            if translated is error:
                raise
            raise translated from error
        return WriteResult(
            pk=pk,
            event_ids=tuple(envelope.id for envelope in envelopes),
            outbox_sks=tuple(envelope.outbox_sk for envelope in envelopes),
            action_count=len(actions),
        )

    def _entity_action(
        self, entity: Mapping[str, Any], condition: Condition | None
    ) -> tuple[str, _Action]:
        if not isinstance(entity, Mapping):
            raise InvalidWrite(f"the entity must be a mapping, got {type(entity).__name__}")
        pk = _checked_entity_key(entity, self.table_keys)
        item = serialize_item(entity)
        body = {"TableName": self.table_name, "Item": item}
        if condition is not None:
            self._check_key_condition(condition)
            body.update(condition.to_request())
        key = self.table_keys.key_of(item)
        return pk, _Action(
            request={"Put": body},
            label=f"Put entity {self._describe_key(key)}",
            role="entity",
            identity=_identity(self.table_name, key),
            size=item_size(item),
        )

    def _entity_update_action(
        self,
        key: Mapping[str, Any],
        update_expression: str,
        names: Mapping[str, str] | None,
        values: Mapping[str, Any] | None,
        condition: Condition | None,
    ) -> tuple[str, _Action]:
        partition_key, sort_key = self.table_keys.names
        if not isinstance(key, Mapping) or set(key) != {partition_key, sort_key}:
            raise InvalidWrite(
                f"the key must be a mapping of exactly {partition_key} and {sort_key} "
                f"(the table's keys), got {key!r:.120}"
            )
        pk = _checked_entity_key(key, self.table_keys)
        if condition is not None:
            self._check_key_condition(condition)
        if not isinstance(update_expression, str) or not update_expression.strip():
            raise InvalidWrite("an update needs a non-empty update_expression")
        request = update_action(
            key,
            update_expression,
            names=names,
            values=values,
            condition=condition,
            table_name=self.table_name,
        )
        body = request["Update"]
        values_size = sum(
            attribute_value_size(v) for v in body.get("ExpressionAttributeValues", {}).values()
        )
        return pk, _Action(
            request=dict(request),
            label=f"Update entity {self._describe_key(body['Key'])}",
            role="entity",
            identity=_identity(self.table_name, body["Key"]),
            size=item_size(body["Key"]) + values_size,
        )

    def _event_action(self, pk: str, envelope: Envelope, index: int, position: int) -> _Action:
        if not isinstance(envelope, Envelope):
            raise InvalidWrite(
                f"event #{position} must be an Envelope (see OutboxWriter.new_event), "
                f"got {type(envelope).__name__}"
            )
        partition_key, sort_key = self.table_keys.names
        item = outbox_item(
            pk,
            envelope,
            self.pending_shards,
            partition_key=partition_key,
            sort_key=sort_key,
            region=self.region,
        )
        label = f"Put outbox event {envelope.type} {self._describe_key(item)}"
        self._check_sink_rules(envelope, index, label)
        return _Action(
            request={
                "Put": {
                    "TableName": self.table_name,
                    "Item": item,
                    # Event ids are ULIDs, so a clash means the same envelope was
                    # written twice: fail rather than overwrite a published event.
                    "ConditionExpression": "attribute_not_exists(#outbox_sk)",
                    "ExpressionAttributeNames": {"#outbox_sk": sort_key},
                }
            },
            label=label,
            role="event",
            identity=_identity(self.table_name, item),
            size=item_size(item),
        )

    def _check_key_condition(self, condition: Condition) -> None:
        """Refuse ``Condition.item_absent()``/``item_exists()`` on a key this table lacks."""
        for placeholder in ("#absent_key", "#present_key"):
            name = (condition.names or {}).get(placeholder)
            if name is not None and name not in self.table_keys.names:
                raise InvalidWrite(
                    f"the condition tests {name!r}, which is not a key of table "
                    f"{self.table_name!r} ({self.table_keys.partition}/{self.table_keys.sort}): "
                    "every item would pass it; pass the partition key, e.g. "
                    f"Condition.item_absent({self.table_keys.partition!r})"
                )

    def _describe_key(self, key: Mapping[str, Any]) -> str:
        """``PK=ORDER#1 SK=META``: this table's key, or every key attribute of another table."""
        names = [name for name in self.table_keys.names if name in key] or sorted(key)
        return " ".join(f"{name}={_short(key[name])}" for name in names)

    def _check_sink_rules(self, envelope: Envelope, index: int, label: str) -> None:
        rules = self.sink_rules
        event = OutboundEvent.of(envelope)
        size = rules.entry_size(event)
        if size > rules.max_request_bytes:
            raise EventTooLarge(
                f"action {index} ({label}): the event is {size} bytes for {rules.name}, over its "
                f"limit of {rules.max_request_bytes} bytes; it could never be published "
                "(store the data in the entity and publish a reference instead)",
                limit=rules.max_request_bytes,
                actual=size,
                index=index,
            )
        delivered = rules.delivery_size(event)
        if delivered > rules.max_delivery_bytes:
            # PutEvents/Publish would take it, the consumer queue (or its DLQ) would not:
            # on AWS a silent loss once the outbox item is deleted (dynamodb_outbox.sizes).
            raise EventTooLarge(
                f"action {index} ({label}): the event becomes a queue message of up to "
                f"{delivered} bytes after {rules.name}, over the {rules.max_delivery_bytes} "
                "bytes every consumer queue and DLQ can take; it could never be delivered "
                "(store the data in the entity and publish a reference instead)",
                limit=rules.max_delivery_bytes,
                actual=delivered,
                index=index,
            )
        refusal = rules.refusal(event)
        if refusal is not None:
            raise UnpublishableEvent(
                f"action {index} ({label}): {rules.name} would never accept this event: {refusal}",
                index=index,
            )

    def _extra_action(self, raw: Mapping[str, Any], index: int, position: int) -> _Action:
        where = f"extra action #{position} (action {index})"
        if not isinstance(raw, Mapping) or len(raw) != 1:
            raise InvalidWrite(
                f"{where} must be a mapping with exactly one of {', '.join(_ACTION_KINDS)}"
            )
        ((kind, body),) = raw.items()
        if kind not in _ACTION_KINDS or not isinstance(body, Mapping):
            raise InvalidWrite(
                f"{where}: {kind!r} is not one of {', '.join(_ACTION_KINDS)} with a mapping body"
            )
        body = dict(body)
        table = body.setdefault("TableName", self.table_name)
        if not isinstance(table, str) or not table:
            raise InvalidWrite(f"{where}: TableName must be a non-empty string")
        on_other_table = "" if table == self.table_name else f" on {table}"

        if kind == "Put":
            item = body.get("Item")
            if not isinstance(item, Mapping):
                raise InvalidWrite(f"{where}: a Put needs an Item mapping")
            schema = self._key_schemas.get(table)
            key = {name: item[name] for name in schema if name in item} if schema else None
            size = item_size(item)
            label = f"Put{on_other_table} {self._describe_key(key) if key else '(key unknown)'}"
            identity = _identity(table, key) if key else None
        else:
            key = body.get("Key")
            if not isinstance(key, Mapping) or not key:
                raise InvalidWrite(f"{where}: a {kind} needs a Key mapping")
            if kind == "Update" and not body.get("UpdateExpression"):
                raise InvalidWrite(f"{where}: an Update needs an UpdateExpression")
            values = body.get("ExpressionAttributeValues") or {}
            size = item_size(key) + sum(attribute_value_size(v) for v in values.values())
            label = f"{kind}{on_other_table} {self._describe_key(key)}"
            identity = _identity(table, key)
        return _Action(
            request={kind: body}, label=label, role="extra", identity=identity, size=size
        )


# ------------------------------------------------------------------------- checks


def _writing_region(environ: Mapping[str, str]) -> str | None:
    """``AWS_REGION`` when ``OUTBOX_MULTI_REGION`` is true; None when it is unset or false."""
    try:
        multi_region = multi_region_from_environment(environ)
    except ConfigurationError as exc:
        raise InvalidWrite(str(exc)) from None
    if not multi_region:
        return None
    region = environ.get(ENV_AWS_REGION, "").strip()
    if not region:
        raise InvalidWrite(
            f"{ENV_MULTI_REGION} is true but {ENV_AWS_REGION} is not set: the writer must "
            "stamp its items with the region it writes in"
        )
    return region


def _check_sequences(envelopes: Sequence[Envelope], pk: str, partition_key: str) -> None:
    """A sequenced event's subject is its partition key; two never share a ``sequence``.

    The publishers find a subject's pending sequences with one Query of the
    event's partition: a subject spread over partitions could not be ordered
    (docs/decisions.md, "What "in order per subject" means on the ordered path").
    """
    seen: dict[tuple[str, int], int] = {}
    for position, envelope in enumerate(envelopes):
        if envelope.sequence is None:
            continue
        if envelope.subject != pk:
            raise InvalidWrite(
                f"event #{position} carries sequence {envelope.sequence} but its subject "
                f"{_short(envelope.subject)} is not the {partition_key} it is written under "
                f"({_short(pk)}): a sequenced event's subject must be its partition key value, "
                "the unit its order is kept in; drop subject= or write it under that partition"
            )
        earlier = seen.setdefault((envelope.subject, envelope.sequence), position)
        if earlier != position:
            raise InvalidWrite(
                f"events #{earlier} and #{position} of subject {_short(envelope.subject)} both "
                f"carry sequence {envelope.sequence}: a subject's sequence numbers must differ"
            )


def _check_limits(actions: Sequence[_Action]) -> None:
    if len(actions) > MAX_TRANSACTION_ACTIONS:
        raise TooManyActions(
            f"the transaction has {len(actions)} actions; TransactWriteItems allows at most "
            f"{MAX_TRANSACTION_ACTIONS}",
            limit=MAX_TRANSACTION_ACTIONS,
            actual=len(actions),
        )
    seen: dict[tuple[Any, ...], int] = {}
    for index, action in enumerate(actions):
        # Only a Put's size is known here; an Update's resulting item is checked by AWS.
        if "Put" in action.request and action.size > MAX_ITEM_BYTES:
            raise ItemTooLarge(
                f"action {index} ({action.label}) is about {action.size} bytes, over "
                f"DynamoDB's item limit of {MAX_ITEM_BYTES} bytes (estimate rounds up)",
                limit=MAX_ITEM_BYTES,
                actual=action.size,
                index=index,
            )
        if action.identity is None:
            continue
        if action.identity in seen:
            first = seen[action.identity]
            raise DuplicateItemInTransaction(
                f"action {index} ({action.label}) and action {first} "
                f"({actions[first].label}) target the same item; TransactWriteItems allows "
                "one action per item (put a check on the entity into its condition instead)",
                first_index=first,
                second_index=index,
            )
        seen[action.identity] = index
    total = sum(action.size for action in actions)
    if total > MAX_TRANSACTION_BYTES:
        raise TransactionTooLarge(
            f"the transaction's items add up to about {total} bytes, over the "
            f"TransactWriteItems limit of {MAX_TRANSACTION_BYTES} bytes",
            limit=MAX_TRANSACTION_BYTES,
            actual=total,
        )


def _checked_entity_key(entity: Mapping[str, Any], keys: TableKeys) -> str:
    """The entity's partition key, once both keys are strings and the sort key no outbox key."""
    for attribute in keys.names:
        value = entity.get(attribute)
        if not isinstance(value, str) or not value:
            raise InvalidWrite(
                f"the entity needs a non-empty string {attribute} (the table's key), got {value!r}"
            )
    if entity[keys.sort].startswith(OUTBOX_SK_PREFIX):
        raise InvalidWrite(
            f"the entity's {keys.sort} {entity[keys.sort]!r} starts with {OUTBOX_SK_PREFIX!r}, "
            "which is reserved for outbox items: the publisher would take the entity for an event"
        )
    return cast(str, entity[keys.partition])


def _checked_event_id(event_id: Any) -> str:
    try:
        issued = event_id_datetime(event_id)
    except ValueError as exc:
        raise InvalidWrite(
            f"event_id {str(event_id)[:64]!r} is not a ULID ({exc}); the outbox sort key "
            "OUTBOX#<id> must sort by time: derive one with event_ids.event_id_for(key, at)"
        ) from None
    lead = (issued - datetime.now(UTC)).total_seconds()
    if lead > MAX_EVENT_ID_LEAD_SECONDS:
        raise InvalidWrite(
            f"event_id {event_id!r} is dated {issued.isoformat()}, {lead:.0f} s ahead of now "
            f"(at most {MAX_EVENT_ID_LEAD_SECONDS}): the sweeper would not see the event "
            "until then"
        )
    return cast(str, event_id)


def _event_trace(
    traceparent: str | None, tracestate: str | None, *, captured: bool
) -> TraceContext | None:
    if traceparent is None:
        return trace_context.current() if captured else None
    trace = TraceContext.parse(traceparent, tracestate)
    if trace is None:
        raise InvalidWrite(
            f"traceparent {str(traceparent)[:64]!r} is not a W3C traceparent "
            "(00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, ids not all zeros)"
        )
    return trace


def _event_time_text(time: datetime | str) -> str:
    if isinstance(time, str):
        return time
    if not isinstance(time, datetime) or time.utcoffset() is None:
        raise InvalidWrite(f"time must be an aware datetime or RFC 3339 text, got {time!r:.64}")
    return iso_milliseconds(time, keep_offset=True)


def _check_token(token: Any) -> None:
    if not isinstance(token, str) or not 1 <= len(token) <= MAX_CLIENT_REQUEST_TOKEN_LENGTH:
        actual = len(token) if isinstance(token, str) else type(token).__name__
        raise InvalidWrite(
            "client_request_token must be a string of 1 to "
            f"{MAX_CLIENT_REQUEST_TOKEN_LENGTH} characters, got {actual}"
        )


def _identity(table: str, key: Mapping[str, Any]) -> tuple[Any, ...]:
    """A hashable id of (table, key); numbers are normalised because 1 and 1.0 are one key."""
    parts = []
    for name in sorted(key):
        value = key[name]
        ((kind, data),) = value.items()
        if kind == "N":
            with contextlib.suppress(InvalidOperation):
                data = str(Decimal(data).normalize())
        elif kind == "B":
            data = bytes(data) if not isinstance(data, str) else data.encode()
        parts.append((name, kind, data))
    return (table, tuple(parts))


def _short(value: Any) -> str:
    if isinstance(value, Mapping) and len(value) == 1:
        ((kind, data),) = value.items()
        if kind == "B" and not isinstance(data, str):
            data = base64.b64encode(bytes(data)).decode()
        text = str(data)
    else:
        text = str(value)
    return text if len(text) <= 64 else text[:61] + "..."
