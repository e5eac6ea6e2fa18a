"""What the ``outbox-ops`` commands share: clients, errors, keys, index reads, publishing.

Only boto3/botocore, the standard library and the light ``envelope`` module are
imported here. The publishing core (and Powertools with it) is imported on first use
by the commands that publish, so ``outbox-ops --help`` and the read-only
commands stay fast and the module is harmless in the Lambda zip.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from dynamodb_outbox.envelope import (
    ATTR_PENDING_SHARD,
    OUTBOX_SK_PREFIX,
)
from dynamodb_outbox.event_ids import event_id_milliseconds
from dynamodb_outbox.pending_index import (
    BATCH_GET_MAX_KEYS,
    DEFAULT_READ_RETRIES,
    OldestFirst,
    ShardCursor,
    key_id,
    read_back,
    shard_keys,
    sort_key,
    ulid_time,
)
from dynamodb_outbox.regions import regional_shard
from dynamodb_outbox.sizes import FIFO_SUFFIX
from dynamodb_outbox.stream_types import string_attribute
from dynamodb_outbox.table_keys import TableKeys

if TYPE_CHECKING:
    from dynamodb_outbox.publishing import PublishResult
    from dynamodb_outbox.sinks import Sink

AttributeMap = dict[str, dict[str, Any]]
ClientFactory = Callable[[str], Any]

EXIT_OK: Final = 0
#: AWS said no (missing table, queue, permission) or could not be reached.
EXIT_AWS_ERROR: Final = 1
#: Bad input: arguments, ARNs, ids (argparse uses 2 as well).
EXIT_BAD_INPUT: Final = 2
#: The command ran but left work undone (a retryable publish failure...): re-run it.
EXIT_INCOMPLETE: Final = 3

_FIFO: Final = f"(?:{re.escape(FIFO_SUFFIX)})?"
_SQS_ARN: Final = re.compile(
    rf"arn:(aws[a-z-]*):sqs:([a-z0-9-]+):(\d{{12}}):([A-Za-z0-9_-]{{1,80}}{_FIFO})"
)
_STREAM_ARN: Final = re.compile(
    r"arn:(aws[a-z-]*):dynamodb:([a-z0-9-]+):(\d{12}):table/([A-Za-z0-9_.-]{3,255})/stream/(.+)"
)
# "User: arn:... is not authorized to perform: dynamodb:Query on resource: arn:..."
_DENIED: Final = re.compile(r"perform: ([\w-]+:\w+) on resource: (\S+?)[\s,.]*(?:\s|$)")

_SERVICE_OF_CLIENT: Final = {
    "dynamodb": "dynamodb",
    "dynamodbstreams": "dynamodb",
    "sqs": "sqs",
    "events": "events",
    "sns": "sns",
}


class OpsError(Exception):
    """A one-line message for the operator and the exit code that goes with it."""

    def __init__(self, message: str, exit_code: int = EXIT_AWS_ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def bad_input(message: str) -> OpsError:
    return OpsError(message, EXIT_BAD_INPUT)


@dataclass
class Report:
    """What a command did: ``data`` for ``--json``, ``lines`` for people."""

    data: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    exit_code: int = EXIT_OK

    def say(self, line: str) -> None:
        self.lines.append(line)


@dataclass
class Context:
    """Global options and the client factory, as every command gets them."""

    table: str
    region: str
    dry_run: bool
    pending_index: str
    pending_shards: int
    make_client: ClientFactory
    now: datetime
    #: The table's key names (``--partition-key``/``--sort-key`` or the environment).
    table_keys: TableKeys
    #: Whose pending shards the pending index is read in (multi-region,
    #: ``--written-in``): None stands for the unprefixed shards of a single region.
    written_in: tuple[str | None, ...] = (None,)
    #: Where a command that waits reports how far it got (stderr; the report is stdout).
    progress: Callable[[str], None] = field(default=lambda line: None)
    _clients: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self.make_client(service)
        return self._clients[service]


# -------------------------------------------------------------------------- errors


def error_code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or "")
    return type(exc).__name__


def explain_client_error(exc: ClientError, ctx: Context | None, resource: str | None) -> str:
    """One line naming what is missing or forbidden, never a traceback."""
    code = error_code(exc)
    message = str(exc.response.get("Error", {}).get("Message") or "").strip()
    operation = exc.operation_name or "call"
    region = ctx.region if ctx is not None else "?"
    if code in {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"} or (
        "not authorized to perform" in message
    ):
        found = _DENIED.search(message)
        if found:
            return f"missing permission {found.group(1)} on {found.group(2)}"
        service = _service_of(exc)
        if service == "dynamodb" and ctx is not None:
            streams = {"GetShardIterator", "GetRecords", "DescribeStream"}
            resource = f"{'the stream of ' if operation in streams else ''}table {ctx.table}"
        return f"missing permission {service}:{operation} on {resource or 'the resource'}"
    if code in {"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"}:
        return f"queue {resource or '?'} not found in region {region}"
    if code == "ResourceNotFoundException" and _service_of(exc) == "dynamodb":
        if operation in {"GetShardIterator", "GetRecords", "DescribeStream"}:
            return f"stream or shard {resource or '?'} not found in region {region}"
        table = ctx.table if ctx is not None else "?"
        return f"table {table} not found in region {region}"
    if code == "ValidationException" and "specified index" in message and ctx is not None:
        return (
            f"index {ctx.pending_index} not found on table {ctx.table} "
            f"(pass --pending-index): {message}"
        )
    return f"{operation} failed: {code or 'error'}: {message or exc}"


def _service_of(exc: ClientError) -> str:
    # botocore puts the service id nowhere on the exception; the operation names
    # of the clients used here do not overlap, so a table lookup is enough.
    dynamodb_ops = {
        "Query",
        "Scan",
        "GetItem",
        "BatchGetItem",
        "UpdateItem",
        "BatchWriteItem",
        "DescribeTable",
        "GetShardIterator",
        "GetRecords",
        "DescribeStream",
    }
    operation = exc.operation_name or ""
    if operation in dynamodb_ops:
        return "dynamodb"
    if operation in {
        "PutEvents",
        "DescribeArchive",
        "DescribeRule",
        "StartReplay",
        "DescribeReplay",
    }:
        return "events"
    if operation in {"PublishBatch", "Publish"}:
        return "sns"
    return "sqs"


def explain(exc: BaseException, ctx: Context | None, resource: str | None = None) -> str:
    if isinstance(exc, ClientError):
        return explain_client_error(exc, ctx, resource)
    if isinstance(exc, BotoCoreError):
        return f"AWS call failed: {exc}"
    return str(exc)


# ---------------------------------------------------------------------------- ARNs


@dataclass(frozen=True)
class QueueArn:
    arn: str
    region: str
    account: str
    name: str


def parse_queue_arn(arn: str, option: str) -> QueueArn:
    found = _SQS_ARN.fullmatch(arn)
    if not found:
        raise bad_input(
            f"{option} must be an SQS queue ARN (arn:aws:sqs:<region>:<account>:<name>), "
            f"got {arn!r}"
        )
    return QueueArn(arn=arn, region=found.group(2), account=found.group(3), name=found.group(4))


def check_topic_arn(arn: str) -> str:
    from dynamodb_outbox.sinks import parse_topic_arn

    try:
        return parse_topic_arn(arn).arn
    except ValueError as exc:
        raise bad_input(f"--topic-arn {exc}") from None


def stream_table(stream_arn: str) -> str | None:
    """The table a DynamoDB stream ARN belongs to, or None if it is not one."""
    found = _STREAM_ARN.fullmatch(stream_arn)
    return found.group(4) if found else None


def check_queue_url(url: str) -> str:
    if not re.fullmatch(rf"https?://\S+/\d{{12}}/[A-Za-z0-9_-]{{1,80}}{_FIFO}", url):
        raise bad_input(
            f"--queue-url must be an SQS queue URL (https://sqs.<region>.amazonaws.com/"
            f"<account>/<name>), got {url!r}"
        )
    return url


# ---------------------------------------------------------------------- ULIDs, keys


def event_id_of(sort_key: str) -> str:
    return sort_key[len(OUTBOX_SK_PREFIX) :] if sort_key.startswith(OUTBOX_SK_PREFIX) else ""


def age_seconds(sort_key: str, now: datetime) -> float | None:
    made = ulid_time(sort_key)
    return None if made is None else max(0.0, (now - made).total_seconds())


def format_age(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    whole = int(seconds)
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def check_event_id(event_id: str) -> str:
    try:
        event_id_milliseconds(event_id)
    except ValueError:
        raise bad_input(f"--event-id must be a ULID (26 characters), got {event_id!r}") from None
    return event_id


def s(item: Mapping[str, Any], name: str) -> str:
    return string_attribute(item, name) or ""


def key_of(item: Mapping[str, Any], ctx: Context) -> AttributeMap:
    return ctx.table_keys.key_of(item)


# -------------------------------------------------------------------------- reads


def query_pages(client: Any, **request: Any) -> Iterator[Mapping[str, Any]]:
    while True:
        response = client.query(**request)
        yield response
        last = response.get("LastEvaluatedKey")
        if not last:
            return
        request["ExclusiveStartKey"] = last


def pending_index_keys(
    ctx: Context,
    *,
    low_sk: str | None = None,
    high_sk: str | None = None,
    limit: int | None = None,
) -> list[AttributeMap]:
    """Pending outbox keys from the sparse index, oldest first across shards.

    ``low_sk``/``high_sk`` bound the sort key (inclusive); ``limit`` caps the
    keys returned (and the size of each page read).
    """
    client = ctx.client("dynamodb")

    def query(request: dict[str, Any]) -> Mapping[str, Any]:
        response: Mapping[str, Any] = client.query(
            TableName=ctx.table, IndexName=ctx.pending_index, ScanIndexForward=True, **request
        )
        return response

    condition: str | None = None
    values: dict[str, Any] = {}
    if low_sk is not None or high_sk is not None:
        condition = "#sk BETWEEN :low AND :high"
        values[":low"] = {"S": low_sk or OUTBOX_SK_PREFIX}
        values[":high"] = {"S": high_sk or OUTBOX_SK_PREFIX + "\U0010ffff"}
    merged = OldestFirst(
        [
            ShardCursor(
                query,
                shard,
                sort_key_condition=condition,
                values=values,
                page_limit=limit,
                table_keys=ctx.table_keys,
            )
            for shard in _shards(ctx, None)
        ]
    )
    keys: list[AttributeMap] = []
    while merged.peek() is not None and (limit is None or len(keys) < limit):
        key = merged.pop()
        if sort_key(key, ctx.table_keys).startswith(OUTBOX_SK_PREFIX):
            keys.append(key)
    return keys


def _shards(ctx: Context, regions: Sequence[str | None] | None) -> list[str]:
    """The pending-index partitions to read: each region's shards (None: unprefixed)."""
    return [
        regional_shard(shard, region)
        for region in (ctx.written_in if regions is None else regions)
        for shard in shard_keys(ctx.pending_shards)
    ]


