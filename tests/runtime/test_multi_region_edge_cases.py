"""Breaking the multi-region change (issue 29) at its seams: each test is a finding.

Two regions of a global table in one process (moto serves both;
``GlobalTableReplication`` replicates), configured as ``multi_region.tf``
configures an instance (demo/two_regions.py). Every test here failed on the
merge of the multi-region branch (ea038ce); see the commit that adds it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

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
from dynamodb_outbox.ops._context import Context
from dynamodb_outbox.ops.release import release_item
from dynamodb_outbox.outbox_item import ATTR_STATUS, OUTBOX_SK_PREFIX, STATUS_QUARANTINED
from dynamodb_outbox.pending_index import DEFAULT_PENDING_INDEX
from dynamodb_outbox.publishing import OutboxCandidate, PublishDependencies, publish_outbox_items
from dynamodb_outbox.regions import RegionScope
from dynamodb_outbox.sender_checks import ExpectedSender, UntrustedSender, read_body
from dynamodb_outbox.sinks import EVENTBRIDGE_RULES, EntryResult, EventBridgeSink
from dynamodb_outbox.sweeper import SweepResult, sweep
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from dynamodb_outbox.writer import InvalidWrite, OutboxWriter


@pytest.fixture
def regions(aws: None, clock: VirtualClock) -> Iterator[dict[str, Region]]:
    yield {name: make_region(name) for name in (EAST, WEST)}


def _deps(region: Region, clock: VirtualClock) -> PublishDependencies[Any]:
    return PublishDependencies(
        sink=EventBridgeSink(region.client("events"), region.bus),
        table_name=TABLE,
        dynamodb_client=region.dynamodb,
        table_keys=DEFAULT_TABLE_KEYS,
        sleep=lambda _: None,
        clock=clock.now_datetime,
    )


def _sweep(region: Region, clock: VirtualClock, scope: RegionScope) -> SweepResult:
    """One scheduled run of ``region``'s sweeper, as the module configures it (min age 300 s)."""
    return sweep(
        _deps(region, clock), min_age_seconds=300, now=clock.now_datetime(), region_scope=scope
    )


class _Refusing:
    """A sink refusing every event as poison (the stream publisher then quarantines)."""

    rules = EVENTBRIDGE_RULES

    def send(self, events: Any) -> list[EntryResult]:
        return [EntryResult("MalformedDetail", "refused") for _ in events]


def _key(pk: str, event_id: str) -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": OUTBOX_SK_PREFIX + event_id}}


# ------------------------------------------------------------------------------------------
# Finding 1 (duplicate, and published by a region that did not write it, while both are up):
# the standing adoption (multi_region.adopted_regions, adopt_after_seconds) measures an
# item's age by its ULID. A released item keeps its ULID, so it is "older than
# adopt_after_seconds" the moment it is released: the adopting region's next sweep takes it
# although its own region is up and publishing. docs/multi-region.md: "While the other region
# is up its own publisher and sweeper take its items within minutes, so the rule never finds
# any".
# ------------------------------------------------------------------------------------------


