"""The publishing core shared by the stream publisher and the sweeper.

:func:`publish_outbox_items` takes outbox items, whichever path found them, and
publishes them in order: same planning, batching, failure rules, quarantine
and delete for both paths. The rules, and why, are in :mod:`dynamodb_outbox.publisher`.

On a sink that keeps order per subject (SNS FIFO, ``rules.orders_by_subject``)
two more rules keep one subject's events in the order given:

* a call carries at most one entry per subject: AWS keeps the order of the
  entries of one ``PublishBatch`` but does not say that a failed entry fails
  the later entries of its group, so a later one could get through alone;
* an entry of a subject that fails retryably holds every later entry of that
  subject until it is published; the held entries go out after it (in the
  same invocation when its retry succeeds), never before. What is still held
  when time runs out is part of the checkpoint.

A poison event of a subject is quarantined and the subject moves on (a gap,
with the ``QuarantinedEvents`` alarm; docs/decisions.md says why).
"""

from __future__ import annotations

import contextvars
import json
import os
import random
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Final,
    Generic,
    Literal,
    NamedTuple,
    Protocol,
    TypeVar,
)

from aws_lambda_powertools import Logger
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ParamValidationError,
)
from botocore.exceptions import (
    ValidationError as BotocoreValidationError,
)

from dynamodb_outbox._clock import iso_milliseconds, utc_now
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.log_keys import loggable_key
from dynamodb_outbox.outbox_item import (
    ATTR_ENVELOPE,
    ATTR_PENDING_SHARD,
    ATTR_QUARANTINE_REASON,
    ATTR_QUARANTINED_AT,
    ATTR_STATUS,
    OUTBOX_SK_PREFIX,
    STATUS_QUARANTINED,
)
from dynamodb_outbox.sinks import (
    EntryResult,
    OutboundEvent,
    Sink,
    SinkError,
)
from dynamodb_outbox.stream_types import (
    AttributeMap,
    PartialBatchResponse,
    lookup,
    string_attribute,
)
from dynamodb_outbox.table_keys import TableKeys

if TYPE_CHECKING:
    # boto3-stubs (dev only, requirements-dev.txt): the client's real type.
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "OutboxCandidate",
    "Publication",
    "PublishDependencies",
    "PublishResult",
    "PublisherDynamoDBClient",
    "RetryPolicy",
    "describe_error",
    "lookup",
    "publish_outbox_items",
    "string_attribute",
    "table_client",
    "utc_now",
]

DEFAULT_SERVICE_NAME: Final = "dynamodb-outbox-publisher"

# Raised by botocore while it builds a request from our parameters, before
# anything is sent: the entries are at fault, not AWS.
_REQUEST_BUILD_ERRORS: Final = (ParamValidationError, BotocoreValidationError)
# What botocore's serializer raises, with validation off, on a request no model
# shape fits (a key member no attribute type has: KeyError).
_SERIALIZER_ERRORS: Final = (KeyError, TypeError, ValueError, AttributeError)
# The codes with which AWS refuses a whole sink call as malformed (the service
# models: PutEvents' ValidationException; PublishBatch's InvalidParameter,
# ParameterValueInvalid and ValidationException, with InvalidParameterValue as
# SNS's documentation spells it). The handlers' sink clients skip botocore's
# validation, so an entry a sink rule lets through by mistake is refused here
# rather than by ParamValidationError: both are isolated alike, the call split
# until the entry AWS refuses is alone and quarantined, its neighbours published.
_REFUSED_CALL_CODES: Final = frozenset(
    {"ValidationException", "InvalidParameter", "ParameterValueInvalid", "InvalidParameterValue"}
)


class RetryPolicy(NamedTuple):
    """How entries that failed retryably are retried within one invocation.

    Each retry waits with exponential backoff and full jitter (a uniform draw
    up to ``base_seconds * 2**(attempt - 1)``, at most ``cap_seconds``). With a
    time budget (``time_left``) entries are retried for as long as it lasts,
    keeping ``margin_seconds`` (at most a fifth of the budget found at the
    start) for the deletes; without one, each entry gets ``max_attempts``.
    """

    base_seconds: float = 0.05
    cap_seconds: float = 2.0
    max_attempts: int = 5
    margin_seconds: float = 5.0
    jitter: Callable[[], float] = random.random

    def delay(self, attempt: int) -> float:
        ceiling = min(self.cap_seconds, self.base_seconds * 2.0 ** (attempt - 1))
        return float(self.jitter()) * ceiling