def count_pending(ctx: Context, regions: Sequence[str | None] | None = None) -> int:
    """Pending items in the shards of ``regions`` (default: ``ctx.written_in``)."""
    client = ctx.client("dynamodb")
    total = 0
    for shard in _shards(ctx, regions):
        for page in query_pages(
            client,
            TableName=ctx.table,
            IndexName=ctx.pending_index,
            KeyConditionExpression="#shard = :shard",
            ExpressionAttributeNames={"#shard": ATTR_PENDING_SHARD},
            ExpressionAttributeValues={":shard": {"S": shard}},
            Select="COUNT",
        ):
            total += int(page.get("Count") or 0)
    return total


def batch_get(
    ctx: Context,
    keys: Sequence[AttributeMap],
    *,
    consistent: bool = True,
) -> list[AttributeMap]:
    """The items of ``keys`` that exist, in the order of ``keys`` (duplicates dropped)."""
    client = ctx.client("dynamodb")
    found: dict[str, AttributeMap] = {}
    unique: dict[str, AttributeMap] = {}
    for key in keys:
        unique.setdefault(key_id(key, ctx.table_keys), key)
    ordered = list(unique.values())
    for start in range(0, len(ordered), BATCH_GET_MAX_KEYS):
        chunk = ordered[start : start + BATCH_GET_MAX_KEYS]
        read = read_back(client, ctx.table, chunk, consistent=consistent, table_keys=ctx.table_keys)
        if read.unread:
            raise OpsError(
                f"DynamoDB left {len(read.unread)} keys unread after "
                f"{DEFAULT_READ_RETRIES} retries (throttled?); nothing was done with them, "
                "re-run",
                EXIT_INCOMPLETE,
            )
        found.update(read.items)
    ids = [key_id(key, ctx.table_keys) for key in ordered]
    return [found[key] for key in ids if key in found]