def test_a_released_item_is_not_adopted_while_its_region_is_up(
    regions: dict[str, Region], clock: VirtualClock
) -> None:
    east, west = regions[EAST], regions[WEST]
    runtime = LocalRuntime(clock)
    runtime.add(replication_between(regions, clock, delay_seconds=1.0))

    # GIVEN an event written in east, quarantined there (its sink refused it) and replicated
    pk = "ORDER#1"
    event = east.writer.new_event(pk, "OrderPlaced", {"n": 1}, source="orders")
    east.writer.write({"PK": pk, "SK": "ORDER"}, [event])
    key = _key(pk, event.id)
    written = east.dynamodb.get_item(TableName=TABLE, Key=key, ConsistentRead=True)["Item"]
    publish_outbox_items(
        [OutboxCandidate(key=key, item=written, position=0, checkpoint="1")],
        PublishDependencies(
            _Refusing(), TABLE, east.dynamodb, DEFAULT_TABLE_KEYS, sleep=lambda _: None
        ),
    )
    clock.advance(2)
    runtime.drain()
    assert west.dynamodb.get_item(TableName=TABLE, Key=key)["Item"][ATTR_STATUS] == {
        "S": STATUS_QUARANTINED
    }

    # WHEN, two hours later (the fix took that long), an operator releases it in east
    clock.advance(2 * 3600)
    ctx = Context(
        table=TABLE,
        region=EAST,
        dry_run=False,
        pending_index=DEFAULT_PENDING_INDEX,
        pending_shards=8,
        make_client=east.session.client,
        now=clock.now_datetime(),
        table_keys=DEFAULT_TABLE_KEYS,
    )
    quarantined = east.dynamodb.get_item(TableName=TABLE, Key=key, ConsistentRead=True)["Item"]
    assert release_item(ctx, quarantined)
    clock.advance(2)
    runtime.drain()  # the release replicated: west holds it pending, under east's shards

    # AND both regions' sweepers run on their schedules (the same minute, within the
    # replication latency of each other); west adopts east (the default 3600 s)
    clock.advance(60)
    east_run = _sweep(east, clock, RegionScope(EAST))
    west_run = _sweep(west, clock, RegionScope(WEST, adopted=(EAST,), adopt_after_seconds=3600))
    clock.advance(2)
    runtime.drain()

    # THEN east (up, replicating, its sweeper running) published its own item, once;
    # west's standing rule found nothing to adopt
    published = Counter(east.drain_bus() + west.drain_bus())
    assert west_run.publish.published == 0, "west adopted east's item while east was up"
    assert west_run.adoption_waits_for_release == 1
    assert west_run.other_region == 0
    assert east_run.publish.published == 1
    assert published == Counter({event.id: 1})


# ------------------------------------------------------------------------------------------
# Finding 2 (never published, and nothing says so): multi_region.publishes_unstamped
# defaults to false, so in a new multi-region deployment no region takes unstamped items.
# An item written by a writer without the stamp (OutboxWriter(table, client), or a writer
# not rolled with writer_environment) is dropped by every filter and in no sweeper's
# shards: no region publishes it, and no region's OldestPendingAgeSeconds shows it, so
# no alarm ever fires. docs: "none strands unstamped items ... this is on you".
# ------------------------------------------------------------------------------------------


def test_an_unstamped_item_no_region_publishes_is_at_least_seen_by_the_age_alarm(
    regions: dict[str, Region], clock: VirtualClock
) -> None:
    east, west = regions[EAST], regions[WEST]
    runtime = LocalRuntime(clock)
    runtime.add(replication_between(regions, clock, delay_seconds=1.0))
    scopes = {EAST: RegionScope(EAST), WEST: RegionScope(WEST)}  # the module's defaults
    for name, region in regions.items():
        runtime.add(publisher_mapping(region, clock, scopes[name]))

    # GIVEN a writer in east that was not given the region (no stamp)
    unstamped_writer = OutboxWriter(TABLE, east.dynamodb)
    event = unstamped_writer.new_event("ORDER#1", "OrderPlaced", {}, source="orders")
    unstamped_writer.write({"PK": "ORDER#1", "SK": "ORDER"}, [event])
    runtime.drain()

    # WHEN an hour passes with both regions' sweepers running
    clock.advance(3600)
    runs = {name: _sweep(region, clock, scopes[name]) for name, region in regions.items()}
    runtime.drain()

    # THEN it was published somewhere, or at least some region's age metric reports it
    published = east.drain_bus() + west.drain_bus()
    oldest = max(run.oldest_pending_age_seconds for run in runs.values())
    assert published or oldest >= 3000, (
        "an unstamped item is pending in both replicas, published by no region, and no "
        "region's OldestPendingAgeSeconds reports it"
    )


# ------------------------------------------------------------------------------------------
# Finding 3 (never published): the writer accepts a stamp no deployment can match. The
# module's filter and sweeper use the provider's region (lowercase, `^[a-z]{2}(-[a-z]+)+-
# [0-9]+$` in multi_region.tf), the writer takes any alphanumeric-and-hyphen name:
# "US-EAST-1" (an AWS_REGION set by hand outside Lambda) is stamped, filed under
# "US-EAST-1#nn" and published by no region.
# ------------------------------------------------------------------------------------------


