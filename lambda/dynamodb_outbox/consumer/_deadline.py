"""When a consumer stops starting records: before the invocation would time out.

Lambda stops a function at its timeout and never reads its answer: every
message of the batch returns to the queue, those already processed included,
each one receive closer to the DLQ. So a record is started only when it is
expected to end with time to spare:

    time left >= expected record duration + floor

The expected duration is the 90th percentile (nearest rank) of this handler's
recent durations: the longest while fewer than ten are known, and past that one
slow record in ten is not counted. The longest alone would let a single slow
record (a hung downstream call, a cold first record) make every later warm
invocation run one record and return the others unstarted, each a receive
closer to the DLQ without ever running, until it aged out. The durations are
measured in this process (so warm invocations use what earlier ones saw) on the
clock Lambda's deadline is read from, ``context.get_remaining_time_in_millis()``;
the last :data:`KEPT_DURATIONS` count. A record that took at least the whole
invocation's time less the floor is not kept: no record after the first could
ever be given that long, so it says nothing about whether the next may start. The floor
(``stop_margin_seconds``) is the team's: the time kept for a record slower
than any seen so far, and for answering. The first record of an invocation is
always started, or a batch whose records all take longer than the timeout
would never progress.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Final

__all__ = ["EXPECTED_PERCENTILE", "KEPT_DURATIONS", "Deadline", "RecordDurations"]

#: How many recent record durations the estimate keeps.
KEPT_DURATIONS: Final = 50
#: The percentile of the kept durations a record is expected to take.
EXPECTED_PERCENTILE: Final = 90


class RecordDurations:
    """The recent record durations of one handler, in seconds; safe across threads."""

    def __init__(self, keep: int = KEPT_DURATIONS) -> None:
        self._recent: deque[float] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        with self._lock:
            self._recent.append(max(0.0, seconds))

    def expected(self) -> float:
        """The :data:`EXPECTED_PERCENTILE` th percentile (nearest rank) of the kept durations."""
        with self._lock:
            if not self._recent:
                return 0.0
            ranked = sorted(self._recent)
        rank = -(-EXPECTED_PERCENTILE * len(ranked) // 100)  # ceil
        return ranked[rank - 1]


class Deadline:
    """Decides, record by record, whether one more may start in this invocation."""

    def __init__(
        self,
        time_left: Callable[[], float] | None,
        durations: RecordDurations,
        floor_seconds: float,
    ) -> None:
        self._time_left = time_left
        self._durations = durations
        self._floor = floor_seconds
        # The whole invocation's time, read when the batch starts.
        self._budget = None if time_left is None else time_left()
        self._started = 0
        self._refused = False
        self._lock = threading.Lock()

    def may_start(self) -> bool:
        """True (and the record counted as started) when it is expected to end in time.

        Once a record is refused, every later one is too: the time left only
        shrinks, and records are started in batch order.
        """
        with self._lock:
            if self._refused:
                return False
            if self._started and self._time_left is not None:
                needed = self._durations.expected() + self._floor
                if self._time_left() < needed:
                    self._refused = True
                    return False
            self._started += 1
            return True

    def seconds_left(self) -> float | None:
        return None if self._time_left is None else self._time_left()

    def needed_seconds(self) -> float:
        return self._durations.expected() + self._floor

    def clock(self) -> Callable[[], float] | None:
        """The time left, read at a record's start and end to measure it."""
        return self._time_left

    def measured(self, left_at_start: float | None) -> None:
        """Record how long a record took, given the time left when it started."""
        if left_at_start is None or self._time_left is None:
            return
        seconds = left_at_start - self._time_left()
        if self._budget is not None and seconds >= self._budget - self._floor:
            # Longer than any record after the first could ever be given: it
            # only ever runs first, and would otherwise keep every later
            # invocation to one record (the others returned unstarted).
            return
        self._durations.add(seconds)
