"""StreamMapping: where reading starts, what is filtered, how batches close, what a record holds."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from runtime_helpers import (
    REGION,
    FakeShard,
    FakeStreams,
    Recorder,
    Table,
    sort_keys,
    stream_api_record,
)

from dynamodb_outbox.local import (
    PAYLOAD_LIMIT_BYTES,
    MappingConfigError,
    StreamMapping,
    VirtualClock,
    mapping_config,
)

OUTBOX_INSERTS = [
    {"eventName": ["INSERT"], "dynamodb": {"Keys": {"SK": {"S": [{"prefix": "OUTBOX#"}]}}}}
]


def stream_mapping(
    table: Table, handler: Any, streams: Any, clock: VirtualClock, **settings: Any
) -> StreamMapping:
    return StreamMapping(
        mapping_config(table.stream_arn, **settings),
        handler,
        streams_client=streams,
        clock=clock,
    )


# ---------------------------------------------------------------- starting position


def test_trim_horizon_delivers_records_written_before_the_mapping_existed(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    # GIVEN records written before any mapping exists
    table.put_outbox(3)
    handler = Recorder()
    # WHEN the mapping is created afterwards and polled
    mapping = stream_mapping(table, handler, streams, clock)
    mapping.drain()
    # THEN it sees them, from the oldest on
    assert [sort_keys(e) for e in handler.events] == [
        ["OUTBOX#000000", "OUTBOX#000001", "OUTBOX#000002"]
    ]


def test_latest_starting_position_is_refused_with_the_reason(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    config = mapping_config(table.stream_arn, starting_position="LATEST")
    with pytest.raises(MappingConfigError, match="TRIM_HORIZON"):
        StreamMapping(config, Recorder(), streams_client=streams, clock=clock)


def test_a_mapping_does_not_redeliver_what_it_already_processed(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    handler = Recorder()
    mapping = stream_mapping(table, handler, streams, clock)
    table.put_outbox(2)
    mapping.drain()
    table.put_outbox(1, start=2)
    mapping.drain()
    assert [sort_keys(e) for e in handler.events] == [
        ["OUTBOX#000000", "OUTBOX#000001"],
        ["OUTBOX#000002"],
    ]


# ---------------------------------------------------------------- filters


def test_filter_drops_records_matching_no_pattern_and_counts_them_processed(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    # GIVEN an entity write, an outbox insert, an outbox update and another outbox insert
    table.put("ORDER#1", "ORDER")
    table.put("ORDER#1", "OUTBOX#000001")
    table.put("ORDER#1", "OUTBOX#000001", status="published")  # MODIFY
    table.put("ORDER#1", "OUTBOX#000002")
    handler = Recorder()
    mapping = stream_mapping(table, handler, streams, clock, filter_patterns=OUTBOX_INSERTS)
    # WHEN drained
    mapping.drain()
    # THEN only the outbox inserts reach the handler, with their type descriptors intact
    assert [sort_keys(e) for e in handler.events] == [["OUTBOX#000001", "OUTBOX#000002"]]
    assert {r["eventName"] for r in handler.events[0]["Records"]} == {"INSERT"}
    assert mapping.stats.records_filtered == 2
    # AND the dropped records count as processed: nothing is pending or redelivered
    assert not mapping.has_pending_work()
    assert mapping.drain().invocations == []


def test_records_that_match_no_filter_alone_move_the_checkpoint_without_an_invocation(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put("ORDER#1", "ORDER")
    table.put("ORDER#2", "ORDER")
    handler = Recorder()
    mapping = stream_mapping(table, handler, streams, clock, filter_patterns=OUTBOX_INSERTS)
    mapping.drain()
    table.put_outbox(1)
    mapping.drain()
    assert handler.events and [sort_keys(e) for e in handler.events] == [["OUTBOX#000000"]]
    assert mapping.stats.records_filtered == 2


def test_filters_are_ored(table: Table, streams: Any, clock: VirtualClock) -> None:
    table.put("ORDER#1", "OUTBOX#1")
    table.put("ORDER#1", "AUDIT#1")
    table.put("ORDER#1", "ORDER")
    patterns = [
        {"dynamodb": {"Keys": {"SK": {"S": [{"prefix": "OUTBOX#"}]}}}},
        {"dynamodb": {"Keys": {"SK": {"S": [{"prefix": "AUDIT#"}]}}}},
    ]
    handler = Recorder()
    stream_mapping(table, handler, streams, clock, filter_patterns=patterns).drain()
    assert sort_keys(handler.events[0]) == ["OUTBOX#1", "AUDIT#1"]


def test_an_invalid_filter_pattern_is_refused(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    config = mapping_config(table.stream_arn, filter_patterns=['{"eventName": "INSERT"}'])
    with pytest.raises(MappingConfigError, match="filter pattern"):
        StreamMapping(config, Recorder(), streams_client=streams, clock=clock)


# ---------------------------------------------------------------- batching


def test_batch_size_caps_the_records_of_each_invocation(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(7)
    handler = Recorder()
    stream_mapping(table, handler, streams, clock, batch_size=3).drain()
    assert [len(e["Records"]) for e in handler.events] == [3, 3, 1]
    assert [k for e in handler.events for k in sort_keys(e)] == [
        f"OUTBOX#{n:06d}" for n in range(7)
    ]


def test_poll_runs_at_most_one_batch_per_shard(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(5)
    handler = Recorder()
    mapping = stream_mapping(table, handler, streams, clock, batch_size=2)
    assert len(mapping.poll().invocations) == 1
    assert len(mapping.poll().invocations) == 1
    assert handler.batches == [handler.batches[0], handler.batches[1]]
    assert len(handler.delivered) == 4


def test_batching_window_holds_a_partial_batch_until_the_virtual_clock_passes_it(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(2)
    handler = Recorder()
    mapping = stream_mapping(
        table, handler, streams, clock, batch_size=10, maximum_batching_window_seconds=5
    )
    # WHEN the poller first sees a partial batch, it waits
    held = mapping.poll()
    assert held.invocations == [] and held.next_ready_at == pytest.approx(clock.now() + 5)
    clock.advance(4.9)
    table.put_outbox(1, start=2)
    assert mapping.poll().invocations == []
    # THEN the batch, grown meanwhile, goes once the window has passed on the virtual clock
    clock.advance(0.1)
    assert len(mapping.poll().invocations) == 1
    assert [sort_keys(e) for e in handler.events] == [
        ["OUTBOX#000000", "OUTBOX#000001", "OUTBOX#000002"]
    ]


def test_a_full_batch_does_not_wait_for_the_batching_window(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(3)
    handler = Recorder()
    mapping = stream_mapping(
        table, handler, streams, clock, batch_size=2, maximum_batching_window_seconds=300
    )
    assert len(mapping.poll().invocations) == 1
    assert len(handler.events[0]["Records"]) == 2
    # the remainder is partial and waits
    assert mapping.poll().invocations == []


def test_drain_moves_the_clock_to_the_end_of_a_batching_window(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(1)
    handler = Recorder()
    started = clock.now()
    stream_mapping(table, handler, streams, clock, maximum_batching_window_seconds=30).drain()
    assert len(handler.events) == 1
    assert clock.now() == pytest.approx(started + 30)


def test_payload_limit_closes_a_batch_before_6_mb(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    # GIVEN 20 items of ~350 KB: 7 MB together, well under the batch size of 100
    for n in range(20):
        table.put("ORDER#1", f"OUTBOX#{n:06d}", blob="x" * 350_000)
    handler = Recorder()
    # WHEN drained
    stream_mapping(table, handler, streams, clock, batch_size=100).drain()
    # THEN no invocation payload exceeds the limit, and the first batch was closed by it
    sizes = [len(json.dumps(e, separators=(",", ":")).encode()) for e in handler.events]
    assert all(size <= PAYLOAD_LIMIT_BYTES for size in sizes)
    assert len(handler.events) == 2
    first_batch = handler.events[0]["Records"]
    assert sizes[0] + len(json.dumps(handler.events[1]["Records"][0])) > PAYLOAD_LIMIT_BYTES
    assert len(first_batch) + len(handler.events[1]["Records"]) == 20


# ---------------------------------------------------------------- event shape


def test_records_have_the_lambda_dynamodb_event_shape(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put("ORDER#1", "OUTBOX#1", blob=b"\x00\x01", n=5)
    table.put("ORDER#1", "OUTBOX#1", n=6)
    handler = Recorder()
    stream_mapping(table, handler, streams, clock).drain()
    insert, modify = handler.events[0]["Records"]
    assert set(insert) == {
        "eventID",
        "eventName",
        "eventVersion",
        "eventSource",
        "awsRegion",
        "dynamodb",
        "eventSourceARN",
    }
    assert insert["eventSource"] == "aws:dynamodb"
    assert insert["eventSourceARN"] == table.stream_arn
    assert insert["awsRegion"] == REGION
    data = insert["dynamodb"]
    assert isinstance(data["ApproximateCreationDateTime"], int)
    assert data["ApproximateCreationDateTime"] == int(clock.now())
    assert data["Keys"] == {"PK": {"S": "ORDER#1"}, "SK": {"S": "OUTBOX#1"}}
    assert data["NewImage"]["blob"] == {"B": base64.b64encode(b"\x00\x01").decode()}
    assert data["NewImage"]["n"] == {"N": "5"}
    assert data["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert isinstance(data["SequenceNumber"], str) and isinstance(data["SizeBytes"], int)
    assert "OldImage" not in data
    assert modify["eventName"] == "MODIFY" and modify["dynamodb"]["OldImage"]["n"] == {"N": "5"}


def test_the_handler_gets_a_copy_it_cannot_use_to_change_a_retry(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(1)
    seen: list[str] = []

    def mutating(event: dict[str, Any], context: Any) -> None:
        seen.append(event["Records"][0]["dynamodb"]["Keys"]["SK"]["S"])
        event["Records"][0]["dynamodb"]["Keys"]["SK"]["S"] = "changed"
        if len(seen) == 1:
            raise RuntimeError("fail once")

    stream_mapping(table, mutating, streams, clock).drain()
    assert seen == ["OUTBOX#000000", "OUTBOX#000000"]


def test_the_context_names_the_function_of_the_mapping(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(1)
    contexts: list[Any] = []
    arn = f"arn:aws:lambda:{REGION}:123456789012:function:publisher"
    stream_mapping(table, lambda e, c: contexts.append(c), streams, clock, function_arn=arn).drain()
    assert contexts[0].function_name == "publisher"
    assert contexts[0].invoked_function_arn == arn
    assert contexts[0].get_remaining_time_in_millis() > 0


# ---------------------------------------------------------------- shards


def test_a_child_shard_is_read_only_after_its_parent_is_read_to_its_end(
    clock: VirtualClock,
) -> None:
    now = clock.now()
    parent = FakeShard(
        "shard-parent", [stream_api_record(str(n), f"OUTBOX#{n}", now) for n in (1, 2)]
    )
    child = FakeShard(
        "shard-child", [stream_api_record("3", "OUTBOX#3", now)], parent="shard-parent"
    )
    fake = FakeStreams([child, parent])
    arn = f"arn:aws:dynamodb:{REGION}:123456789012:table/outbox/stream/label"
    handler = Recorder()
    mapping = StreamMapping(
        mapping_config(arn, batch_size=1), handler, streams_client=fake, clock=clock
    )
    mapping.drain()
    # the open parent keeps its child waiting
    assert handler.delivered == ["1", "2"]
    parent.closed = True
    mapping.drain()
    assert handler.delivered == ["1", "2", "3"]


def test_a_batch_size_above_one_thousand_is_read_over_several_get_records_pages(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    """AWS: DynamoDB BatchSize up to 10,000; GetRecords returns at most 1,000 per call."""
    table.put_outbox(1_500)
    handler = Recorder()
    mapping = StreamMapping(
        mapping_config(table.stream_arn, batch_size=10_000),
        handler,
        streams_client=streams,
        clock=clock,
    )

    mapping.drain()

    assert [len(batch) for batch in handler.batches] == [1_500]


def test_the_next_window_begins_when_the_previous_invocation_completes(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    """AWS: "the next batching window begins as soon as the previous function
    invocation completes", so records arriving after it ran out go at once."""
    table.put_outbox(1)
    handler = Recorder()
    mapping = stream_mapping(
        table, handler, streams, clock, batch_size=10, maximum_batching_window_seconds=5
    )
    mapping.drain()
    assert len(handler.events) == 1
    # WHEN a record arrives long after that invocation's window ran out
    clock.advance(100)
    table.put_outbox(1, start=1)
    # THEN it is delivered on the next poll, without a fresh 5 s wait
    assert len(mapping.poll().invocations) == 1