# ---------------------------------------------------------------------- publishing


def make_sink(ctx: Context, bus_name: str | None, topic_arn: str | None) -> Sink:
    """The sink the flags name; without flags, the publisher's environment variables."""
    from dynamodb_outbox.settings import ConfigurationError, sink_from_environment
    from dynamodb_outbox.sinks import EventBridgeSink, SnsSink

    try:
        if bus_name:
            return EventBridgeSink(ctx.client("events"), bus_name)
        if topic_arn:
            return SnsSink(ctx.client("sns"), check_topic_arn(topic_arn))
        return sink_from_environment(client_factory=ctx.client)
    except ConfigurationError as exc:
        raise bad_input(f"pass --bus-name or --topic-arn ({exc})") from None
    except ValueError as exc:  # a sink refusing its bus name or topic ARN
        raise bad_input(str(exc)) from None


@contextlib.contextmanager
def publisher_logs_to_stderr() -> Iterator[None]:
    """The publisher logs JSON to stdout (Lambda's log stream); here stdout is the report."""
    from dynamodb_outbox import publishing

    handler = publishing.logger.registered_handler
    if not isinstance(handler, logging.StreamHandler):
        yield
        return
    # Swapped without setStream: that flushes the old stream, which may be closed.
    previous = handler.stream
    handler.stream = sys.stderr
    try:
        yield
    finally:
        handler.stream = previous