def test_a_writer_stamp_no_region_can_match_is_refused_not_stranded(
    regions: dict[str, Region], clock: VirtualClock
) -> None:
    east = regions[EAST]
    environ = {
        "OUTBOX_TABLE_NAME": TABLE,
        "OUTBOX_MULTI_REGION": "true",
        "AWS_REGION": "US-EAST-1",
    }
    try:
        writer = OutboxWriter.from_environment(environ, east.dynamodb)
    except InvalidWrite:
        return  # refused: the writer never writes what nobody publishes
    event = writer.new_event("ORDER#1", "OrderPlaced", {}, source="orders")
    writer.write({"PK": "ORDER#1", "SK": "ORDER"}, [event])
    runtime = LocalRuntime(clock)
    runtime.add(publisher_mapping(east, clock, RegionScope(EAST, unstamped=True)))
    runtime.drain()
    clock.advance(3600)
    _sweep(east, clock, RegionScope(EAST, unstamped=True))

    assert east.drain_bus() == [event.id], "stamped US-EAST-1: no us-east-1 filter or sweeper"


# ------------------------------------------------------------------------------------------
# Finding 4 (never published): OutboxWriter.from_environment stamps AWS_REGION, whatever
# region the client it is given writes to. The writer's docstring says the stamp "must be
# the region of the client's endpoint"; nothing checks it. A producer in ap-south-1 (no
# replica, no outbox instance there) writing through a us-east-1 client stamps ap-south-1:
# every region's filter drops the item and no sweeper reads ap-south-1's shards.
# (botocore reads AWS_DEFAULT_REGION, not AWS_REGION, so outside Lambda the two can differ
# for a lazily made client too.)
# ------------------------------------------------------------------------------------------


def test_a_writer_whose_stamp_is_not_its_clients_region_is_refused(
    regions: dict[str, Region], clock: VirtualClock
) -> None:
    east, west = regions[EAST], regions[WEST]
    environ = {
        "OUTBOX_TABLE_NAME": TABLE,
        "OUTBOX_MULTI_REGION": "true",
        "AWS_REGION": "ap-south-1",
    }
    try:
        writer = OutboxWriter.from_environment(environ, east.dynamodb)
        event = writer.new_event("ORDER#1", "OrderPlaced", {}, source="orders")
        writer.write({"PK": "ORDER#1", "SK": "ORDER"}, [event])
    except InvalidWrite:
        return  # refused before anything was committed
    runtime = LocalRuntime(clock)
    runtime.add(replication_between(regions, clock, delay_seconds=1.0))
    runtime.add(publisher_mapping(east, clock, RegionScope(EAST, unstamped=True)))
    runtime.add(publisher_mapping(west, clock, RegionScope(WEST)))
    runtime.drain()
    clock.advance(3600)
    _sweep(east, clock, RegionScope(EAST, unstamped=True))
    _sweep(west, clock, RegionScope(WEST))

    assert east.drain_bus() + west.drain_bus() == [event.id], (
        "stamped ap-south-1 in us-east-1's replica: published by no region"
    )


@pytest.mark.xfail(
    strict=True,
    reason="not fixed: only `outbox-ops adopt --include-unstamped` takes them; docs now say so",
)
def test_the_lost_regions_unstamped_items_are_adopted_by_the_standing_rule(
    regions: dict[str, Region], clock: VirtualClock
) -> None:
    """Finding 5 (never published by the standing rule; docs): east publishes unstamped items
    (publishes_unstamped, the home region) and is lost; west adopts east
    (adopted_regions = [east]). Unstamped items (writers not yet rolled, in either region)
    stay stranded: the standing rule reads east's shards only, never the unprefixed ones.
    docs/multi-region.md says of the standing rule "once it is lost, its stranded items go
    out here after that age"; only `outbox-ops adopt --include-unstamped` takes them."""
    west = regions[WEST]
    replication = replication_between(regions, clock, delay_seconds=1.0)
    runtime = LocalRuntime(clock)
    runtime.add(replication)

    # GIVEN a not-yet-rolled writer in west writing unstamped items, east lost just then
    legacy = OutboxWriter(TABLE, west.dynamodb)
    event = legacy.new_event("ORDER#1", "OrderPlaced", {}, source="orders")
    legacy.write({"PK": "ORDER#1", "SK": "ORDER"}, [event])
    replication.cut_off(EAST)
    runtime.drain()

    # WHEN west's standing adoption of east has run past adopt_after_seconds
    clock.advance(2 * 3600)
    _sweep(west, clock, RegionScope(WEST, adopted=(EAST,), adopt_after_seconds=3600))

    # THEN the item east would have published went out from west
    assert west.drain_bus() == [event.id]


