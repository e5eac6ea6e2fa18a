"""A DynamoDB stream event source mapping, driven in-process on a virtual clock.

:class:`StreamMapping` reads the stream through the DynamoDB Streams API (moto
in-process, a moto server, or anything speaking the API), forms batches the way
Lambda's poller does and calls the handler synchronously. Per shard it keeps a
checkpoint and, while a batch is failing, the queue of batches still to be
retried — that is all the state Lambda keeps.

The rules, and the runtime's reading where AWS leaves room:

* Reading starts at ``TRIM_HORIZON`` (``LATEST`` is refused by the config).
  Records of a child shard wait until its parent shard is read to its end.
* Filtered-out records never reach the handler and count as processed.
* A batch closes at ``BatchSize`` records, at the 6 MB payload limit, or when
  its ``MaximumBatchingWindowInSeconds`` has passed on the virtual clock (a
  window of 0 delivers at once). "The next batching window begins as soon as
  the previous function invocation completes" (Lambda's "How Lambda processes
  records from stream and queue-based event sources", batching behavior), the
  first one when the poller first reads the shard: records that arrive after a
  window has run out go at once. The poller is only as frequent as
  :meth:`StreamMapping.poll` calls; :meth:`drain` moves the clock to the end of
  a window when nothing else can happen.
* Response handling is :mod:`.responses`. A success moves the checkpoint past
  the batch. A partial failure moves it to the lowest reported sequence number
  (numeric comparison); the records from there on are retried.
* Retrying, per failed batch ("Error handling for DynamoDB event sources"):

  - with ``BisectBatchOnFunctionError`` and a partial response whose first
    failure is not the first record, the batch is split at that sequence
    number and only the rest is retried;
  - otherwise, with bisect on and more than one record left, the batch is
    split in two halves, retried first half first;
  - splits do not consume retry attempts; any other retry does. When
    ``MaximumRetryAttempts`` is exhausted the records are discarded.
    Halves inherit their parent's attempt and invocation counts.
  - Before every invocation, a batch whose oldest record is older than
    ``MaximumRecordAgeInSeconds`` is discarded without invoking.
  - A discarded batch sends a metadata-only record to the ``OnFailure`` SQS
    destination (see :mod:`.destinations`); the records themselves are gone.

* Retention: records older than 24 hours on the virtual clock are trimmed —
  unreadable, whether the poller meets them on the stream or holds them in a
  batch being retried. A checkpoint pointing into trimmed data moves forward to
  the oldest readable record, as Lambda does on ``TrimmedDataAccessException``.
  Trimmed records are lost without a failure record; they are counted in
  ``stats.records_trimmed`` and listed in ``trimmed_sequence_numbers``.
* At least once: a retried batch delivers again records the handler already saw.
* ``ParallelizationFactor`` N: each shard is read by N lanes, and a record goes
  to the lane its item's key (partition key and sort key) hashes to, so the
  records of one item stay in order while different items overtake each other,
  AWS's rule ("in-order processing at the item level"). Each lane batches,
  retries, bisects, discards and checkpoints on its own: a failing batch holds
  back its lane only. Every lane of every shard with a batch ready is invoked
  in the same round, at once (:mod:`.concurrency`).

moto stamps stream records with the wall clock; for record age and retention
to follow the virtual clock exactly, wrap the writes in
:func:`~dynamodb_outbox.local.moto_clock.stream_records_follow`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import uuid
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from .clock import VirtualClock
from .concurrency import run_concurrently
from .config import (
    INFINITE,
    MappingConfigError,
    StreamMappingSettings,
    arn_parts,
    check_update,
    is_enabled,
)
from .context import DEFAULT_TIMEOUT_SECONDS, LambdaContext
from .destinations import (
    Condition,
    DiscardedBatch,
    SqsDestination,
    stream_failure_record,
)
from .drain import drain_until_idle
from .events import PayloadMeter, StreamEventRecord, epoch_seconds, record_size, stream_record
from .filters import RecordFilter
from .invoker import Handler, HandlerResult, function_environment, invoke_handler
from .responses import BatchVerdict, judge_response, whole_batch_failure
from .results import DrainResult, Invocation, PollResult, StreamStats

__all__ = ["STREAM_RETENTION_SECONDS", "StreamMapping"]

STREAM_RETENTION_SECONDS = 24 * 60 * 60
GET_RECORDS_LIMIT = 1_000


@dataclass
class _Record:
    event: StreamEventRecord
    sequence: str
    created_at: float
    size: int


@dataclass
class _Batch:
    records: list[_Record]
    # The last stream record this batch accounts for: its last record, or a
    # filtered-out record after it. Success moves the checkpoint past it.
    end_sequence: str
    invoke_count: int = 0
    retries_used: int = 0
    last_request_id: str | None = None
    last_function_error: bool = False
    redelivered: bool = False

    def derive(self, records: list[_Record], end_sequence: str) -> _Batch:
        return _Batch(
            records=records,
            end_sequence=end_sequence,
            invoke_count=self.invoke_count,
            retries_used=self.retries_used,
            last_request_id=self.last_request_id,
            last_function_error=self.last_function_error,
        )


@dataclass(frozen=True)
class _Position:
    iterator_type: str
    sequence: str | None = None


_TRIM_HORIZON = _Position("TRIM_HORIZON")


@dataclass
class _ShardState:
    """One lane of a shard (the only one without parallelization)."""

    shard_id: str
    lane: int = 0
    position: _Position = _TRIM_HORIZON
    pending: deque[_Batch] = field(default_factory=deque)
    window_opened_at: float | None = None
    finished: bool = False


@dataclass
class _Formed:
    records: list[_Record]
    end_sequence: str | None
    filtered: int
    full: bool
    end_of_closed_shard: bool


class _ShardReader:
    """Iterates a shard's records from a position, page by page, lazily."""

    def __init__(self, streams: Any, stream_arn: str, shard_id: str, position: _Position) -> None:
        self._streams = streams
        self._stream_arn = stream_arn
        self._shard_id = shard_id
        self._position = position
        self.end_of_closed_shard = False

    def _iterator(self, position: _Position) -> str:
        kwargs: dict[str, Any] = {
            "StreamArn": self._stream_arn,
            "ShardId": self._shard_id,
            "ShardIteratorType": position.iterator_type,
        }
        if position.sequence is not None:
            kwargs["SequenceNumber"] = position.sequence
        try:
            return str(self._streams.get_shard_iterator(**kwargs)["ShardIterator"])
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "TrimmedDataAccessException":
                raise
            # The checkpoint points into trimmed data: resume at the oldest record.
            return self._iterator(_TRIM_HORIZON)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        iterator: str | None = self._iterator(self._position)
        while iterator:
            page = self._streams.get_records(ShardIterator=iterator, Limit=GET_RECORDS_LIMIT)
            records = page.get("Records", [])
            yield from records
            iterator = page.get("NextShardIterator")
            if iterator is None:
                self.end_of_closed_shard = True
            if not records:
                return


