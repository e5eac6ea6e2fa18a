"""The virtual clock every time-based rule of the local runtime reads.

Lambda's event source mappings are full of timers: batching windows, record
age, stream retention, queue visibility timeouts. Tests must be able to cross
any of them without sleeping, so the runtime never reads the wall clock: it asks
a :class:`VirtualClock`, and a test moves that clock forward with
:meth:`VirtualClock.advance`. Time never moves on its own, so a test that passes
once passes every time.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

__all__ = ["VirtualClock"]


class VirtualClock:
    """Epoch seconds that only move when told to.

    It starts at the wall-clock time of its creation (or at ``start``), so the
    timestamps the emulator stamps on records and messages line up with it
    until the first :meth:`advance`.
    """

    def __init__(self, start: float | None = None) -> None:
        # Whole milliseconds: the precision of the timestamps the emulator stamps.
        self._now = math.floor(time.time() * 1000) / 1000 if start is None else float(start)

    def now(self) -> float:
        """The current virtual time, in seconds since the Unix epoch."""
        return self._now

    def now_datetime(self) -> datetime:
        """The current virtual time as an aware UTC datetime."""
        return datetime.fromtimestamp(self._now, UTC)

    def advance(self, seconds: float) -> float:
        """Move the clock forward by ``seconds`` and return the new time."""
        if seconds < 0:
            raise ValueError(f"a clock only moves forward; got {seconds} seconds")
        self._now += seconds
        return self._now

    def advance_to(self, when: float) -> float:
        """Move the clock forward to the epoch time ``when`` (no-op if already past it)."""
        self._now = max(self._now, float(when))
        return self._now

    def __repr__(self) -> str:
        return f"VirtualClock({self.now_datetime().isoformat()})"
