"""Two regions of a global table in one process: each event published once, where written.

moto serves both regions; :class:`GlobalTableReplication` replicates between
their tables (delay, last writer wins, replicated records in every replica's
stream); each region has its own publisher mapping, bus and queue, configured
as the module configures a multi-region instance.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Iterator

import pytest

from demo.two_regions import (
    EAST,
    TABLE,
    WEST,
    Region,
    make_region,
    publisher_mapping,
    replication_between,
)
from dynamodb_outbox.local import LocalRuntime, VirtualClock
from dynamodb_outbox.ops.cli import main as outbox_ops
from dynamodb_outbox.outbox_item import OUTBOX_SK_PREFIX
from dynamodb_outbox.regions import ATTR_REGION, SINGLE_REGION, RegionScope


@pytest.fixture
def regions(aws: None, clock: VirtualClock) -> Iterator[dict[str, Region]]:
    yield {name: make_region(name) for name in (EAST, WEST)}


def test_orders_written_in_both_regions_are_each_published_once_by_their_own_region(
    regions: dict[str, Region], clock: VirtualClock
) -> None:
    east, west = regions[EAST], regions[WEST]
    runtime = LocalRuntime(clock)
    replication = runtime.add(replication_between(regions, clock, delay_seconds=2.0))
    publishers = {
        name: runtime.add(publisher_mapping(r, clock, RegionScope(name)))
        for name, r in regions.items()
    }

    # GIVEN orders written in both regions
    written = {EAST: east.write_orders(12), WEST: west.write_orders(9)}

    # WHEN both regions' publishers and the replication run until nothing moves
    runtime.drain()

    # THEN each region's bus got exactly the events written there, once each
    assert Counter(east.drain_bus()) == Counter(written[EAST])
    assert Counter(west.drain_bus()) == Counter(written[WEST])
    # AND every replica's stream carried the other region's inserts and deletes, which
    # the filter dropped: nothing was published by a region that did not write it
    assert replication.stats.applied[EAST] >= 9 and replication.stats.applied[WEST] >= 12
    assert publishers[EAST].stats.records_filtered >= 2 * 9
    assert publishers[WEST].stats.records_filtered >= 2 * 12
    # AND the deletes replicated: no outbox item is left in either replica
    assert east.outbox_keys() == set() == west.outbox_keys()


def test_deployed_per_region_without_the_stamp_filter_every_event_is_published_twice(
    regions: dict[str, Region], clock: VirtualClock
) -> None:
    """Why the stamp exists: what a per-region deployment of a single-region outbox does."""
    runtime = LocalRuntime(clock)
    runtime.add(replication_between(regions, clock, delay_seconds=2.0))
    for r in regions.values():
        runtime.add(publisher_mapping(r, clock, SINGLE_REGION))

    written = regions[EAST].write_orders(5)
    runtime.drain()

    assert Counter(regions[EAST].drain_bus() + regions[WEST].drain_bus()) == Counter(
        {event_id: 2 for event_id in written}
    )


@pytest.mark.parametrize(("version", "marked"), [("2019.11.21", False), ("2017.11.29", True)])
def test_replicated_items_carry_the_aws_rep_marks_only_on_the_legacy_version(
    regions: dict[str, Region], clock: VirtualClock, version: str, marked: bool
) -> None:
    """Version 2019.11.21 marks nothing: the writer's stamp is what tells regions apart."""
    runtime = LocalRuntime(clock)
    replication = runtime.add(replication_between(regions, clock, delay_seconds=0, version=version))
    (event_id,) = regions[EAST].write_orders(1)

    runtime.drain()

    key = {"PK": {"S": "ORDER#us-east-1-0"}, "SK": {"S": OUTBOX_SK_PREFIX + event_id}}
    replica = regions[WEST].dynamodb.get_item(TableName=TABLE, Key=key)["Item"]
    assert replica[ATTR_REGION] == {"S": EAST}
    assert ("aws:rep:updateregion" in replica) is marked
    assert replica.get("aws:rep:updateregion", {"S": EAST}) == {"S": EAST}
    assert replication.stats.applied[WEST] == 2  # the entity and its outbox item


