"""Progress on the terminal: one line per phase, with what it did and how long it took.

A phase prints its title when it starts (so a long ``terraform apply`` shows
what is running) and completes the same line when it ends::

    [3/8] terraform apply examples/local ......... 15 resources (74.2 s)

Every phase's duration is kept for the report's timing table.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TextIO

TITLE_WIDTH = 44


@dataclass
class Phase:
    """A phase in progress; set :attr:`summary` to say what it did."""

    title: str
    summary: str = ""


@dataclass(frozen=True)
class Timing:
    title: str
    seconds: float
    ok: bool


@dataclass
class Console:
    """Writes phase lines to ``stream`` (the real terminal, not the functions' log)."""

    stream: TextIO
    total_phases: int
    timings: list[Timing] = field(default_factory=list)
    _number: int = 0

    def line(self, text: str = "") -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    @contextmanager
    def phase(self, title: str) -> Iterator[Phase]:
        """Print ``title``, run the block, complete the line with its summary and duration."""
        self._number += 1
        label = f"[{self._number}/{self.total_phases}] {title} "
        self.stream.write(label.ljust(TITLE_WIDTH, "."))
        self.stream.flush()
        phase = Phase(title)
        started = time.monotonic()
        try:
            yield phase
        except BaseException:
            elapsed = time.monotonic() - started
            self.timings.append(Timing(title, elapsed, ok=False))
            self.line(f" FAILED ({elapsed:.1f} s)")
            raise
        elapsed = time.monotonic() - started
        self.timings.append(Timing(title, elapsed, ok=True))
        summary = f" {phase.summary}" if phase.summary else ""
        self.line(f"{summary} ({elapsed:.1f} s)")