def test_a_resurrected_quarantined_item_is_kept_not_published_by_its_regions_stream(
    regions: dict[str, Region], clock: VirtualClock
) -> None:
    """Finding 6 (docs; a duplicate the docs do not count): docs/multi-region.md, Conflicts:
    "a quarantine ... in one region that is later than a delete in another brings the item
    back, quarantined ..., although its event was published: releasing it publishes it
    again", and the table's "quarantined, no shard: kept and alarmed". In the writing
    region the item comes back as an INSERT (it was absent there), which that region's
    filter admits (INSERT, its stamp) and its publisher publishes at once, quarantined or
    not, and deletes: no release needed, and nothing is kept."""
    east, west = regions[EAST], regions[WEST]
    replication = replication_between(regions, clock, delay_seconds=1.0)
    runtime = LocalRuntime(clock)
    runtime.add(replication)

    # GIVEN an event written in east, replicated to west, then west cut off
    pk = "ORDER#1"
    event = east.writer.new_event(pk, "OrderPlaced", {}, source="orders")
    east.writer.write({"PK": pk, "SK": "ORDER"}, [event])
    key = _key(pk, event.id)
    clock.advance(2)
    runtime.drain()
    replication.cut_off(WEST)

    # AND east's publisher publishes and deletes it
    east_publisher = publisher_mapping(east, clock, RegionScope(EAST))
    LocalRuntime(clock).add(east_publisher).drain()
    assert east.drain_bus() == [event.id]

    # AND later, west quarantines it (west's adopting sweeper, its sink refusing it)
    clock.advance(5)
    replica = west.dynamodb.get_item(TableName=TABLE, Key=key, ConsistentRead=True)["Item"]
    publish_outbox_items(
        [OutboxCandidate(key=key, item=replica, position=0, checkpoint="1")],
        PublishDependencies(
            _Refusing(), TABLE, west.dynamodb, DEFAULT_TABLE_KEYS, sleep=lambda _: None
        ),
    )

    # WHEN west comes back
    replication.restore(WEST)
    clock.advance(2)
    runtime.add(east_publisher)
    runtime.drain()

    # THEN as the docs say: the item is back quarantined in both replicas, and not
    # published again until someone releases it
    for region in (east, west):
        item = region.dynamodb.get_item(TableName=TABLE, Key=key, ConsistentRead=True).get("Item")
        assert item is not None and item[ATTR_STATUS] == {"S": STATUS_QUARANTINED}, region.name
    assert east.drain_bus() == []


def test_an_event_forwarded_from_another_regions_bus_reaches_a_module_consumer() -> None:
    """Finding 7 (never processed): EventBridge keeps an event's `account` and `region`
    when a rule routes it to another bus (that is how a central bus tells where an event
    came from), and the module's consumer checked both against its own bus
    (sender_checks, OUTBOX_CONSUMER_EVENT_BUS_ARN): every forwarded event was refused as
    UntrustedSender. Fixed: multi_region.receive_forwarded_from sets
    OUTBOX_CONSUMER_FORWARDED_FROM_REGIONS, and those regions are accepted (same account)."""
    envelope = OutboxWriter(TABLE).new_event("ORDER#1", "OrderPlaced", {}, source="orders")
    # As eu-west-1's bus delivers an event its rule received from us-east-1's bus.
    forwarded = {
        "version": "0",
        "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
        "detail-type": envelope.type,
        "source": envelope.source,
        "account": "111122223333",
        "time": "2026-12-05T07:00:00Z",
        "region": EAST,
        "resources": [],
        "detail": json.loads(envelope.to_json()),
    }
    west_bus_arn = f"arn:aws:events:{WEST}:111122223333:event-bus/orders"
    receiving = ExpectedSender.eventbridge(west_bus_arn, forwarded_from=[EAST])

    delivered = read_body(json.dumps(forwarded), receiving)

    assert delivered.envelope.id == envelope.id
    # Not configured to receive from east: still refused, naming the region.
    with pytest.raises(UntrustedSender, match="region 'us-east-1'"):
        read_body(json.dumps(forwarded), ExpectedSender.eventbridge(west_bus_arn))
    # Another account, even from a forwarding region: refused.
    with pytest.raises(UntrustedSender, match="account"):
        read_body(json.dumps({**forwarded, "account": "999999999999"}), receiving)
    # A region not forwarding to this bus: refused.
    with pytest.raises(UntrustedSender, match="region 'ap-south-1'"):
        read_body(json.dumps({**forwarded, "region": "ap-south-1"}), receiving)