DEFAULT_RETRY: Final = RetryPolicy()

BATCH_WRITE_MAX_ITEMS: Final = 25
DEFAULT_DELETE_RETRIES: Final = 5
DELETE_BACKOFF_BASE_SECONDS: Final = 0.05
DELETE_BACKOFF_MAX_SECONDS: Final = 1.0
MAX_REASON_CHARS: Final = 500
#: A call to the sink that waits this long on the network makes the deletes
#: overlap the next calls (:class:`Publication`). A call to AWS waits
#: milliseconds; one answered in-process (moto, canned answers) hardly at all.
OVERLAP_MIN_WAIT_SECONDS: Final = 0.005

# Leaving the sparse pending index (REMOVE the shard) is what stops the sweeper
# from picking the poison item up again.
_QUARANTINE_UPDATE: Final = "SET #status = :status, #reason = :reason, #at = :at REMOVE #pending"

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", DEFAULT_SERVICE_NAME))


# --------------------------------------------------------------------------- clients


def table_client() -> DynamoDBClient:
    """The DynamoDB client the publisher and the sweeper use: no parameter validation.

    botocore checks each request against the API's model before sending it;
    for a ``BatchWriteItem`` of 25 deletes that is about 6.6 us per key, as much
    as the publisher's own checks of an event. Every request the handlers send
    to the table is built here from fixed expressions and from keys and items
    DynamoDB itself returned (a stream record's keys, an index page, a read
    back), and the functional tests send each kind through validating clients.
    A request that were malformed anyway fails differently: DynamoDB refuses
    it (``ValidationException``), or botocore's serializer raises what it
    happens to (a ``KeyError`` for a key member no attribute type has, a
    ``TypeError``), instead of botocore's ``ParamValidationError``. Every path
    treats them alike: a delete request is split and only its key at fault is
    left over for the sweeper; a quarantine marker that cannot be written
    leaves the item pending for an operator; a failed read fails the run. Region and endpoint come
    from the environment. The sinks' clients: :func:`~dynamodb_outbox.sinks.sink_client`.
    """
    import boto3
    from botocore.config import Config

    return boto3.client("dynamodb", config=Config(parameter_validation=False))


class PublisherDynamoDBClient(Protocol):
    """The part of the boto3 DynamoDB client the publisher uses."""

    def update_item(
        self,
        *,
        TableName: str,
        Key: AttributeMap,
        UpdateExpression: str,
        ConditionExpression: str,
        ExpressionAttributeNames: dict[str, str],
        ExpressionAttributeValues: AttributeMap,
    ) -> Mapping[str, Any]: ...

    def batch_write_item(self, *, RequestItems: Mapping[str, Any]) -> Mapping[str, Any]: ...

    # On the ordered path, a partition's pending sequences (subject_sequences.py).
    def query(
        self,
        *,
        TableName: str,
        KeyConditionExpression: str,
        ExpressionAttributeNames: Mapping[str, str],
        ExpressionAttributeValues: Mapping[str, Any],
        IndexName: str = ...,
        ScanIndexForward: bool = ...,
        Limit: int = ...,
        ExclusiveStartKey: Mapping[str, Any] = ...,
        ProjectionExpression: str = ...,
        Select: Literal["SPECIFIC_ATTRIBUTES"] = ...,
        ConsistentRead: bool = ...,
    ) -> Mapping[str, Any]: ...

    # On the ordered path, the lower pending events sent before a later one.
    def batch_get_item(self, *, RequestItems: dict[str, Any]) -> Mapping[str, Any]: ...


ClientT = TypeVar("ClientT", bound=PublisherDynamoDBClient, covariant=True)


class PublishDependencies(NamedTuple, Generic[ClientT]):
    """What publishing needs, made once and passed as one value.

    The sink and the table its items are deleted from (through
    ``dynamodb_client``) and the names of that table's key attributes (no
    default: the module configures them, and ``PK``/``SK`` read on a table
    keyed otherwise would find no outbox item), then what tests replace:
    ``sleep`` and ``clock`` (the quarantine timestamp), how often a delete is
    retried, and the retry policy for entries that failed retryably.
    ``ClientT`` is the client's type: the sweeper's reads the pending index too.
    """

    sink: Sink
    table_name: str
    dynamodb_client: ClientT
    table_keys: TableKeys
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], datetime] = utc_now
    delete_retries: int = DEFAULT_DELETE_RETRIES
    retry: RetryPolicy = DEFAULT_RETRY


