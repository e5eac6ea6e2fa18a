"""Multi-region fault campaign: replication delay, a region lost, a region returning.

Each hypothesis example is two regions of a global table (moto, one process,
:class:`~dynamodb_outbox.local.GlobalTableReplication` between them), each
with its writer, publisher mapping and bus as ``multi_region.tf`` configures
them. Orders are written in both regions while replication (with a drawn
delay), the two publishers and the clock move in a drawn order. A region may
be lost after a drawn number of orders (replication to and from it cut, its
publisher stopped, its writers silent); the surviving region's sweeper adopts
its items past ``adopt_after_seconds`` (``multi_region.adopted_regions``); the
lost region may come back, resume replication, publishing and writing. Then:

1. no region publishes an event written in another, except a survivor
   publishing a lost region's adopted events;
2. without a loss, every event is published exactly once;
3. every event is published at least once, or (its region lost for good) is
   still pending in that region's replica, not lost while its storage is;
4. afterwards no replica a region can reach holds a pending outbox item.

Its schedule kinds, counted per example into the reliability campaign's
"faults injected, by kind" (tests/reliability/campaign.py) and each required to
have been drawn: ``replication_delay`` (a non-zero delay), ``region_loss``,
``region_return``; and ``region_loss_for_good`` (lost, not returning).
"""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from demo.two_regions import (
    EAST,
    TABLE,
    WEST,
    Region,
    make_region,
    publisher_mapping,
    replication_between,
)
from dynamodb_outbox.local import LocalRuntime, VirtualClock, stream_records_follow
from dynamodb_outbox.publishing import PublishDependencies
from dynamodb_outbox.regions import RegionScope
from dynamodb_outbox.sinks import EventBridgeSink
from dynamodb_outbox.sweeper import sweep
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from tests.reliability.campaign import CAMPAIGN

ADOPT_AFTER_SECONDS = 600
STEPS = ("replicate", "publish east", "publish west", "tick")
#: The schedule kinds this campaign draws (the reliability campaign's fault kinds).
KINDS = ("replication_delay", "region_loss", "region_return", "region_loss_for_good")


def kinds_of(schedule: Schedule) -> Counter[str]:
    """The fault kinds one schedule injects."""
    return Counter(
        {
            "replication_delay": int(schedule.delay_seconds > 0),
            "region_loss": int(schedule.lost is not None),
            "region_return": int(schedule.lost is not None and schedule.returns),
            "region_loss_for_good": int(schedule.lost is not None and not schedule.returns),
        }
    )


