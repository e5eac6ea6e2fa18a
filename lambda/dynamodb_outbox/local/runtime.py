"""Several mappings driven together, so a whole flow settles with one call."""

from __future__ import annotations

from typing import TypeVar

from .clock import VirtualClock
from .drain import Pollable, drain_until_idle
from .results import DrainResult, PollResult

__all__ = ["LocalRuntime"]

M = TypeVar("M", bound=Pollable)


class LocalRuntime:
    """The mappings of a deployment on one virtual clock.

    ``drain`` polls them round-robin until a whole round changes nothing, so an
    event travelling stream → publisher → bus → queue → consumer arrives
    without the test stepping each hop.
    """

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.mappings: list[Pollable] = []

    def add(self, mapping: M) -> M:
        """Register ``mapping`` (a StreamMapping or SqsMapping sharing this clock); returns it."""
        self.mappings.append(mapping)
        return mapping

    def poll(self) -> PollResult:
        """One polling round over every mapping."""
        result = PollResult()
        for mapping in self.mappings:
            result.merge(mapping.poll())
        return result

    def drain(self, max_invocations: int = 1_000, *, advance_clock: bool = True) -> DrainResult:
        """Poll every mapping until all are idle; see :func:`.drain.drain_until_idle`."""
        return drain_until_idle(
            self.mappings,
            self.clock,
            max_invocations=max_invocations,
            advance_clock=advance_clock,
        )
