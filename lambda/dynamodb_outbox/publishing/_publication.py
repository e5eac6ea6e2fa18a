"""The send/retry loop: :class:`Publication`, one :func:`publish_outbox_items` call.

The rules it keeps are in :mod:`dynamodb_outbox.publishing`; what it writes back
to the table is :mod:`dynamodb_outbox.publishing._settle`'s.
"""

from __future__ import annotations

import contextvars
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import ClassVar, Final

from botocore.exceptions import BotoCoreError, ClientError

from dynamodb_outbox.log_keys import loggable_key
from dynamodb_outbox.publishing._dependencies import (
    PublishDependencies,
    PublisherDynamoDBClient,
    PublishResult,
    logger,
)
from dynamodb_outbox.publishing._errors import (
    _REFUSED_CALL_CODES,
    _REQUEST_BUILD_ERRORS,
    _error_code,
    describe_error,
)
from dynamodb_outbox.publishing._plan import OutboxCandidate, _Plan, _plan, _Poison, _Publish
from dynamodb_outbox.publishing._settle import BATCH_WRITE_MAX_ITEMS, TableWrites, _identity
from dynamodb_outbox.sinks import EntryResult, SinkError
from dynamodb_outbox.stream_types import AttributeMap

__all__ = ["OVERLAP_MIN_WAIT_SECONDS", "Publication", "publish_outbox_items"]

#: A call to the sink that waits this long on the network makes the deletes
#: overlap the next calls (:class:`Publication`). A call to AWS waits
#: milliseconds; one answered in-process (moto, canned answers) hardly at all.
OVERLAP_MIN_WAIT_SECONDS: Final = 0.005


_UNBUILDABLE: Final = "RequestNotBuildable"


def _rejection(sink_name: str, outcome: EntryResult) -> str:
    if outcome.error_code == _UNBUILDABLE:
        return f"no {sink_name} request can be built for it: {outcome.error_message}"
    return f"{sink_name} rejected it: {outcome.error_code}: {outcome.error_message}"


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
        self.sleep = deps.sleep  # the send retries' backoff; the deletes' is TableWrites'
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
        self._writes = TableWrites(deps, result=result, time_left=time_left)

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
                self._writes.delete_chunk(chunk)
                continue
            if self._deleter is None:
                self._deleter = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="outbox-delete"
                )
            # The worker runs in a copy of the caller's context, so context-bound
            # state (log keys, tracing, a test harness's attribution) follows it.
            context = contextvars.copy_context()
            self._deletes.append(
                self._deleter.submit(context.run, self._writes.delete_chunk, chunk)
            )

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
        return self._writes.quarantine(plan.candidate.key, plan.candidate.checkpoint, reason)


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
