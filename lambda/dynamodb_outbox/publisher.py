"""Stream publisher: DynamoDB stream → event bus, then delete what was published.

Lambda entry point: ``dynamodb_outbox.publisher.handler``, fed by a DynamoDB
Streams event source mapping with ``ReportBatchItemFailures``.

The rules, and why:

* The partial batch response of a stream is a checkpoint: Lambda retries from
  the lowest sequence number reported, re-sending everything after it. So an
  entry that fails retryably (throttling, an internal error) is retried inside
  the invocation, first in the next call with backoff, for as long as the
  invocation's remaining time allows; only what still fails then is reported,
  as one record: the lowest position not yet done.
* A record that can never succeed (poison) must not block its shard, and must
  not be lost either: its outbox item is quarantined in the table (marked and
  taken out of the pending index), counted and logged; the batch goes on.
* An outbox item is deleted only after its event was published. A delete that
  fails leaves an item the sweeper publishes again later: a duplicate, which
  consumers absorb by event id, never a loss. So a failed delete never fails
  the batch.

* One record never fails a batch: whatever reading, sizing or building the
  request for it raises, that record alone is quarantined with the reason.
  Only AWS being unreachable or answering a call with an error holds the
  batch (at that record, as a checkpoint).

The sending side sits behind :class:`~dynamodb_outbox.sinks.Sink`
(``PutEvents`` or ``PublishBatch``) and its rules (sizes, fields, which error
codes are poison); the failure handling stays here.

The stream handler and the sweeper share one core,
:func:`dynamodb_outbox.publishing.publish_outbox_items`: same planning,
batching, failure rules, quarantine and delete. The stream wrapper,
:func:`publish_stream_batch`, turns records into candidates and the first
failure into a sequence-number checkpoint.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from functools import cache
from typing import Final, NamedTuple

import boto3
from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import BotoCoreError, ClientError

from dynamodb_outbox._clock import remaining_seconds
from dynamodb_outbox.outbox_item import ATTR_STATUS, OUTBOX_SK_PREFIX, STATUS_QUARANTINED
from dynamodb_outbox.pending_index import (
    BATCH_GET_MAX_KEYS,
    is_pending,
    key_id,
    read_back,
    sort_key,
)
from dynamodb_outbox.publishing import (
    OutboxCandidate,
    PublishDependencies,
    PublisherDynamoDBClient,
    PublishResult,
    describe_error,
    logger,
    lookup,
    publish_outbox_items,
    string_attribute,
)
from dynamodb_outbox.regions import SINGLE_REGION, RegionScope
from dynamodb_outbox.settings import (
    DEFAULT_METRICS_NAMESPACE,
    ENV_TABLE_NAME,
    region_scope_from_environment,
    required_env,
    sink_from_environment,
    sweeper_enabled_from_environment,
    table_keys_from_environment,
)
from dynamodb_outbox.sinks import (
    EVENTBRIDGE_RULES,
    Sink,
)
from dynamodb_outbox.stream_types import (
    AttributeMap,
    DynamoDBStreamEvent,
    DynamoDBStreamRecord,
    PartialBatchResponse,
)
from dynamodb_outbox.subject_sequences import (
    PendingSequences,
    lower_pending,
    partition_of,
    pending_sequences,
    sequence_of,
    subject_of,
)
from dynamodb_outbox.table_keys import TableKeys

__all__ = [
    "MissingSequenceNumber",
    "default_runtime",
    "handler",
    "publish_stream_batch",
    "read_stream_batch",
    "record_metrics",
]

# Reads of lower sequences are retried only while this much of the invocation is left.
_READ_RETRY_RESERVE_SECONDS: Final = 1.0

metrics = Metrics(
    namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", DEFAULT_METRICS_NAMESPACE)
)


# ---------------------------------------------------------------------------- result


class MissingSequenceNumber(RuntimeError):
    """The record to retry from has no sequence number to report.

    Lambda reads an empty or null ``itemIdentifier`` as "the whole batch failed";
    raising has the same effect but says so plainly, shows in the function's
    Errors metric and lets bisect-on-error split the batch. Retrying the whole
    batch re-publishes what was already sent: duplicates, never a loss.
    ``result`` holds what was done before (published items are already deleted).
    """

    def __init__(self, message: str, result: PublishResult) -> None:
        super().__init__(message)
        self.result = result


# ------------------------------------------------------------------- stream records


class _Skip(NamedTuple):
    position: int
    sequence_number: str | None


class _Unreadable(NamedTuple):
    position: int
    sequence_number: str | None
    why: str


def _key(keys: object, table_keys: TableKeys) -> AttributeMap | None:
    pk, sk = lookup(keys, table_keys.partition), lookup(keys, table_keys.sort)
    if not isinstance(pk, Mapping) or not isinstance(sk, Mapping):
        return None
    return {table_keys.partition: dict(pk), table_keys.sort: dict(sk)}


def _read_stream_record(
    position: int, record: object, table_keys: TableKeys, scope: RegionScope = SINGLE_REGION
) -> _Skip | _Unreadable | OutboxCandidate:
    try:
        return _stream_candidate(position, record, table_keys, scope)
    except Exception as exc:
        return _Unreadable(position, None, f"record cannot be read: {describe_error(exc)}")


def _stream_candidate(
    position: int, record: object, table_keys: TableKeys, scope: RegionScope = SINGLE_REGION
) -> _Skip | _Unreadable | OutboxCandidate:
    stream = lookup(record, "dynamodb")
    sequence = lookup(stream, "SequenceNumber")
    sequence_number = sequence if isinstance(sequence, str) and sequence else None
    if lookup(record, "eventName") != "INSERT":
        return _Skip(position, sequence_number)
    keys = lookup(stream, "Keys")
    if not isinstance(keys, Mapping):
        return _Unreadable(position, sequence_number, "record has no dynamodb.Keys")
    sk = string_attribute(keys, table_keys.sort)
    if sk is None or not sk.startswith(OUTBOX_SK_PREFIX):
        return _Skip(position, sequence_number)
    key = _key(keys, table_keys)
    if key is None:
        return _Unreadable(
            position, sequence_number, f"outbox record {sk!r} has no {table_keys.partition} key"
        )
    image = lookup(stream, "NewImage")
    if not scope.takes(image if isinstance(image, Mapping) else None):
        # Multi-region: written in (stamped by) another region, which publishes it;
        # its replicated INSERT reaches this region's stream too. The mapping's
        # filter drops it first (main.tf); this is the check in code.
        return _Skip(position, sequence_number)
    if string_attribute(image, ATTR_STATUS) == STATUS_QUARANTINED:
        # An INSERT of a quarantined item: only a global table's last writer wins
        # makes one (a quarantine in another region later than this region's delete,
        # which followed the publication). Kept, as every quarantined item is:
        # never re-published without a release (pending_index.is_pending).
        return _Skip(position, sequence_number)
    return OutboxCandidate(
        key=key,
        item=image if isinstance(image, Mapping) else None,
        position=position,
        checkpoint=sequence_number,
    )


def read_stream_batch(
    records: Sequence[DynamoDBStreamRecord],
    table_keys: TableKeys,
    region_scope: RegionScope = SINGLE_REGION,
) -> tuple[list[OutboxCandidate], PublishResult]:
    """The outbox inserts of a stream batch, as candidates; the others counted and logged.

    ``table_keys`` names the table's key attributes: a record whose sort key
    (under that name) does not start with ``OUTBOX#`` is skipped. In a
    multi-region deployment, so is an insert ``region_scope`` does not take
    (stamped with another region, :mod:`dynamodb_outbox.regions`).
    """
    result = PublishResult(records=len(records))
    candidates: list[OutboxCandidate] = []
    for position, record in enumerate(records):
        parsed = _read_stream_record(position, record, table_keys, region_scope)
        if isinstance(parsed, _Skip):
            result.skipped += 1
        elif isinstance(parsed, _Unreadable):
            # Without a key there is no item to mark; blocking the shard on it
            # would not help either. The log line is the only trace left.
            result.unreadable += 1
            logger.error(
                "unreadable stream record skipped",
                extra={"why": parsed.why, "sequence_number": parsed.sequence_number},
            )
        else:
            candidates.append(parsed)
    return candidates, result


class _Ordered(NamedTuple):
    """The candidates to send, in order; and where the batch must stop (a checkpoint)."""

    candidates: list[OutboxCandidate]
    stop: OutboxCandidate | None = None


def _send_lower_sequences_first(
    candidates: list[OutboxCandidate],
    deps: PublishDependencies[PublisherDynamoDBClient],
    result: PublishResult,
    *,
    sweeper_runs: bool,
    time_left: Callable[[], float] | None,
) -> _Ordered:
    """The candidates with, before each sequenced one, the lower pending sequences of its subject.

    Stream records of two outbox items are ordered by nothing AWS documents,
    so before a sequenced event the lower sequences of its subject still
    pending (one consistent Query of its partition, subject_sequences.py) are
    read by key and sent first, in sequence order, with the event's checkpoint.
    Events without a sequence cost nothing here.

    When a lower one cannot be read (unprocessed keys), the event stays pending
    for the sweeper if one runs (``sweeper_runs``), untouched; without a sweeper
    the batch stops there (a checkpoint: Lambda retries from that record), so
    nothing is left in no one's hands. A failed Query or read stops the batch
    there too: what comes before it is still published.
    """
    ordered: list[OutboxCandidate] = []
    by_partition: dict[str, PendingSequences] = {}
    done: set[str] = set()
    client, table_keys = deps.dynamodb_client, deps.table_keys
    for candidate in candidates:
        item = candidate.item
        sk = string_attribute(candidate.key, table_keys.sort) or ""
        if sk in done:
            continue  # already sent first, before a higher sequence of its subject
        sequence, subject = sequence_of(item), subject_of(item)
        if item is None or sequence is None or subject is None:
            ordered.append(candidate)
            done.add(sk)
            continue
        partition = partition_of(candidate.key, table_keys)
        try:
            if partition not in by_partition:
                by_partition[partition], _ = pending_sequences(
                    client, deps.table_name, candidate.key[table_keys.partition], table_keys
                )
            lower = [
                {**candidate.key, table_keys.sort: {"S": low}}
                for low in lower_pending(by_partition[partition], subject, sequence, done)
            ]
            found, unread = _read_by_key(lower, deps, time_left)
        except (ClientError, BotoCoreError) as exc:
            result.sequence_read_failures += 1
            logger.warning(
                "cannot read the lower pending sequences of an event's subject; "
                "the batch stops at its record",
                extra={"checkpoint": candidate.checkpoint, "error": describe_error(exc)},
            )
            return _Ordered(ordered, candidate)
        if unread:
            if not sweeper_runs:
                logger.warning(
                    "lower pending sequences left unread and no sweeper runs; "
                    "the batch stops at the record of the later event",
                    extra={"checkpoint": candidate.checkpoint, "unread": unread},
                )
                return _Ordered(ordered, candidate)
            result.deferred += 1
            logger.warning(
                "event left pending behind an unread lower sequence of its subject; "
                "the sweeper sends them in order",
                extra={"checkpoint": candidate.checkpoint, "unread": unread},
            )
            continue  # its later sequences find it pending and lower, and wait too
        for key in lower:
            done.add(sort_key(key, table_keys))
            lower_item = found.get(key_id(key, table_keys))
            if lower_item is None or not is_pending(lower_item):
                continue  # published (or quarantined) by another path meanwhile
            result.sent_first += 1
            ordered.append(candidate._replace(key=key, item=lower_item))
        ordered.append(candidate)
        done.add(sk)
    return _Ordered(ordered)


def _read_by_key(
    keys: Sequence[AttributeMap],
    deps: PublishDependencies[PublisherDynamoDBClient],
    time_left: Callable[[], float] | None,
) -> tuple[dict[str, AttributeMap], int]:
    """The items of ``keys`` read consistently by key, and how many were left unread."""
    found: dict[str, AttributeMap] = {}
    unread = 0
    for start in range(0, len(keys), BATCH_GET_MAX_KEYS):
        read = read_back(
            deps.dynamodb_client,
            deps.table_name,
            keys[start : start + BATCH_GET_MAX_KEYS],
            sleep=deps.sleep,
            may_retry=lambda: time_left is None or time_left() > _READ_RETRY_RESERVE_SECONDS,
            table_keys=deps.table_keys,
        )
        found.update(read.items)
        unread += len(read.unread)
    return found, unread


def publish_stream_batch(
    records: Sequence[DynamoDBStreamRecord],
    deps: PublishDependencies[PublisherDynamoDBClient],
    *,
    time_left: Callable[[], float] | None = None,
    sweeper_runs: bool = False,
    region_scope: RegionScope = SINGLE_REGION,
) -> PublishResult:
    """Publish one stream batch in order, quarantine poison, delete what was published.

    ``sweeper_runs`` (the handler reads ``OUTBOX_SWEEPER_ENABLED``) says whether an
    event may be left pending for the sweeper on an ordered sink; without one it
    never is (see :func:`_send_lower_sequences_first`). ``region_scope`` (the
    handler reads ``OUTBOX_MULTI_REGION``, ``AWS_REGION``,
    ``OUTBOX_PUBLISHES_UNSTAMPED``) says which regions' items this publisher takes.

    Returns the result whose :meth:`PublishResult.response` is the partial batch
    response. Raises :class:`MissingSequenceNumber` when the record to retry
    from cannot be named (after deleting what was published).
    """
    candidates, result = read_stream_batch(records, deps.table_keys, region_scope)
    stop: OutboxCandidate | None = None
    if deps.sink.rules.orders_by_subject:
        candidates, stop = _send_lower_sequences_first(
            candidates, deps, result, sweeper_runs=sweeper_runs, time_left=time_left
        )
        # One position per entry sent (a lower sequence sent first shares its
        # later event's checkpoint, never its position).
        candidates = [c._replace(position=n) for n, c in enumerate(candidates)]
    publish_outbox_items(candidates, deps, result=result, time_left=time_left)
    if stop is not None and result.failure_position is None:
        result.failure_position = stop.position
        result.failure_checkpoint = stop.checkpoint
    if result.failure_position is not None:
        if result.failure_checkpoint is None:
            raise MissingSequenceNumber(
                f"record {result.failure_position} must be retried but has no "
                "dynamodb.SequenceNumber; failing the whole batch",
                result,
            )
        result.failure_sequence_number = result.failure_checkpoint
    return result


# --------------------------------------------------------------------------- handler


@cache
def default_runtime() -> PublishDependencies[PublisherDynamoDBClient]:
    """Clients from the environment, made on first use (boto3 honours AWS_ENDPOINT_URL).

    ``default_runtime.cache_clear()`` forgets them (tests that change the environment).
    """
    return PublishDependencies(
        sink=sink_from_environment(),
        table_name=required_env(ENV_TABLE_NAME),
        dynamodb_client=boto3.client("dynamodb"),
        table_keys=table_keys_from_environment(),
    )


@cache
def _sweeper_runs() -> bool:
    return sweeper_enabled_from_environment()


@cache
def _region_scope() -> RegionScope:
    # The stream publisher never adopts: adoption is the sweeper's (an adopted
    # region's items reach this stream only as replicated inserts, and those
    # of the lost region's last moments may never arrive at all).
    scope = region_scope_from_environment()
    return RegionScope(scope.region, unstamped=scope.unstamped) if scope.multi_region else scope


def record_metrics(
    result: PublishResult, target: Metrics, sink_name: str = EVENTBRIDGE_RULES.name
) -> None:
    """Every count, zeros included, so dashboards and alarms see a steady series.

    Calls are counted as ``<sink_name>Calls``: ``PutEventsCalls`` or ``PublishBatchCalls``.
    """
    counts = {
        "PublishedEvents": result.published,
        "QuarantinedEvents": result.quarantined,
        "RetryableFailures": result.retryable_failures,
        "DeleteLeftovers": result.delete_leftovers,
        f"{sink_name}Calls": result.send_calls,
        "UnreadableRecords": result.unreadable,
        # Ordered sinks: left pending for the sweeper; lower sequences sent first;
        # partition Queries or reads of lower sequences that failed (the batch
        # stopped there).
        "DeferredEvents": result.deferred,
        "SentFirstEvents": result.sent_first,
        "SequenceReadFailures": result.sequence_read_failures,
    }
    for name, value in counts.items():
        target.add_metric(name=name, unit=MetricUnit.Count, value=value)


@logger.inject_lambda_context(clear_state=True)
def handler(event: DynamoDBStreamEvent, context: LambdaContext) -> PartialBatchResponse:
    """Lambda entry point: ``dynamodb_outbox.publisher.handler``."""
    records = event.get("Records") if isinstance(event, Mapping) else None
    if not isinstance(records, list):
        logger.warning("event has no Records list; nothing to do")
        records = []
    runtime = default_runtime()  # a configuration error fails the batch: retried, not lost
    try:
        result = publish_stream_batch(
            records,
            runtime,
            time_left=remaining_seconds(context),
            sweeper_runs=_sweeper_runs(),
            region_scope=_region_scope(),
        )
    except MissingSequenceNumber as exc:
        _emit_metrics(exc.result, runtime.sink)
        raise
    _emit_metrics(result, runtime.sink)
    logger.info("batch done", extra={"result": asdict(result)})
    return result.response()


def _emit_metrics(result: PublishResult, sink: Sink) -> None:
    record_metrics(result, metrics, sink.rules.name)
    metrics.flush_metrics()
