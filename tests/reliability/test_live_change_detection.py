"""Probes that the fault campaign's ``live_change`` kind can fail.

Each test runs one schedule heavy on live changes (a consumer batch size,
publishing paused, publishing resumed with another stream batch size, in turn)
through the campaign's own ``_write`` / ``_run`` / ``_check``, on the real
runtime or on a runtime broken on purpose, and says whether the campaign's
checks notice.

Reproduce: ``PYTHONPATH=$PWD/lambda:$PWD .venv/bin/python -m pytest
tests/reliability/test_live_change_detection.py -p no:randomly -q``
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from dynamodb_outbox.local import StreamMapping
from dynamodb_outbox.local.stream_mapping import _Position, _ShardReader, _ShardState
from tests.reliability.pipeline import FaultPlan, Pipeline, pipeline
from tests.reliability.test_fault_campaign import Schedule, _check, _run, _write


def _schedule(seed: int = 3) -> Schedule:
    return Schedule(
        orders=40,
        events_per_order=1,
        trimmed_orders=0,
        cancelled=0,
        poison_items=0,
        poison_messages=0,
        sweeper_overlaps=False,
        stream_batch_size=10,
        rates={"live_change": 30},
        consumer_failures=1,
        rnd=random.Random(seed),
    )


def _run_schedule(schedule: Schedule) -> tuple[Pipeline, Any]:
    """``run_schedule`` without the campaign's totals; returns the pipeline and the outcome,
    after ``_check`` (its AssertionError propagates)."""
    plan = FaultPlan(rates=schedule.rates, rnd=schedule.rnd)
    with pipeline(plan, stream_batch_size=schedule.stream_batch_size) as p:
        paused_writes: list[int] = []
        original_live_change = p.live_change

        def live_change() -> None:
            before = len(p.outbox_items())
            original_live_change()
            if p.publishing_paused:
                paused_writes.append(before)

        p.live_change = live_change  # type: ignore[method-assign]
        outcome = _write(schedule, p)
        _run(schedule, p)
        p.count_platform_faults()
        _check(schedule, p, outcome)
        return p, (outcome, paused_writes)


def test_the_schedule_pauses_publishing_while_orders_are_written() -> None:
    """Holds on the merged code: the probe schedule really pauses with orders behind it."""
    p, (outcome, paused_writes) = _run_schedule(_schedule())
    assert p.live_changes["publishing paused"] >= 2, p.live_changes
    assert p.live_changes["publishing resumed, another batch size"] >= 2, p.live_changes
    assert any(before < 40 for before in paused_writes), "no pause with orders still to come"
    assert len(outcome.committed) == 40


def test_a_runtime_that_ignores_the_pause_fails_the_campaign(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Holds: invariant 7 (no publisher invocation while paused) notices."""
    original = StreamMapping.update

    def update(self: StreamMapping, config: dict[str, Any]) -> None:
        original(self, {**config, "State": "Enabled"})

    monkeypatch.setattr(StreamMapping, "update", update)
    with pytest.raises(AssertionError, match="invocations_while_paused"):
        _run_schedule(_schedule())


def test_a_resume_from_latest_fails_the_campaign(monkeypatch: pytest.MonkeyPatch) -> None:
    """FINDING: a runtime whose re-enabled stream mapping starts after the newest record
    (LATEST, what a deleted and re-created mapping does, not what UpdateEventSourceMapping
    does) skips every record written while publishing was paused. On AWS without the
    sweeper (the transport switch runbook turns it off too) those events wait for the
    sweeper's return, and docs/live-changes.md says "The mapping resumes where it
    stopped". The campaign's live_change claims its invariants cover "every event, those
    written while paused too", but the sweeper republishes the skipped items at the end of
    every schedule, so the campaign passes: nothing checks that the stream path resumed."""
    original = StreamMapping.update

    def update(self: StreamMapping, config: dict[str, Any]) -> None:
        was_enabled = self.enabled
        original(self, config)
        if was_enabled or not self.enabled:
            return
        for shard in self._describe_shards():
            for lane in range(self.settings.parallelization_factor):
                key = (shard["ShardId"], lane)
                state = self._lanes.setdefault(key, _ShardState(*key))
                last = None
                for raw in _ShardReader(
                    self._streams, self.settings.event_source_arn, shard["ShardId"], state.position
                ):
                    last = raw["dynamodb"]["SequenceNumber"]
                if last is not None:
                    state.position = _Position("AFTER_SEQUENCE_NUMBER", last)

    monkeypatch.setattr(StreamMapping, "update", update)
    with pytest.raises(AssertionError):
        _run_schedule(_schedule())
