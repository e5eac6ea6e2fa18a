"""DynamoDB ``ParallelizationFactor``: lanes per shard, in order per item.

With a factor N Lambda processes up to N batches of one shard at once and
keeps order per item (partition key and sort key), not per shard. The runtime
reads each shard with N lanes, a record going to the lane its item's key hashes
to; each lane batches, retries and checkpoints on its own, and the ready lanes
are invoked at once.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest
from runtime_helpers import Recorder, Table

from dynamodb_outbox.local import (
    DrainLimitReached,
    MappingConfigError,
    StreamMapping,
    VirtualClock,
    mapping_config,
)

ITEMS = 8
VERSIONS = 4


def _write_versions(table: Table) -> list[tuple[str, int]]:
    """Each item written VERSIONS times, the items' writes interleaved; the stream order."""
    written = []
    for version in range(VERSIONS):
        for item in range(ITEMS):
            table.put("ORDER#1", f"ITEM#{item}", v=version)
            written.append((f"ITEM#{item}", version))
    return written


def _seen(event_records: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [
        (r["dynamodb"]["Keys"]["SK"]["S"], int(r["dynamodb"]["NewImage"]["v"]["N"]))
        for r in event_records
    ]


def _mapping(
    table: Table, streams: Any, clock: VirtualClock, handler: Any, factor: int, **kwargs: Any
) -> StreamMapping:
    return StreamMapping(
        mapping_config(table.stream_arn, parallelization_factor=factor, **kwargs),
        handler,
        streams_client=streams,
        clock=clock,
        random_source=random.Random(7),
    )


def test_each_item_stays_in_order_while_items_overtake_each_other(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    written = _write_versions(table)
    handler = Recorder()
    mapping = _mapping(table, streams, clock, handler, factor=4, batch_size=3)

    mapping.drain()

    delivered = [seen for event in handler.events for seen in _seen(event["Records"])]
    assert sorted(delivered) == sorted(written)
    per_item: dict[str, list[int]] = defaultdict(list)
    for item, version in delivered:
        per_item[item].append(version)
    assert all(versions == list(range(VERSIONS)) for versions in per_item.values())
    assert delivered != written, "with four lanes, some item should overtake another"
    lanes = {invocation.lane for invocation in mapping.invocations}
    assert len(lanes) > 1
    assert lanes <= {0, 1, 2, 3}
    # In the first round every lane with records has a batch in flight.
    assert mapping.stats.peak_concurrency == len(lanes)
    assert not mapping.has_pending_work()


def test_a_failing_batch_holds_back_its_lane_only(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    _write_versions(table)

    def fail_item_0(event: dict[str, Any]) -> Any:
        if any(item == "ITEM#0" for item, _ in _seen(event["Records"])):
            raise RuntimeError("poison")
        return None

    handler = Recorder(fail_item_0)
    mapping = _mapping(table, streams, clock, handler, factor=4, batch_size=3)

    with pytest.raises(DrainLimitReached):
        mapping.drain(max_invocations=60)

    stuck_lane = next(
        invocation.lane
        for invocation in mapping.invocations
        if "ITEM#0" in str(invocation.event["Records"])
    )
    delivered_ok = {
        seen
        for invocation in mapping.invocations
        if invocation.outcome == "success"
        for seen in _seen(invocation.event["Records"])
    }
    other_lane_items = {
        item
        for invocation in mapping.invocations
        if invocation.lane != stuck_lane
        for item, _ in _seen(invocation.event["Records"])
    }
    assert other_lane_items, "some items hash to other lanes"
    for item in other_lane_items:
        assert {(item, version) for version in range(VERSIONS)} <= delivered_ok
    # ITEM#0 is the stream's first record: its lane never gets past its first batch.
    assert not any(
        invocation.outcome == "success"
        for invocation in mapping.invocations
        if invocation.lane == stuck_lane
    )


def test_a_factor_of_one_keeps_the_shard_order(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    written = _write_versions(table)
    handler = Recorder()
    mapping = _mapping(table, streams, clock, handler, factor=1, batch_size=3)

    mapping.drain()

    delivered = [seen for event in handler.events for seen in _seen(event["Records"])]
    assert delivered == written
    assert mapping.stats.peak_concurrency == 1


@pytest.mark.parametrize("factor", [0, 11])
def test_a_factor_outside_one_to_ten_is_refused(
    table: Table, streams: Any, clock: VirtualClock, factor: int
) -> None:
    with pytest.raises(MappingConfigError, match="ParallelizationFactor"):
        _mapping(table, streams, clock, Recorder(), factor=factor)