class StreamMapping:
    """Lambda's DynamoDB stream poller for one mapping, invoking ``handler`` in-process.

    ``config`` is the ``GetEventSourceMapping`` shape (see
    :func:`~dynamodb_outbox.local.config.mapping_config` and
    :func:`~dynamodb_outbox.local.config.read_mappings`). ``streams_client`` is a
    boto3 ``dynamodbstreams`` client; ``sqs_client`` is needed when the
    mapping has an on-failure destination. ``environment`` is the function's
    environment variables, set around each invocation and restored after it
    (:func:`~dynamodb_outbox.local.invoker.function_environment`).
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        handler: Handler,
        *,
        streams_client: Any,
        clock: VirtualClock,
        sqs_client: Any = None,
        function_timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        duplicate_delivery_rate: float = 0.0,
        random_source: random.Random | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        if not 0.0 <= duplicate_delivery_rate <= 1.0:
            raise MappingConfigError(
                f"duplicate_delivery_rate must be between 0 and 1, got {duplicate_delivery_rate}"
            )
        self._duplicate_rate = duplicate_delivery_rate
        self._random = random_source or random.Random()
        self.settings = StreamMappingSettings.from_config(config)
        self._handler = handler
        self._streams = streams_client
        self._clock = clock
        self._timeout = function_timeout_seconds
        self._environment = dict(environment or {})
        self._region = arn_parts(self.settings.event_source_arn)[1]
        self._filter = RecordFilter(self.settings.filter_patterns)
        self._sqs_client = sqs_client
        self._destination = self._destination_for(self.settings)
        self._lanes: dict[tuple[str, int], _ShardState] = {}
        #: False once an update disabled the mapping: it stops polling (see :meth:`update`)
        self.enabled = True
        self.stats = StreamStats()
        self.invocations: list[Invocation] = []
        self.failure_records: list[dict[str, Any]] = []
        self.trimmed_sequence_numbers: list[str] = []

    def _destination_for(self, settings: StreamMappingSettings) -> SqsDestination | None:
        if settings.on_failure_destination is None:
            return None
        if self._sqs_client is None:
            raise MappingConfigError("the mapping has an on-failure destination: pass sqs_client")
        return SqsDestination(settings.on_failure_destination, self._sqs_client)

    def update(self, config: Mapping[str, Any]) -> None:
        """``UpdateEventSourceMapping``: the batches formed from now on follow ``config``.

        Each shard keeps its position: a batch already formed (waiting for a
        retry) is retried as it was, and a disabled mapping, enabled again,
        resumes where it stopped (docs/live-changes.md, the transport switch's
        pause). While disabled it reads nothing. The parallelization factor
        cannot change here: it decides which lane holds which records.
        """
        check_update(self.settings.event_source_arn, config)
        self.enabled = is_enabled(config)
        if not self.enabled:
            return
        settings = StreamMappingSettings.from_config(config)
        if settings.parallelization_factor != self.settings.parallelization_factor:
            raise MappingConfigError(
                "the local runtime cannot change a running mapping's ParallelizationFactor "
                f"({self.settings.parallelization_factor} to {settings.parallelization_factor})"
            )
        if settings.on_failure_destination != self.settings.on_failure_destination:
            self._destination = self._destination_for(settings)
        self.settings = settings
        self._filter = RecordFilter(settings.filter_patterns)

    # ------------------------------------------------------------------ polling

    def poll(self) -> PollResult:
        """One round of Lambda's poller: at most one batch per lane of each shard, all at once."""
        result = PollResult()
        if not self.enabled:
            return result
        shards = self._describe_shards()
        listed = {shard["ShardId"] for shard in shards}
        ready: list[_ShardState] = []
        for shard in shards:
            parent = shard.get("ParentShardId")
            if isinstance(parent, str) and parent in listed and not self._shard_finished(parent):
                continue
            for state in self._shard_lanes(shard["ShardId"]):
                if not state.finished and self._batch_ready(state, result):
                    ready.append(state)
        self._invoke(ready, result)
        return result

    def _shard_lanes(self, shard_id: str) -> list[_ShardState]:
        return [
            self._lanes.setdefault((shard_id, lane), _ShardState(shard_id, lane))
            for lane in range(self.settings.parallelization_factor)
        ]

    def _shard_finished(self, shard_id: str) -> bool:
        return all(
            (shard_id, lane) in self._lanes and self._lanes[(shard_id, lane)].finished
            for lane in range(self.settings.parallelization_factor)
        )

    def _lane_of(self, raw: Mapping[str, Any]) -> int:
        lanes = self.settings.parallelization_factor
        if lanes == 1:
            return 0
        keys = json.dumps(raw["dynamodb"]["Keys"], sort_keys=True).encode()
        return int.from_bytes(hashlib.sha256(keys).digest()[:8], "big") % lanes

    def drain(self, max_invocations: int = 1_000, *, advance_clock: bool = True) -> DrainResult:
        """Poll until nothing is left to deliver, with at most ``max_invocations`` invocations.

        With ``advance_clock`` (the default) a batch held by its batching window
        is released by moving the virtual clock to the window's end. Raises
        :class:`DrainLimitReached` when the bound is hit with work pending.
        """
        return drain_until_idle(
            [self], self._clock, max_invocations=max_invocations, advance_clock=advance_clock
        )

    def has_pending_work(self) -> bool:
        """Whether a batch awaits a retry or a readable record awaits delivery (never, disabled)."""
        if not self.enabled:
            return False
        if any(state.pending for state in self._lanes.values()):
            return True
        now = self._clock.now()
        for shard in self._describe_shards():
            for lane in range(self.settings.parallelization_factor):
                key = (shard["ShardId"], lane)
                state = self._lanes.get(key, _ShardState(*key))
                if not state.finished and self._has_readable_record(state, now):
                    return True
        return False

    def _has_readable_record(self, state: _ShardState, now: float) -> bool:
        reader = _ShardReader(
            self._streams, self.settings.event_source_arn, state.shard_id, state.position
        )
        return any(
            self._lane_of(raw) == state.lane
            and now - self._created_at(raw, now) <= STREAM_RETENTION_SECONDS
            for raw in reader
        )

    # ------------------------------------------------------------------ shards

    def _describe_shards(self) -> list[dict[str, Any]]:
        shards: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"StreamArn": self.settings.event_source_arn}
        while True:
            description = self._streams.describe_stream(**kwargs)["StreamDescription"]
            shards.extend(description.get("Shards", []))
            last = description.get("LastEvaluatedShardId")
            if not last:
                return shards
            kwargs["ExclusiveStartShardId"] = last

    @staticmethod
    def _created_at(raw: Mapping[str, Any], default: float) -> float:
        stamp = raw["dynamodb"].get("ApproximateCreationDateTime")
        return default if stamp is None else epoch_seconds(stamp)

    def _batch_ready(self, state: _ShardState, result: PollResult) -> bool:
        """Form the lane's next batch if it has none; whether one is to be invoked now."""
        now = self._clock.now()
        if state.window_opened_at is None:
            state.window_opened_at = now  # the first window: the poller's first read
        self._trim_pending(state, now, result)
        if not state.pending:
            formed = self._form_batch(state, now, result)
            if not formed.records:
                if formed.end_sequence is not None:
                    state.position = _Position("AFTER_SEQUENCE_NUMBER", formed.end_sequence)
                    self.stats.records_filtered += formed.filtered
                    result.progressed = True
                if formed.end_of_closed_shard:
                    # A parent read to its end releases its children on the next round.
                    state.finished = True
                    result.progressed = True
                return False
            window = self.settings.batching_window_seconds
            if not formed.full and window > 0:
                ready_at = state.window_opened_at + window
                if now < ready_at:
                    result.wait_until(ready_at)
                    return False
            assert formed.end_sequence is not None
            self.stats.records_filtered += formed.filtered
            state.pending.append(_Batch(formed.records, formed.end_sequence))
        return True

    def _form_batch(self, state: _ShardState, now: float, result: PollResult) -> _Formed:
        reader = _ShardReader(
            self._streams, self.settings.event_source_arn, state.shard_id, state.position
        )
        records: list[_Record] = []
        meter = PayloadMeter()
        end_sequence: str | None = None
        filtered = 0
        full = False
        in_trimmed_prefix = True
        for raw in reader:
            event = stream_record(
                raw, event_source_arn=self.settings.event_source_arn, region=self._region
            )
            sequence = event["dynamodb"]["SequenceNumber"]
            if self._lane_of(raw) != state.lane:
                end_sequence = sequence  # another lane's record: that lane accounts for it
                continue
            created_at = self._created_at(raw, now)
            if in_trimmed_prefix and now - created_at > STREAM_RETENTION_SECONDS:
                self._lose(sequence)
                state.position = _Position("AFTER_SEQUENCE_NUMBER", sequence)
                result.progressed = True
                continue
            in_trimmed_prefix = False
            if not self._filter.matches(event):
                filtered += 1
                end_sequence = sequence
                continue
            size = record_size(event)
            if records and not meter.fits(size):
                full = True
                break
            meter.add(size)
            records.append(_Record(event, sequence, created_at, size))
            end_sequence = sequence
            if len(records) >= self.settings.batch_size:
                full = True
                break
        return _Formed(
            records=records,
            end_sequence=end_sequence,
            filtered=filtered,
            full=full,
            end_of_closed_shard=reader.end_of_closed_shard and not full,
        )

    def _lose(self, sequence: str) -> None:
        self.stats.records_trimmed += 1
        self.trimmed_sequence_numbers.append(sequence)

    def _trim_pending(self, state: _ShardState, now: float, result: PollResult) -> None:
        for batch in state.pending:
            kept: list[_Record] = []
            for record in batch.records:
                if now - record.created_at <= STREAM_RETENTION_SECONDS:
                    kept.append(record)
                else:
                    self._lose(record.sequence)
                    result.progressed = True
            batch.records = kept
        while state.pending and not state.pending[0].records:
            state.position = _Position(
                "AFTER_SEQUENCE_NUMBER", state.pending.popleft().end_sequence
            )
        state.pending = deque(batch for batch in state.pending if batch.records)

    # ------------------------------------------------------------------ invoking

    def _invoke(self, ready: list[_ShardState], result: PollResult) -> None:
        """Invoke the handler with the first pending batch of every ready lane, at once."""
        now = self._clock.now()
        max_age = self.settings.maximum_record_age_seconds
        lanes: list[_ShardState] = []
        events: list[dict[str, Any]] = []
        calls = []
        for state in ready:
            batch = state.pending[0]
            if max_age != INFINITE and now - batch.records[0].created_at > max_age:
                self._discard(state, batch, "RecordAgeExceeded", result, now)
                continue
            context = LambdaContext(
                self.settings.function_arn, timeout_seconds=self._timeout, clock=self._clock
            )
            event: dict[str, Any] = {"Records": [record.event for record in batch.records]}
            lanes.append(state)
            events.append(event)
            calls.append(functools.partial(invoke_handler, self._handler, event, context))
        if not calls:
            return
        with function_environment(self._environment):
            outcomes, switches = run_concurrently(calls, self._random)
        self.stats.peak_concurrency = max(self.stats.peak_concurrency, len(calls))
        if len(calls) > 1:
            self.stats.concurrent_invocations += len(calls)
        self.stats.interleaving_switches += switches
        for state, event, outcome in zip(lanes, events, outcomes, strict=True):
            self._settle(state, event, outcome, result, now)
            state.window_opened_at = self._clock.now()  # the next window begins

    def _settle(
        self,
        state: _ShardState,
        event: dict[str, Any],
        outcome: HandlerResult,
        result: PollResult,
        now: float,
    ) -> None:
        batch = state.pending[0]
        batch.invoke_count += 1
        batch.last_request_id = outcome.request_id
        batch.last_function_error = outcome.function_error
        self.stats.invocations += 1
        self.stats.records_delivered += len(batch.records)
        result.progressed = True

        ids = [record.sequence for record in batch.records]
        verdict: BatchVerdict = (
            whole_batch_failure(f"function error: {outcome.error}")
            if outcome.error is not None
            else judge_response(
                outcome.response,
                report_batch_item_failures=self.settings.report_batch_item_failures,
                batch_ids=ids,
            )
        )
        if verdict.failed_ids is None:
            failed_from = 0
        elif verdict.failed_ids:
            failed_from = ids.index(min(verdict.failed_ids, key=int))
        else:
            failed_from = len(ids)

        invocation = Invocation(
            source=state.shard_id,
            lane=state.lane,
            item_ids=tuple(ids),
            outcome=(
                "success"
                if verdict.succeeded
                else "failure"
                if verdict.whole_batch_failed
                else "partial"
            ),
            failed_ids=tuple(ids[failed_from:]),
            reason=verdict.reason,
            request_id=outcome.request_id,
            attempt=batch.invoke_count,
            event=event,
            response=outcome.response,
            error=outcome.error,
            exception=outcome.exception,
            duplicate=batch.redelivered,
        )
        self.invocations.append(invocation)
        result.invocations.append(invocation)

        state.pending.popleft()
        if verdict.succeeded:
            if not batch.redelivered and self._random.random() < self._duplicate_rate:
                # At least once: the same batch comes again, as AWS may deliver it.
                batch.redelivered = True
                self.stats.duplicate_deliveries += 1
                state.pending.appendleft(batch)
                return
            state.position = _Position("AFTER_SEQUENCE_NUMBER", batch.end_sequence)
            return
        remaining = batch.records[failed_from:]
        if failed_from > 0:
            state.position = _Position("AT_SEQUENCE_NUMBER", remaining[0].sequence)
        bisect = self.settings.bisect_batch_on_function_error
        if bisect and failed_from > 0:
            self.stats.bisections += 1
            state.pending.appendleft(batch.derive(remaining, batch.end_sequence))
            return
        if bisect and len(remaining) > 1:
            self.stats.bisections += 1
            middle = len(remaining) // 2
            first, second = remaining[:middle], remaining[middle:]
            state.pending.appendleft(batch.derive(second, batch.end_sequence))
            state.pending.appendleft(batch.derive(first, first[-1].sequence))
            return
        retry = batch.derive(remaining, batch.end_sequence)
        state.pending.appendleft(retry)
        max_retries = self.settings.maximum_retry_attempts
        if max_retries != INFINITE and retry.retries_used >= max_retries:
            self._discard(state, retry, "RetryAttemptsExhausted", result, now)
            return
        retry.retries_used += 1
        self.stats.retries += 1

    def _discard(
        self,
        state: _ShardState,
        batch: _Batch,
        condition: Condition,
        result: PollResult,
        now: float,
    ) -> None:
        assert state.pending and state.pending[0] is batch
        state.pending.popleft()
        state.position = _Position("AFTER_SEQUENCE_NUMBER", batch.end_sequence)
        record = stream_failure_record(
            DiscardedBatch(
                shard_id=state.shard_id,
                stream_arn=self.settings.event_source_arn,
                sequence_numbers=[r.sequence for r in batch.records],
                arrival_times=[r.created_at for r in batch.records],
            ),
            condition=condition,
            function_arn=self.settings.function_arn,
            request_id=batch.last_request_id or str(uuid.uuid4()),
            invoke_count=batch.invoke_count,
            function_error="Unhandled" if batch.last_function_error else None,
            now=now,
        )
        self.failure_records.append(record)
        result.failure_records.append(record)
        result.progressed = True
        self.stats.batches_discarded += 1
        self.stats.records_discarded += len(batch.records)
        if self._destination is not None:
            self._destination.send(record)
            self.stats.failures_sent += 1