def publish_items(
    ctx: Context, items: Sequence[AttributeMap], sink: Sink
) -> tuple[PublishResult, list[str]]:
    """Publish pending ``items`` through the publisher's core; also the event ids left pending."""
    from dynamodb_outbox.publishing import (
        OutboxCandidate,
        PublishDependencies,
        publish_outbox_items,
    )

    sort = ctx.table_keys.sort
    candidates = [
        OutboxCandidate(
            key=key_of(item, ctx), item=item, position=position, checkpoint=s(item, sort)
        )
        for position, item in enumerate(items)
    ]
    with publisher_logs_to_stderr():
        deps = PublishDependencies(
            sink, ctx.table, ctx.client("dynamodb"), table_keys=ctx.table_keys
        )
        result = publish_outbox_items(candidates, deps)
    left: list[str] = []
    if result.failure_position is not None:
        left = [event_id_of(s(item, sort)) for item in items[result.failure_position :]]
    elif result.stopped_at_position is not None:
        left = [event_id_of(s(item, sort)) for item in items[result.stopped_at_position :]]
    return result, left


def publish_summary(result: PublishResult) -> dict[str, Any]:
    return {
        "published": result.published,
        "deleted": result.deleted,
        "quarantined": result.quarantined,
        "retryable_failures": result.retryable_failures,
        "delete_leftovers": result.delete_leftovers,
    }