# ---------------------------------------------------------------------------- result


@dataclass
class PublishResult:
    """What one batch did; :meth:`response` is what Lambda gets back."""

    records: int = 0
    published: int = 0
    quarantined: int = 0
    #: poison records whose item was already gone (published and deleted elsewhere).
    quarantine_item_gone: int = 0
    #: poison records whose item DynamoDB refused to mark (left pending, logged as errors).
    quarantine_unmarkable: int = 0
    #: not outbox inserts (the mapping filter should have dropped them).
    skipped: int = 0
    #: ordered sinks: sequenced events left pending for the sweeper because a lower
    #: sequence of their subject is still pending and could not be sent first.
    deferred: int = 0
    #: ordered sinks: lower pending sequences read from the table and sent first.
    sent_first: int = 0
    #: ordered sinks: partition Queries (or reads of lower sequences) that failed.
    sequence_read_failures: int = 0
    #: records without a readable key: nothing to publish or quarantine, logged.
    unreadable: int = 0
    #: entries (or quarantine writes) that failed retryably; a failed call counts
    #: every entry it carried.
    retryable_failures: int = 0
    deleted: int = 0
    delete_leftovers: int = 0
    send_calls: int = 0
    #: calls after which some entries had to be retried.
    retried_calls: int = 0
    quarantine_calls: int = 0
    delete_calls: int = 0
    #: index in the batch of the record Lambda retries from, if any.
    failure_position: int | None = None
    #: the failed candidate's checkpoint (a stream record's sequence number).
    failure_checkpoint: str | None = None
    failure_sequence_number: str | None = None
    #: ``should_continue`` said stop: candidates from ``stopped_at_position`` on
    #: were not attempted (they stay pending).
    stopped_at_position: int | None = None

    def response(self) -> PartialBatchResponse:
        if self.failure_sequence_number is None:
            return {"batchItemFailures": []}
        return {"batchItemFailures": [{"itemIdentifier": self.failure_sequence_number}]}


# ---------------------------------------------------------------- candidates, plans


class OutboxCandidate(NamedTuple):
    """One outbox item to publish, whichever path found it.

    ``key`` is its table key (both key attributes); ``item`` the whole item in
    low-level JSON: a stream record's ``NewImage`` or what the sweeper read;
    ``None`` only for a stream record without ``NewImage`` (wrong stream view
    type), which is poison. ``position`` is its index in the caller's input and
    ``checkpoint`` an opaque label the caller maps a failure back to (the stream
    uses the record's sequence number).
    """

    key: AttributeMap
    item: Mapping[str, Any] | None
    position: int
    checkpoint: str | None = None


# Plain classes, not NamedTuples: a NamedTuple costs a cold start about 0.1 ms to
# define (it compiles each field's annotation), and these are never unpacked.


class _Poison:
    __slots__ = ("candidate", "reason")

    def __init__(self, candidate: OutboxCandidate, reason: str) -> None:
        self.candidate = candidate
        self.reason = reason


class _Publish:
    __slots__ = ("candidate", "event", "size")

    def __init__(self, candidate: OutboxCandidate, event: OutboundEvent, size: int) -> None:
        self.candidate = candidate
        self.event = event
        self.size = size


_Plan = _Poison | _Publish


def _plan(candidate: OutboxCandidate, sink: Sink, table_keys: TableKeys) -> _Plan:
    """Publish or quarantine; whatever reading the item raises makes it poison, alone."""
    try:
        return _plan_or_raise(candidate, sink, table_keys)
    except Exception as exc:
        return _Poison(candidate, f"unreadable item: {describe_error(exc)}"[:MAX_REASON_CHARS])