settings.register_profile(
    "multi-region-ci",
    max_examples=4,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@dataclass(frozen=True)
class Schedule:
    orders: dict[str, int]
    delay_seconds: float
    lost: str | None
    lost_after: int
    returns: bool
    steps: tuple[str, ...]
    rnd: random.Random


@st.composite
def schedules(draw: st.DrawFn) -> Schedule:
    orders = {EAST: draw(st.integers(1, 6)), WEST: draw(st.integers(1, 6))}
    return Schedule(
        orders=orders,
        delay_seconds=draw(st.sampled_from([0.0, 0.5, 2.0, 30.0])),
        lost=draw(st.sampled_from([None, EAST, WEST])),
        lost_after=draw(st.integers(0, sum(orders.values()))),
        returns=draw(st.booleans()),
        steps=tuple(draw(st.lists(st.sampled_from(STEPS), min_size=4, max_size=24))),
        rnd=draw(st.randoms(use_true_random=False)),
    )


@contextmanager
def two_regions() -> Iterator[tuple[VirtualClock, dict[str, Region]]]:
    env = {
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    with mock.patch.dict(os.environ, env):
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
            os.environ.pop(name, None)
        clock = VirtualClock()
        with mock_aws(), stream_records_follow(clock):
            yield clock, {name: make_region(name) for name in (EAST, WEST)}


def _sweep(region: Region, clock: VirtualClock, scope: RegionScope) -> None:
    sweep(
        PublishDependencies(
            EventBridgeSink(region.client("events"), region.bus),
            TABLE,
            region.dynamodb,
            sleep=clock.advance,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
        min_age_seconds=300,
        now=clock.now_datetime(),
        region_scope=scope,
    )


def run_schedule(schedule: Schedule) -> Counter[str]:
    with two_regions() as (clock, regions):
        return _run(schedule, clock, regions)


def _run(schedule: Schedule, clock: VirtualClock, regions: dict[str, Region]) -> Counter[str]:
    rnd = schedule.rnd
    replication = replication_between(regions, clock, delay_seconds=schedule.delay_seconds)
    publishers = {
        name: publisher_mapping(r, clock, RegionScope(name)) for name, r in regions.items()
    }
    to_write = [name for name, count in schedule.orders.items() for _ in range(count)]
    rnd.shuffle(to_write)
    written: dict[str, list[str]] = {EAST: [], WEST: []}
    lost: str | None = None
    held_back: list[str] = []  # orders of the lost region, written after its return

    def step(action: str) -> None:
        if action == "replicate":
            replication.poll()
        elif action == "tick":
            clock.advance(rnd.choice([0.5, 1.0, 5.0]))
        else:
            name = EAST if action == "publish east" else WEST
            if name != lost:
                publishers[name].poll()

    steps = list(schedule.steps)
    for number, region in enumerate(to_write):
        if schedule.lost is not None and number == schedule.lost_after and lost is None:
            lost = schedule.lost
            replication.cut_off(lost)
        if region == lost:
            held_back.append(region)
        else:
            written[region].extend(regions[region].write_orders(1))
        if steps:
            step(steps.pop(0))
    for action in steps:
        step(action)
    if schedule.lost is not None and lost is None:  # lost after the last order
        lost = schedule.lost
        replication.cut_off(lost)

    # The survivors settle; a survivor adopts the lost region's items past the age.
    runtime = LocalRuntime(clock)
    runtime.add(replication)
    for name, mapping in publishers.items():
        if name != lost:
            runtime.add(mapping)
    runtime.drain()
    clock.advance(ADOPT_AFTER_SECONDS + 60)
    for name, region in regions.items():
        if name != lost:
            adopted = (lost,) if lost is not None else ()
            scope = RegionScope(name, adopted=adopted, adopt_after_seconds=ADOPT_AFTER_SECONDS)
            _sweep(region, clock, scope)

    if lost is not None and schedule.returns:
        replication.restore(lost)
        for region in held_back:
            written[region].extend(regions[region].write_orders(1))
        runtime = LocalRuntime(clock)
        runtime.add(replication)
        for mapping in publishers.values():
            runtime.add(mapping)
        runtime.drain()
        clock.advance(400)
        for name, region in regions.items():
            _sweep(region, clock, RegionScope(name))
        lost = None

    return _check(schedule, regions, written, lost)


def _check(
    schedule: Schedule,
    regions: dict[str, Region],
    written: dict[str, list[str]],
    lost: str | None,
) -> Counter[str]:
    writer_of = {event_id: name for name, ids in written.items() for event_id in ids}
    published: Counter[str] = Counter()
    for name, region in regions.items():
        for event_id in region.drain_bus():
            published[event_id] += 1
            # 1. only its writer publishes it, or a survivor adopting a lost region's
            assert writer_of[event_id] == name or writer_of[event_id] == schedule.lost, (
                f"{name} published an event written in {writer_of[event_id]}"
            )
    if schedule.lost is None:
        # 2. exactly once without a loss
        assert set(published.values()) <= {1}, published
    for event_id, name in writer_of.items():
        if published[event_id] == 0:
            # 3. not published: only an unreturned lost region's own, still pending there
            assert name == lost, f"{event_id} of {name} was never published"
            assert f"OUTBOX#{event_id}" in regions[name].outbox_keys()
    # 4. nothing pending where a region can reach
    for name, region in regions.items():
        if name != lost:
            assert region.outbox_keys() == set(), f"{name} still holds pending items"
    return Counter(
        {
            "events": len(writer_of),
            "published twice or more": sum(1 for n in published.values() if n > 1),
            "held by a lost region": sum(1 for e in writer_of if published[e] == 0),
        }
    )


LOST_BEFORE_PUBLISHING = Schedule(
    orders={EAST: 3, WEST: 4},
    delay_seconds=0.5,
    lost=WEST,
    lost_after=7,
    returns=True,
    steps=("tick", "replicate", "tick", "replicate", "publish east"),
    rnd=random.Random(1),
)
LOST_FOR_GOOD_WITH_SLOW_REPLICATION = Schedule(
    orders={EAST: 2, WEST: 5},
    delay_seconds=30.0,
    lost=WEST,
    lost_after=5,
    returns=False,
    steps=("publish west", "tick", "replicate", "publish east", "tick"),
    rnd=random.Random(2),
)


def test_multi_region_campaign() -> None:
    profile = "soak" if os.environ.get("HYPOTHESIS_PROFILE") == "soak" else "multi-region-ci"
    totals: Counter[str] = Counter()
    kinds: Counter[str] = Counter()

    @settings(settings.get_profile(profile))
    @given(schedules())
    @example(LOST_BEFORE_PUBLISHING)
    @example(LOST_FOR_GOOD_WITH_SLOW_REPLICATION)
    def campaign(schedule: Schedule) -> None:
        totals.update(run_schedule(schedule))
        kinds.update(kinds_of(schedule))

    campaign()
    CAMPAIGN.faults.update(+kinds)
    assert totals["events"] > 0
    # every kind of multi-region fault was injected at least once
    assert {kind for kind in KINDS if kinds[kind] == 0} == set(), kinds
    # the explicit schedules made a lost region's events wait, and its return duplicate
    assert totals["held by a lost region"] > 0
    assert totals["published twice or more"] > 0


def test_the_campaign_catches_a_region_publishing_anothers_events() -> None:
    """Without the stamp filter a region publishes replicated inserts: invariant 1 fails."""
    schedule = Schedule(
        orders={EAST: 2, WEST: 0},
        delay_seconds=0.0,
        lost=None,
        lost_after=0,
        returns=False,
        steps=("replicate", "publish west", "publish east"),
        rnd=random.Random(3),
    )
    single_region = RegionScope()
    without_stamps = {"RegionScope": lambda name, **kwargs: single_region}
    with (
        two_regions() as (clock, regions),
        mock.patch.dict(globals(), without_stamps),
        pytest.raises(AssertionError, match="published an event written in"),
    ):
        _run(schedule, clock, regions)
