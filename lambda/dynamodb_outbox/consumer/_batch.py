"""The order records of a batch run in: one by one, or concurrently for ``async def`` consumers.

A batch is split in lanes. On a standard queue every record is a lane of its
own; on a FIFO queue a lane is a message group, in the batch's order (a FIFO
batch with a record lacking its group id is one lane: the safe reading). In a
lane, records run strictly one after another, and a failure returns the
failed record and every later one of its lane unprocessed, since running them
would overtake it (Powertools' ``SqsFifoPartialProcessor(skip_group_on_error=True)``).

Plain functions run the records one by one, in batch order. ``async def``
functions run lanes concurrently, at most ``limit`` records at once, on the
process's event loop; each record's idempotency calls (blocking boto3) run on
a worker thread, so they never stall the loop the other records await on.

Whatever a record raises ends as a failure of that record
(:mod:`._errors`), except :data:`~._errors.PROCESS_ENDING`.
The :class:`~._deadline.Deadline` decides whether a record may start;
the records it refuses are returned unattempted.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import functools
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from aws_lambda_powertools import Logger

from dynamodb_outbox.consumer._deadline import Deadline
from dynamodb_outbox.consumer._errors import PROCESS_ENDING, raised_at, type_name

__all__ = ["BatchResult", "Outcome", "lanes_of", "run_concurrently", "run_in_order"]


class Outcome(enum.Enum):
    PROCESSED = "processed"
    DUPLICATE = "duplicate"
    FAILED = "failed"
    #: Failed because of its sender (dynamodb_outbox.sender_checks): a failure too.
    UNTRUSTED = "untrusted"


#: The outcomes that are not a failure: the message may be deleted.
_DONE = (Outcome.PROCESSED, Outcome.DUPLICATE)


class _Fate(enum.Enum):
    SKIPPED = "skipped"  # an earlier record of its lane failed
    UNATTEMPTED = "unattempted"  # the deadline refused it


#: What running one record gives: its outcome (never raises but for PROCESS_ENDING).
RecordRunner = Callable[[int], Outcome]


@dataclass
class BatchResult:
    """What became of each record, by position in the batch."""

    message_ids: Sequence[str]
    fates: dict[int, Outcome | _Fate] = field(default_factory=dict)

    @property
    def failures(self) -> list[str]:
        """The messageIds to report, in batch order: failed, skipped or unattempted."""
        return [
            message_id
            for index, message_id in enumerate(self.message_ids)
            if self.fates.get(index, _Fate.UNATTEMPTED) not in _DONE
        ]

    @property
    def outcomes(self) -> Counter[Outcome]:
        return Counter(fate for fate in self.fates.values() if isinstance(fate, Outcome))

    @property
    def unattempted(self) -> int:
        return sum(
            1
            for index in range(len(self.message_ids))
            if self.fates.get(index, _Fate.UNATTEMPTED) is _Fate.UNATTEMPTED
        )


def lanes_of(groups: Sequence[str | None], fifo: bool) -> list[list[int]]:
    """The record positions of each lane, in batch order (see the module docstring)."""
    if not fifo:
        return [[index] for index in range(len(groups))]
    if any(group is None for group in groups):
        return [list(range(len(groups)))]
    lanes: dict[str, list[int]] = {}
    for index, group in enumerate(groups):
        lanes.setdefault(str(group), []).append(index)
    return list(lanes.values())


def _run_guarded(run: RecordRunner, index: int, message_id: str, log: Logger) -> Outcome:
    """``run(index)``, with whatever escapes it (a logger that raised...) failing the record."""
    try:
        return run(index)
    except PROCESS_ENDING:
        raise
    except BaseException as exc:
        # The record is failed either way; logging it is best effort.
        with contextlib.suppress(Exception):
            log.error(
                "record failed outside its function; returning it to the queue",
                extra={
                    "message_id": message_id,
                    "exception_type": type_name(exc),
                    "raised_at": raised_at(exc),
                },
            )
        return Outcome.FAILED


class _Lanes:
    """The bookkeeping shared by both ways of running a batch."""

    def __init__(
        self,
        message_ids: Sequence[str],
        lanes: list[list[int]],
        deadline: Deadline,
        log: Logger,
    ) -> None:
        self.result = BatchResult(message_ids)
        self.lanes = lanes
        self.deadline = deadline
        self.log = log
        self._warned_deadline = False

    def refuse(self, index: int) -> bool:
        """True when the deadline refuses to start the record at ``index``."""
        if self.deadline.may_start():
            return False
        self.result.fates[index] = _Fate.UNATTEMPTED
        if not self._warned_deadline:
            self._warned_deadline = True
            self.log.warning(
                "too little time left to start another record; returning the rest unattempted",
                extra={
                    "seconds_left": self.deadline.seconds_left(),
                    "seconds_needed": self.deadline.needed_seconds(),
                },
            )
        return True

    def attempt(self, index: int, run: RecordRunner) -> Outcome:
        clock = self.deadline.clock()
        left_at_start = clock() if clock is not None else None
        try:
            outcome = _run_guarded(run, index, self.result.message_ids[index], self.log)
        finally:
            self.deadline.measured(left_at_start)
        self.result.fates[index] = outcome
        return outcome

    def fail_lane(self, lane: list[int], position: int, group: str | None) -> None:
        """The failed record at ``lane[position]`` stops its lane: the later ones return."""
        index = lane[position]
        rest = lane[position + 1 :]
        for later in rest:
            self.result.fates[later] = _Fate.SKIPPED
        message_id = self.result.message_ids[index]
        if group is not None:
            self.log.warning(
                "FIFO message group stopped at its first failure; its later messages are "
                "returned unprocessed, other groups carry on",
                extra={"message_id": message_id, "message_group_id": group},
            )
        elif rest:
            self.log.warning(
                "FIFO message without a MessageGroupId failed; later messages returned unprocessed",
                extra={"message_id": message_id, "unprocessed_count": len(rest)},
            )


def run_in_order(
    message_ids: Sequence[str],
    lanes: list[list[int]],
    run: RecordRunner,
    deadline: Deadline,
    log: Logger,
    *,
    groups: Sequence[str | None],
) -> BatchResult:
    """Run the records one by one in batch order, skipping those behind a failure in their lane."""
    state = _Lanes(message_ids, lanes, deadline, log)
    lane_of = {index: lane for lane in lanes for index in lane}
    for index in range(len(message_ids)):
        if index in state.result.fates:
            continue  # skipped behind a failure of its lane
        if state.refuse(index):
            break
        if state.attempt(index, run) not in _DONE:
            lane = lane_of[index]
            state.fail_lane(lane, lane.index(index), groups[index])
    return state.result


async def run_concurrently(
    message_ids: Sequence[str],
    lanes: list[list[int]],
    run: RecordRunner,
    deadline: Deadline,
    log: Logger,
    *,
    groups: Sequence[str | None],
    workers: ThreadPoolExecutor,
    limit: int,
) -> BatchResult:
    """Run the lanes concurrently, each lane in order, at most ``limit`` records at once.

    ``run`` is called on one of ``workers`` (at least ``limit`` of them), in
    a copy of the caller's context (log keys follow). Records are started in
    batch order as workers free up. The caller owns ``workers``
    and joins them once the loop has stopped: joining from inside the loop
    would wait for workers that wait for this very loop.
    """
    import asyncio  # only consumers written with async pay its import

    state = _Lanes(message_ids, lanes, deadline, log)
    loop = asyncio.get_running_loop()
    slots = asyncio.Semaphore(limit)

    async def run_lane(lane: list[int]) -> None:
        for position, index in enumerate(lane):
            async with slots:
                if state.refuse(index):
                    return
                context = contextvars.copy_context()
                call = functools.partial(context.run, state.attempt, index, run)
                outcome = await loop.run_in_executor(workers, call)
            if outcome not in _DONE:
                state.fail_lane(lane, position, groups[index])
                return

    await asyncio.gather(*(run_lane(lane) for lane in lanes))
    return state.result