def _plan_or_raise(candidate: OutboxCandidate, sink: Sink, table_keys: TableKeys) -> _Plan:
    def poison(reason: str) -> _Poison:
        return _Poison(candidate, reason[:MAX_REASON_CHARS])

    sk = string_attribute(candidate.key, table_keys.sort)
    item = candidate.item
    if item is None:
        return poison("stream record has no NewImage (stream view type must include new images)")
    body = string_attribute(item, ATTR_ENVELOPE)
    if body is None:
        return poison(f"outbox item has no string attribute {ATTR_ENVELOPE!r}")
    try:
        envelope = Envelope.from_stored_json(body)  # the stored text is what is sent
    except ValueError as exc:  # InvalidEnvelope is a ValueError
        return poison(f"invalid envelope: {exc}")
    if OUTBOX_SK_PREFIX + envelope.id != sk:
        return poison(f"envelope id {envelope.id!r} does not match sort key {sk!r}")
    event = OutboundEvent(envelope, body, envelope.utc_time)
    try:
        size, why_not = sink.rules.check(event)  # sizes and fields, each checked once
    except UnicodeEncodeError as exc:  # a lone surrogate: no sink can ever send it
        return poison(f"envelope is not encodable as UTF-8: {exc}")
    if why_not is not None:
        return poison(why_not)
    return _Publish(candidate, event, size)


_UNBUILDABLE: Final = "RequestNotBuildable"
# A delete retry never starts with less time than this left: a duplicate later
# (the sweeper re-publishes the item) beats a timeout that fails the batch now.
_DELETE_FLOOR_SECONDS: Final = 0.5


def _identity(key: AttributeMap) -> object:
    """The same value for equal keys, whatever their attributes' order: one delete each."""
    try:
        return frozenset((name, *value.items()) for name, value in key.items())
    except (AttributeError, TypeError):  # not attribute values: never equal to another
        return json.dumps(key, sort_keys=True, default=repr)


def _rejection(sink_name: str, outcome: EntryResult) -> str:
    if outcome.error_code == _UNBUILDABLE:
        return f"no {sink_name} request can be built for it: {outcome.error_message}"
    return f"{sink_name} rejected it: {outcome.error_code}: {outcome.error_message}"