def test_last_writer_wins_and_every_replica_converges(
    regions: dict[str, Region], clock: VirtualClock
) -> None:
    replication = replication_between(regions, clock, delay_seconds=5.0)
    key = {"PK": {"S": "ORDER#1"}, "SK": {"S": "ORDER"}}
    regions[EAST].dynamodb.put_item(TableName=TABLE, Item={**key, "v": {"S": "east"}})
    replication.poll()
    clock.advance(1)
    regions[WEST].dynamodb.put_item(TableName=TABLE, Item={**key, "v": {"S": "west, later"}})
    replication.poll()

    clock.advance(10)
    replication.poll()
    replication.poll()

    for r in regions.values():
        assert r.dynamodb.get_item(TableName=TABLE, Key=key)["Item"]["v"] == {"S": "west, later"}
    assert replication.stats.conflicts_lost[WEST] == 1  # east's older write lost in west


def _ops(region: Region, clock: VirtualClock, *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = outbox_ops(
        ["--table", TABLE, "--json", *argv],
        client_factory=region.client,
        stdout=out,
        stderr=io.StringIO(),
        now=clock.now_datetime,
    )
    return code, out.getvalue()


def test_a_lost_regions_pending_items_are_adopted_and_its_return_only_duplicates(
    regions: dict[str, Region], clock: VirtualClock
) -> None:
    east, west = regions[EAST], regions[WEST]
    replication = replication_between(regions, clock, delay_seconds=1.0)
    publishers = {
        name: publisher_mapping(r, clock, RegionScope(name)) for name, r in regions.items()
    }

    # GIVEN orders west wrote, replicated to east, and west lost before its publisher ran
    stranded = west.write_orders(6)
    clock.advance(2)
    replication.poll()
    replication.cut_off(WEST)
    assert {OUTBOX_SK_PREFIX + i for i in stranded} <= east.outbox_keys()

    # WHEN east's stream publisher runs, nothing of west's is published (not its to publish)
    LocalRuntime(clock).add(publishers[EAST]).drain()
    assert east.drain_bus() == []

    # WHEN, past the sweeper's minimum age, an operator adopts west's items in east
    clock.advance(600)
    code, out = _ops(east, clock, "adopt", "--from-region", WEST, "--bus-name", east.bus)

    # THEN east publishes each of them once and deletes them from its replica
    assert code == 0, out
    assert json.loads(out)["publish"]["published"] == 6
    assert Counter(east.drain_bus()) == Counter(stranded)
    assert east.outbox_keys() == set()

    # WHEN west comes back: replication resumes and its publisher wakes up
    replication.restore(WEST)
    runtime = LocalRuntime(clock)
    runtime.add(replication)
    runtime.add(publishers[WEST])
    runtime.drain()

    # THEN west publishes what its stream still held (at most the adopted items, again),
    # every event reached a bus at least once, and effects keyed by event id happen once
    # (the worst case: west had published none of them, so each goes out once more)
    again = Counter(west.drain_bus())
    assert again == Counter(stranded)
    effects = {event_id for event_id in [*east.received, *again]}  # idempotency by event id
    assert effects == set(stranded)
    assert west.outbox_keys() == set() == east.outbox_keys()


def test_adoption_refuses_to_adopt_the_region_it_runs_in(
    regions: dict[str, Region], clock: VirtualClock
) -> None:
    code, _ = _ops(regions[EAST], clock, "adopt", "--from-region", EAST, "--bus-name", "orders")
    assert code == 2


def test_outbox_ops_pending_reads_the_shards_of_the_regions_named(
    regions: dict[str, Region], clock: VirtualClock
) -> None:
    regions[EAST].write_orders(3)

    code, single = _ops(regions[EAST], clock, "pending", "--no-quarantined")
    code_region, multi = _ops(
        regions[EAST], clock, "--written-in", EAST, "pending", "--no-quarantined"
    )

    assert (code, code_region) == (0, 0)
    assert json.loads(single)["pending"]["count"] == 0
    assert json.loads(multi)["pending"]["count"] == 3
    assert len(json.loads(multi)["pending"]["items"]) == 3
