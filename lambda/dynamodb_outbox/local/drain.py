"""Polling mappings until nothing is left to do, within a bound."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .clock import VirtualClock
from .results import DrainLimitReached, DrainResult, Invocation, PollResult

__all__ = ["Pollable", "drain_until_idle"]


class Pollable(Protocol):
    """What a mapping offers a driver: one polling round, and whether work is pending."""

    def poll(self) -> PollResult: ...

    def has_pending_work(self) -> bool: ...


def drain_until_idle(
    mappings: Sequence[Pollable],
    clock: VirtualClock,
    *,
    max_invocations: int,
    advance_clock: bool,
) -> DrainResult:
    """Poll every mapping in turn until a full round changes nothing.

    When a round changes nothing but something waits on the clock (a batching
    window, a visibility timeout) and ``advance_clock`` is set, the clock moves
    to the earliest such moment and polling goes on. Once ``max_invocations``
    invocations have run, polling stops; if work is still pending then,
    :class:`DrainLimitReached` is raised, so a test looping on a poison record
    with infinite retries ends instead of hanging.
    """
    invocations: list[Invocation] = []
    failures: list[dict[str, Any]] = []
    polls = 0
    poll_limit = 10 * max_invocations + 1_000
    while True:
        if len(invocations) >= max_invocations or polls >= poll_limit:
            result = DrainResult(polls, invocations, failures)
            if any(mapping.has_pending_work() for mapping in mappings):
                raise DrainLimitReached(
                    f"drain stopped after {len(invocations)} invocations ({polls} polls) "
                    "with work still pending",
                    result,
                )
            return result
        round_result = PollResult()
        for mapping in mappings:
            round_result.merge(mapping.poll())
        polls += 1
        invocations.extend(round_result.invocations)
        failures.extend(round_result.failure_records)
        if round_result.progressed:
            continue
        if advance_clock and round_result.next_ready_at is not None:
            clock.advance_to(round_result.next_ready_at)
            continue
        return DrainResult(polls, invocations, failures)