def describe_error(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# ----------------------------------------------------------------------- the core


def _never_sendable(exc: Exception) -> bool:
    """Whether a request failed in a way no retry of it can change.

    Not built (botocore's validation, or with it off the serializer's KeyError,
    TypeError, ValueError or AttributeError on a member no type has), or refused
    by AWS as malformed. Any other exception is not the request's fault (a
    process dying mid-call, a bug): it propagates and fails the invocation, so
    the batch is retried, as before the client skipped validation.
    """
    if isinstance(exc, ClientError):
        return _error_code(exc) == "ValidationException"
    return isinstance(exc, _REQUEST_BUILD_ERRORS + _SERIALIZER_ERRORS)


def _error_code(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or type(exc).__name__)
    return type(exc).__name__


class Publication:
    """The state of one :func:`publish_outbox_items` call."""

    #: Full chunks of deletes go out on a worker thread while the next call to
    #: the sink does, once a call to the sink was seen waiting on the network
    #: (:data:`OVERLAP_MIN_WAIT_SECONDS`): the overlap saves wall time only
    #: then, and costs CPU (a thread, and two threads taking turns with the
    #: interpreter) when calls answer at once. What is left after the last call
    #: is deleted in the caller's thread (nothing to overlap with: no hop). A
    #: subclass may turn the overlap off: every delete then waits for the last
    #: send (the benchmark's comparison, ``benchmarks/overlapped.py``).
    overlaps_deletes: ClassVar[bool] = True
    #: How long a call must have waited to start the overlap, and the clocks
    #: that tell it: wall time, and this thread's CPU time.
    overlap_min_wait_seconds: ClassVar[float] = OVERLAP_MIN_WAIT_SECONDS

    @staticmethod
    def wall_clock() -> float:
        return time.perf_counter()

    @staticmethod
    def cpu_clock() -> float:
        return time.thread_time()

    def __init__(
        self,
        deps: PublishDependencies[PublisherDynamoDBClient],
        *,
        result: PublishResult,
        should_continue: Callable[[], bool] | None = None,
        time_left: Callable[[], float] | None = None,
    ) -> None:
        self.sink = deps.sink
        self.table_name = deps.table_name
        self.dynamodb = deps.dynamodb_client
        self.sleep = deps.sleep
        self.clock = deps.clock
        self.delete_retries = deps.delete_retries
        self.retry = deps.retry
        self.table_keys = deps.table_keys
        self.should_continue = should_continue
        self.result = result
        self.time_left = time_left
        self.ordered = deps.sink.rules.orders_by_subject
        # Kept free for the deletes: the policy's margin, at most a fifth of the
        # budget at the start, so that a short timeout still gets its retries.
        margin = deps.retry.margin_seconds
        self.margin = min(margin, time_left() / 5) if time_left is not None else 0.0
        self.published: list[_Publish] = []
        self._to_delete: dict[object, AttributeMap] = {}
        self._queued = 0  # published plans already added to _to_delete
        self._submitted = 0  # keys of _to_delete already handed to the deleter
        self._deletes: list[Future[None]] = []
        self._deleter: ThreadPoolExecutor | None = None  # started by the first overlapped chunk
        self._calls_wait = False  # a call to the sink waited on the network: overlap

    def publish(self, candidates: Sequence[OutboxCandidate]) -> PublishResult:
        """Run, then record where it must resume (if anywhere) in the result."""
        failure = self.run(candidates)
        if failure is not None:
            self.result.failure_position = failure.candidate.position
            self.result.failure_checkpoint = failure.candidate.checkpoint
        return self.result

    def run(self, candidates: Sequence[OutboxCandidate]) -> _Plan | None:
        plans = deque(_plan(candidate, self.sink, self.table_keys) for candidate in candidates)
        # One worker deletes full chunks of published items while the next call to
        # the sink goes out: both are network-bound and independent (an item is
        # only ever deleted after its own publication succeeded), which cuts the
        # invocation's wall time without changing any failure rule.
        try:
            return self._publish_all(plans)
        finally:
            # Even when something escapes, what went out is deleted: otherwise
            # every retry of the batch (or sweep) would publish it again.
            self.result.published += len(self.published)
            self._finish_deletes()

    def _finish_deletes(self) -> None:
        """Wait for the worker's chunks, then delete the rest here; a crash in any is raised."""
        deleter, self._deleter = self._deleter, None
        if deleter is not None:
            wait(self._deletes)  # its counts are final before this thread adds to them
            deleter.shutdown()
        self._queue_deletes(final=True)
        for future in self._deletes:
            future.result()  # a crash in a delete still fails the invocation

    def _publish_all(self, plans: deque[_Plan]) -> _Plan | None:
        """Send everything, retrying what fails retryably; the checkpoint if something is left.

        Entries that failed retryably go first in the next call, with the next
        fresh entries after them, so a throttled entry costs a share of a call,
        not a call of its own, and nothing already accepted is sent again. The
        checkpoint, when time or attempts run out, is the lowest position not
        yet done: everything before it is published or quarantined.
        """
        # Sent again in the next call, in position order: entries that failed
        # retryably and, on an ordered sink, entries held behind them.
        retrying: list[_Publish] = []
        attempts: dict[int, int] = {}
        calls = 0
        while retrying or plans:
            if self.should_continue is not None and not self.should_continue():
                first = min(
                    [plan.candidate.position for plan in retrying]
                    + [plan.candidate.position for plan in list(plans)[:1]]
                )
                self.result.stopped_at_position = first
                logger.info(
                    "stopping before the end of the input; the rest stays pending",
                    extra={"position": first},
                )
                return None
            worst = max((attempts.get(plan.candidate.position, 0) for plan in retrying), default=0)
            if worst:
                delay = self.retry.delay(worst)
                if not self._may_retry(worst, delay):
                    return self._checkpoint(retrying, plans)
                self.sleep(delay)
            elif calls and self.time_left is not None and self.time_left() < self.margin:
                return self._checkpoint(retrying, plans)  # fresh work, but no time for it
            call, held, unmarked = self._fill(retrying, plans)
            again = self._send_and_settle(call) if call else []
            retrying = sorted([*again, *held], key=lambda plan: plan.candidate.position)
            calls += 1 if call else 0
            if self.overlaps_deletes and self._calls_wait and (retrying or plans):
                self._queue_deletes(final=False)
            if unmarked is not None:  # a quarantine write that failed: resume there
                return self._checkpoint([*retrying, unmarked], deque())
            for plan in again:
                attempts[plan.candidate.position] = attempts.get(plan.candidate.position, 0) + 1
        return None

    def _send_and_settle(self, call: list[_Publish]) -> list[_Publish]:
        """Send one call; what must be sent again, in position order."""
        again: list[_Publish] = []
        for plan, outcome in zip(call, self._send(call), strict=True):
            if outcome.ok:
                self.published.append(plan)
            elif outcome.retryable:
                self.result.retryable_failures += 1
                again.append(plan)
            elif not self._quarantine(plan, _rejection(self.sink.rules.name, outcome)):
                again.append(plan)  # the marker must be written: send (and mark) again
        if again:
            self.result.retried_calls += 1
        return again

    def _may_retry(self, attempt: int, delay: float) -> bool:
        if self.time_left is None:
            return attempt < self.retry.max_attempts
        return self.time_left() - delay > self.margin

    def _fill(
        self, retrying: list[_Publish], plans: deque[_Plan]
    ) -> tuple[list[_Publish], list[_Publish], _Plan | None]:
        """The next call, the entries held out of it, and a poison item left unmarked.

        The call takes the entries to retry, then fresh ones in order, within
        the limits. On an ordered sink an entry whose subject is already in the
        call, or has an earlier entry held, is held too (in position order), so
        a subject never has two entries in one call nor one overtaking another.

        Poison met on the way is quarantined (idempotent, so doing it before a
        later failure costs at most a redundant write on a retry); a quarantine
        write that fails is returned, and the call stops before it.
        """
        rules = self.sink.rules
        call: list[_Publish] = []
        held: list[_Publish] = []
        size = 0
        busy: set[str] = set()  # subjects in the call or held (ordered sinks only)

        def full(plan: _Publish) -> bool:
            return bool(call) and (
                len(call) >= rules.max_entries or size + plan.size > rules.max_request_bytes
            )

        for again in retrying:
            subject = again.event.envelope.subject
            if self.ordered and (subject in busy or full(again)):
                held.append(again)
            else:
                call.append(again)
                size += again.size
            busy.add(subject)
        while plans:
            plan = plans[0]
            if isinstance(plan, _Poison):
                plans.popleft()
                if not self._quarantine(plan, plan.reason):
                    return call, held, plan
                continue
            if self.ordered and plan.event.envelope.subject in busy:
                plans.popleft()
                held.append(plan)
                continue
            if full(plan):
                break
            plans.popleft()
            call.append(plan)
            size += plan.size
            busy.add(plan.event.envelope.subject)
        return call, held, None

    def _checkpoint(self, retrying: Sequence[_Plan], plans: deque[_Plan]) -> _Plan:
        left = [*retrying, *list(plans)[:1]]
        first = min(left, key=lambda plan: plan.candidate.position)
        logger.warning(
            "publish failures left when the retry budget ran out; checkpointing",
            extra={
                "checkpoint": first.candidate.checkpoint,
                "key": loggable_key(first.candidate.key, self.table_keys),
                "retrying": len(retrying),
            },
        )
        return first

    def _queue_deletes(self, *, final: bool) -> None:
        """Hand each full chunk of published keys to the worker; with ``final``, delete the rest.

        ``final`` deletes in this thread: nothing is left to overlap with.
        """
        for plan in self.published[self._queued :]:
            self._to_delete.setdefault(_identity(plan.candidate.key), plan.candidate.key)
        self._queued = len(self.published)
        keys = list(self._to_delete.values())
        submitted = self._submitted
        while len(keys) - submitted >= BATCH_WRITE_MAX_ITEMS or (final and submitted < len(keys)):
            chunk = keys[submitted : submitted + BATCH_WRITE_MAX_ITEMS]
            submitted += len(chunk)
            self._submitted = submitted
            if final:
                self._delete_chunk(chunk)
                continue
            if self._deleter is None:
                self._deleter = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="outbox-delete"
                )
            # The worker runs in a copy of the caller's context, so context-bound
            # state (log keys, tracing, a test harness's attribution) follows it.
            context = contextvars.copy_context()
            self._deletes.append(self._deleter.submit(context.run, self._delete_chunk, chunk))

    def _send(self, plans: list[_Publish]) -> list[EntryResult]:
        started, cpu_started = self.wall_clock(), self.cpu_clock()
        try:
            return self._send_call(plans)
        finally:
            # Wall time the thread did not spend computing: the call waited (on AWS).
            waited = (self.wall_clock() - started) - (self.cpu_clock() - cpu_started)
            self._calls_wait = self._calls_wait or waited >= self.overlap_min_wait_seconds

    def _send_call(self, plans: list[_Publish]) -> list[EntryResult]:
        self.result.send_calls += 1
        try:
            return self.sink.send([plan.event for plan in plans])
        except (ClientError, BotoCoreError, SinkError) as exc:
            if isinstance(exc, _REQUEST_BUILD_ERRORS) or (
                isinstance(exc, ClientError) and _error_code(exc) in _REFUSED_CALL_CODES
            ):
                return self._isolate(plans, exc)
            # AWS could not be reached or refused the call: whether any entry got
            # through is unknown, none is deleted, and the first one is where
            # Lambda resumes.
            logger.warning(
                "publish call failed",
                extra={"sink": self.sink.rules.name, "error": str(exc), "entries": len(plans)},
            )
            failed = EntryResult(
                error_code=_error_code(exc), error_message=str(exc), retryable=True
            )
            return [failed] * len(plans)
        except Exception as exc:
            return self._isolate(plans, exc)

    def _isolate(self, plans: list[_Publish], exc: Exception) -> list[EntryResult]:
        """The request could not be built, or AWS refused it whole as malformed
        (nothing was published): find the entry at fault.

        Each entry is sent on its own; one that still cannot be built, or that
        AWS still refuses, is poison (its rules missed something), and its
        neighbours go out.
        """
        if len(plans) == 1:
            if isinstance(exc, ClientError):
                message = exc.response.get("Error", {}).get("Message") or str(exc)
                return [
                    EntryResult(
                        error_code=_error_code(exc), error_message=str(message), retryable=False
                    )
                ]
            return [
                EntryResult(
                    error_code=_UNBUILDABLE, error_message=describe_error(exc), retryable=False
                )
            ]
        logger.warning(
            "a request could not be built or was refused as malformed; "
            "sending its entries one by one",
            extra={"error": describe_error(exc), "entries": len(plans)},
        )
        return [result for plan in plans for result in self._send([plan])]

    def _quarantine(self, plan: _Plan, reason: str) -> bool:
        """Mark the item poison; False when that must be retried (the marker would be lost)."""
        # Whatever text an exception carried, the reason must be storable.
        reason = reason.encode("utf-8", "backslashreplace").decode("utf-8")[:MAX_REASON_CHARS]
        self.result.quarantine_calls += 1
        log_fields = {
            "reason": reason,
            "key": loggable_key(plan.candidate.key, self.table_keys),
            "checkpoint": plan.candidate.checkpoint,
        }
        try:
            self.dynamodb.update_item(
                TableName=self.table_name,
                Key=plan.candidate.key,
                UpdateExpression=_QUARANTINE_UPDATE,
                # An item that is gone was published and deleted (e.g. by the
                # sweeper): UpdateItem must not bring it back as a stub.
                ConditionExpression="attribute_exists(#sk)",
                ExpressionAttributeNames={
                    "#status": ATTR_STATUS,
                    "#reason": ATTR_QUARANTINE_REASON,
                    "#at": ATTR_QUARANTINED_AT,
                    "#pending": ATTR_PENDING_SHARD,
                    "#sk": self.table_keys.sort,
                },
                ExpressionAttributeValues={
                    ":status": {"S": STATUS_QUARANTINED},
                    ":reason": {"S": reason},
                    ":at": {"S": iso_milliseconds(self.clock())},
                },
            )
        except Exception as exc:
            code = _error_code(exc)
            if code == "ConditionalCheckFailedException":
                self.result.quarantine_item_gone += 1
                logger.info(
                    "poison record's item is already gone; nothing to quarantine", extra=log_fields
                )
                return True
            never_writable = code == "ValidationException" or isinstance(exc, _REQUEST_BUILD_ERRORS)
            if never_writable or not isinstance(exc, ClientError | BotoCoreError):
                # DynamoDB will never take this write (a key that fits no item, an
                # item the marker would push over 400 KB): retrying would hold the
                # batch forever. The item stays in the pending index, where the
                # oldest-pending alarm and `outbox-ops pending` show it.
                self.result.quarantine_unmarkable += 1
                logger.error(
                    "poison item cannot be marked; it stays pending for an operator",
                    extra={**log_fields, "error_code": code, "error": describe_error(exc)},
                )
                return True
            # Every other error, throttling or not, is retried: skipping would
            # leave a poison item in the pending index with no marker on it.
            self.result.retryable_failures += 1
            logger.warning(
                "quarantine failed; checkpointing",
                extra={**log_fields, "error_code": code, "error": str(exc)},
            )
            return False
        self.result.quarantined += 1
        logger.warning("event quarantined", extra=log_fields)
        return True

    def _delete_chunk(self, keys: list[AttributeMap]) -> None:
        pending: list[dict[str, Any]] = [{"DeleteRequest": {"Key": key}} for key in keys]
        retries = 0
        while True:
            self.result.delete_calls += 1
            try:
                response = self.dynamodb.batch_write_item(RequestItems={self.table_name: pending})
                unprocessed = list(response.get("UnprocessedItems", {}).get(self.table_name, []))
            except Exception as exc:
                if _never_sendable(exc):
                    # The request can never go (a key botocore cannot serialise, or
                    # one DynamoDB refuses): retrying it is pointless. Each key is
                    # deleted on its own, so only the key at fault is left over.
                    self._delete_unsendable(pending, exc)
                    return
                if not isinstance(exc, ClientError | BotoCoreError):
                    raise  # not the request's fault: the invocation fails, the batch is retried
                # Same as "nothing processed": retried within the same budget, and
                # never a batch failure (the events are already out).
                logger.warning(
                    "BatchWriteItem failed",
                    extra={
                        "error": describe_error(exc),
                        "error_code": _error_code(exc),
                        "deletes": len(pending),
                    },
                )
                unprocessed = pending
            self.result.deleted += len(pending) - len(unprocessed)
            pending = unprocessed
            if not pending:
                return
            if retries >= self.delete_retries:
                break
            retries += 1
            delay = min(
                DELETE_BACKOFF_MAX_SECONDS, DELETE_BACKOFF_BASE_SECONDS * 2 ** (retries - 1)
            )
            if self.time_left is not None and self.time_left() - delay < _DELETE_FLOOR_SECONDS:
                break  # never past the timeout for a delete: the sweeper redoes it
            self.sleep(delay)
        self._leave_over(pending)

    def _delete_unsendable(self, pending: list[dict[str, Any]], exc: Exception) -> None:
        logger.warning(
            "BatchWriteItem request can never be sent; its keys are deleted one by one",
            extra={
                "error": describe_error(exc),
                "error_code": _error_code(exc),
                "deletes": len(pending),
            },
        )
        if len(pending) == 1:
            self._leave_over(pending)
            return
        for request in pending:
            self._delete_chunk([request["DeleteRequest"]["Key"]])

    def _leave_over(self, pending: list[dict[str, Any]]) -> None:
        self.result.delete_leftovers += len(pending)
        logger.warning(
            "published outbox items left undeleted; the sweeper will publish them again",
            extra={
                "count": len(pending),
                "keys": [
                    loggable_key(request["DeleteRequest"]["Key"], self.table_keys)
                    for request in pending
                ],
            },
        )


def publish_outbox_items(
    candidates: Sequence[OutboxCandidate],
    deps: PublishDependencies[PublisherDynamoDBClient],
    *,
    should_continue: Callable[[], bool] | None = None,
    result: PublishResult | None = None,
    time_left: Callable[[], float] | None = None,
) -> PublishResult:
    """Publish outbox items in the order given; quarantine poison; delete what was published.

    The core shared by the stream handler and the sweeper. Entries that fail
    retryably are retried within the call, in the next request to the sink
    with backoff (``deps.retry``), for as long as ``time_left`` (seconds, the
    invocation's) allows, or ``retry.max_attempts`` times without it. What is
    still not done then is reported as ``failure_position`` and
    ``failure_checkpoint``: the lowest position not published or quarantined,
    where Lambda resumes. Poison is quarantined and the run goes on. Deletes
    happen as chunks fill (on a worker thread, while the next call to the sink
    goes out) and at the end, only for what was published, and never fail the
    run; their retries stop short of the time budget.

    ``should_continue`` is asked before each call to the sink (the sweeper's
    deadline); when it says no, the run stops there without a failure and
    ``stopped_at_position`` says where. Counts are added to ``result`` when one
    is given. The candidates' keys are named by ``deps.table_keys``.
    """
    result = result if result is not None else PublishResult()
    publication = Publication(
        deps, result=result, should_continue=should_continue, time_left=time_left
    )
    return publication.publish(candidates)
