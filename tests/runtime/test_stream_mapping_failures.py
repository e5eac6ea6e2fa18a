"""StreamMapping: partial batch responses, checkpoints, bisection, retries, record age,
on-failure destinations, at-least-once delivery and the 24-hour trim."""

from __future__ import annotations

import json
from typing import Any

import pytest
from runtime_helpers import (
    REGION,
    FakeShard,
    FakeStreams,
    Queue,
    Recorder,
    Table,
    failures,
    sort_keys,
    stream_api_record,
)

from dynamodb_outbox.local import (
    STREAM_RETENTION_SECONDS,
    DrainLimitReached,
    StreamMapping,
    VirtualClock,
    mapping_config,
)


def stream_mapping(
    table: Table,
    handler: Any,
    streams: Any,
    clock: VirtualClock,
    *,
    sqs: Any = None,
    **settings: Any,
) -> StreamMapping:
    return StreamMapping(
        mapping_config(table.stream_arn, **settings),
        handler,
        streams_client=streams,
        sqs_client=sqs,
        clock=clock,
    )


def sequence_numbers(table: Table, streams: Any, clock: VirtualClock) -> list[str]:
    """The sequence numbers of every record in the stream, oldest first."""
    probe = Recorder()
    stream_mapping(table, probe, streams, clock, batch_size=1000).drain()
    return probe.delivered


def fail_on(*sort_keys_to_fail: str) -> Any:
    """A handler body that raises when the batch holds one of these sort keys."""

    def respond(event: dict[str, Any]) -> None:
        if set(sort_keys(event)) & set(sort_keys_to_fail):
            raise RuntimeError("poison record")

    return respond


# ---------------------------------------------------------------- response shapes


@pytest.mark.parametrize(
    "response",
    [None, {}, {"batchItemFailures": None}, {"batchItemFailures": []}, {"other": 1}],
    ids=["null", "empty-object", "null-list", "empty-list", "no-failures-key"],
)
def test_a_success_response_checkpoints_past_the_whole_batch(
    response: Any, table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(3)
    handler = Recorder(respond=response)
    mapping = stream_mapping(table, handler, streams, clock, report_batch_item_failures=True)
    mapping.drain()
    assert len(handler.events) == 1
    assert [i.outcome for i in mapping.invocations] == ["success"]
    assert not mapping.has_pending_work()


@pytest.mark.parametrize(
    "bad_entry",
    [
        {"itemIdentifier": ""},
        {"itemIdentifier": None},
        {"ItemIdentifier": "<seq>"},
        {"messageId": "<seq>"},
        "<seq>",
        {"itemIdentifier": "99999999999999999999999"},
        {"itemIdentifier": 1},
    ],
    ids=[
        "empty-identifier",
        "null-identifier",
        "misspelt-ItemIdentifier",
        "misspelt-messageId",
        "not-an-object",
        "identifier-not-in-batch",
        "identifier-not-a-string",
    ],
)
def test_a_malformed_batch_item_failure_fails_the_whole_batch(
    bad_entry: Any, table: Table, streams: Any, clock: VirtualClock
) -> None:
    # GIVEN a handler that answers its first invocation with a malformed failure entry
    table.put_outbox(3)

    def respond(event: dict[str, Any]) -> Any:
        if len(handler.events) > 1:
            return None
        last = event["Records"][-1]["dynamodb"]["SequenceNumber"]
        entry = json.loads(json.dumps(bad_entry).replace("<seq>", last))
        return {"batchItemFailures": [entry]}

    handler = Recorder(respond=respond)
    mapping = stream_mapping(table, handler, streams, clock, report_batch_item_failures=True)
    # WHEN drained
    mapping.drain()
    # THEN the whole batch was retried, from its first record
    assert len(handler.batches) == 2
    assert handler.batches[1] == handler.batches[0]
    assert mapping.invocations[0].outcome == "failure"
    assert mapping.stats.retries == 1


def test_a_response_that_is_not_an_object_fails_the_whole_batch(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(2)
    handler = Recorder(respond=lambda e: "done" if len(handler.events) == 1 else None)
    mapping = stream_mapping(table, handler, streams, clock, report_batch_item_failures=True)
    mapping.drain()
    assert len(handler.batches) == 2 and handler.batches[0] == handler.batches[1]


def test_the_response_body_is_ignored_without_report_batch_item_failures(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(3)
    handler = Recorder(respond=lambda e: failures(e["Records"][0]["dynamodb"]["SequenceNumber"]))
    mapping = stream_mapping(table, handler, streams, clock, report_batch_item_failures=False)
    mapping.drain()
    assert len(handler.events) == 1
    assert mapping.invocations[0].outcome == "success"


def test_an_exception_fails_the_whole_batch(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(3)
    handler = Recorder()
    calls: list[int] = []

    def raising(event: dict[str, Any], context: Any) -> Any:
        calls.append(len(event["Records"]))
        if len(calls) == 1:
            raise ValueError("boom")
        return handler(event, context)

    mapping = stream_mapping(table, raising, streams, clock, report_batch_item_failures=True)
    mapping.drain()
    assert calls == [3, 3]
    assert mapping.invocations[0].outcome == "failure"
    assert mapping.invocations[0].error == "ValueError: boom"


def test_a_response_that_cannot_be_serialised_is_a_function_error(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(1)
    handler = Recorder(respond=lambda e: {1, 2} if len(handler.events) == 1 else None)
    mapping = stream_mapping(table, handler, streams, clock)
    mapping.drain()
    assert len(handler.events) == 2
    assert (mapping.invocations[0].error or "").startswith("Runtime.MarshalError")


# ---------------------------------------------------------------- checkpoints


def test_several_identifiers_checkpoint_at_the_lowest_sequence_number(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(5)
    seqs = sequence_numbers(table, streams, clock)

    def respond(event: dict[str, Any]) -> Any:
        # report the 4th and the 2nd record, in that order
        return failures(seqs[3], seqs[1]) if len(handler.events) == 1 else None

    handler = Recorder(respond=respond)
    mapping = stream_mapping(table, handler, streams, clock, report_batch_item_failures=True)
    mapping.drain()
    assert handler.batches == [seqs, seqs[1:]]
    assert mapping.invocations[0].outcome == "partial"
    assert mapping.invocations[0].failed_ids == tuple(seqs[1:])


def test_the_lowest_sequence_number_is_found_by_numeric_comparison(
    clock: VirtualClock,
) -> None:
    # "99" < "100" numerically, not as strings: sequence numbers grow in length.
    sequences = ["98", "99", "100", "101"]
    shard = FakeShard(
        "shard-1", [stream_api_record(s, f"OUTBOX#{s}", clock.now()) for s in sequences]
    )
    arn = f"arn:aws:dynamodb:{REGION}:123456789012:table/outbox/stream/label"
    handler = Recorder(
        respond=lambda e: failures("100", "99") if len(handler.events) == 1 else None
    )
    mapping = StreamMapping(
        mapping_config(arn, report_batch_item_failures=True),
        handler,
        streams_client=FakeStreams([shard]),
        clock=clock,
    )
    mapping.drain()
    assert handler.batches == [sequences, ["99", "100", "101"]]


def test_a_partial_failure_retries_from_the_checkpoint_and_then_moves_on(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(4)
    seqs = sequence_numbers(table, streams, clock)
    handler = Recorder(respond=lambda e: failures(seqs[2]) if len(handler.events) == 1 else None)
    mapping = stream_mapping(table, handler, streams, clock, report_batch_item_failures=True)
    mapping.drain()
    table.put_outbox(1, start=4)
    mapping.drain()
    assert handler.batches[:2] == [seqs, seqs[2:]]
    assert [sort_keys(e) for e in handler.events][2] == ["OUTBOX#000004"]


# ---------------------------------------------------------------- at least once


def test_a_retried_batch_redelivers_records_the_handler_already_processed(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(3)
    processed: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> None:
        for key in sort_keys(event):
            if key == "OUTBOX#000002" and processed.count(key) == 0:
                processed.append(key)
                raise RuntimeError("transient failure on the last record")
            processed.append(key)

    stream_mapping(table, handler, streams, clock).drain()
    assert processed.count("OUTBOX#000000") == 2
    assert processed.count("OUTBOX#000001") == 2


# ---------------------------------------------------------------- bisect


def test_bisect_isolates_a_poison_record_without_consuming_retries_for_splits(
    table: Table, streams: Any, clock: VirtualClock, failure_queue: Queue, sqs: Any
) -> None:
    # GIVEN 4 records, the third poison, bisect on and no retries at all
    table.put_outbox(4)
    handler = Recorder(respond=fail_on("OUTBOX#000002"))
    mapping = stream_mapping(
        table,
        handler,
        streams,
        clock,
        sqs=sqs,
        bisect_batch_on_function_error=True,
        maximum_retry_attempts=0,
        on_failure_destination=failure_queue.arn,
    )
    # WHEN drained
    mapping.drain()
    # THEN the batch was split in two, the failing half split again, and only the
    # poison record was discarded: the splits did not use the (zero) retries
    assert [sort_keys(e) for e in handler.events] == [
        ["OUTBOX#000000", "OUTBOX#000001", "OUTBOX#000002", "OUTBOX#000003"],
        ["OUTBOX#000000", "OUTBOX#000001"],
        ["OUTBOX#000002", "OUTBOX#000003"],
        ["OUTBOX#000002"],
        ["OUTBOX#000003"],
    ]
    assert mapping.stats.bisections == 2
    assert mapping.stats.retries == 0
    assert mapping.stats.records_discarded == 1
    [record] = [json.loads(body) for body in failure_queue.bodies()]
    assert record["DDBStreamBatchInfo"]["batchSize"] == 1


def test_without_bisect_the_same_failure_discards_the_whole_batch(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(4)
    handler = Recorder(respond=fail_on("OUTBOX#000002"))
    mapping = stream_mapping(table, handler, streams, clock, maximum_retry_attempts=0)
    mapping.drain()
    assert len(handler.events) == 1
    assert mapping.stats.records_discarded == 4


def test_bisect_with_a_partial_response_splits_at_the_returned_sequence_number(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(5)
    seqs = sequence_numbers(table, streams, clock)
    handler = Recorder(respond=lambda e: failures(seqs[2]) if len(handler.events) == 1 else None)
    mapping = stream_mapping(
        table,
        handler,
        streams,
        clock,
        report_batch_item_failures=True,
        bisect_batch_on_function_error=True,
        maximum_retry_attempts=0,
    )
    mapping.drain()
    # only the records from the returned sequence number on are retried, as a split:
    # with zero retries allowed they would otherwise have been discarded
    assert handler.batches == [seqs, seqs[2:]]
    assert mapping.stats.bisections == 1
    assert mapping.stats.records_discarded == 0


def test_bisect_halves_a_batch_whose_first_record_is_reported(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(4)
    seqs = sequence_numbers(table, streams, clock)
    handler = Recorder(
        respond=lambda e: failures(seqs[0]) if seqs[0] in handler.batches[-1] else None
    )
    mapping = stream_mapping(
        table,
        handler,
        streams,
        clock,
        report_batch_item_failures=True,
        bisect_batch_on_function_error=True,
        maximum_retry_attempts=1,
    )
    mapping.drain()
    assert handler.batches == [seqs, seqs[:2], [seqs[0]], [seqs[0]], [seqs[1]], seqs[2:]]


# ---------------------------------------------------------------- retries exhausted


def test_exhausted_retries_send_a_metadata_only_record_to_the_on_failure_queue(
    table: Table, streams: Any, clock: VirtualClock, failure_queue: Queue, sqs: Any
) -> None:
    # GIVEN a poison batch and two retries allowed
    for n in range(2):
        table.put("ORDER#1", f"OUTBOX#{n:06d}", payload=f"secret-payload-{n}")
    seqs = sequence_numbers(table, streams, clock)
    handler = Recorder(respond=fail_on("OUTBOX#000000"))
    function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:publisher"
    mapping = stream_mapping(
        table,
        handler,
        streams,
        clock,
        sqs=sqs,
        maximum_retry_attempts=2,
        on_failure_destination=failure_queue.arn,
        function_arn=function_arn,
    )
    # WHEN drained
    mapping.drain()
    # THEN it was invoked once and retried twice, then discarded
    assert len(handler.events) == 3
    assert mapping.stats.retries == 2
    assert mapping.stats.failures_sent == 1
    # AND the on-failure queue holds a record describing the batch, not its records
    [body] = failure_queue.bodies()
    assert "secret-payload" not in body and "NewImage" not in body and "OUTBOX#" not in body
    record = json.loads(body)
    assert set(record) == {
        "requestContext",
        "responseContext",
        "version",
        "timestamp",
        "DDBStreamBatchInfo",
    }
    assert record["version"] == "1.0"
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 3
    assert record["requestContext"]["functionArn"] == function_arn
    assert record["requestContext"]["requestId"] == mapping.invocations[-1].request_id
    assert record["responseContext"] == {
        "statusCode": 200,
        "executedVersion": "$LATEST",
        "functionError": "Unhandled",
    }
    info = record["DDBStreamBatchInfo"]
    assert info["startSequenceNumber"] == seqs[0]
    assert info["endSequenceNumber"] == seqs[1]
    assert info["batchSize"] == 2
    assert info["streamArn"] == table.stream_arn
    assert info["shardId"].startswith("shardId-")
    assert info["approximateArrivalOfFirstRecord"].endswith("Z")
    assert info["approximateArrivalOfLastRecord"].endswith("Z")


def test_after_a_discarded_batch_the_shard_moves_on(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(1)
    handler = Recorder(respond=fail_on("OUTBOX#000000"))
    mapping = stream_mapping(table, handler, streams, clock, maximum_retry_attempts=1)
    mapping.drain()
    table.put_outbox(1, start=1)
    mapping.drain()
    assert sort_keys(handler.events[-1]) == ["OUTBOX#000001"]


def test_infinite_retries_block_the_shard_and_drain_stops_at_its_bound(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(1)
    handler = Recorder(respond=fail_on("OUTBOX#000000"))
    mapping = stream_mapping(table, handler, streams, clock)  # MaximumRetryAttempts -1
    table.put_outbox(1, start=1)
    with pytest.raises(DrainLimitReached) as stopped:
        mapping.drain(max_invocations=25)
    assert len(stopped.value.result.invocations) == 25
    assert all(sort_keys(e)[0] == "OUTBOX#000000" for e in handler.events)
    assert mapping.has_pending_work()


# ---------------------------------------------------------------- record age


def test_a_batch_older_than_the_maximum_record_age_is_discarded_without_invoking(
    table: Table, streams: Any, clock: VirtualClock, failure_queue: Queue, sqs: Any
) -> None:
    # GIVEN a failing record and a maximum age of 60 s
    table.put_outbox(1)
    handler = Recorder(respond=fail_on("OUTBOX#000000"))
    mapping = stream_mapping(
        table,
        handler,
        streams,
        clock,
        sqs=sqs,
        maximum_record_age_seconds=60,
        on_failure_destination=failure_queue.arn,
    )
    mapping.poll()
    clock.advance(59)
    mapping.poll()
    assert len(handler.events) == 2 and mapping.stats.batches_discarded == 0
    # WHEN the record is past the age on the virtual clock
    clock.advance(2)
    result = mapping.poll()
    # THEN the batch is dropped without a further invocation and reported
    assert result.invocations == []
    assert len(handler.events) == 2
    [record] = [json.loads(body) for body in failure_queue.bodies()]
    assert record["requestContext"]["condition"] == "RecordAgeExceeded"
    assert record["requestContext"]["approximateInvokeCount"] == 2
    # AND a record written now is young, and delivered
    table.put_outbox(1, start=1)
    handler.respond = None
    mapping.drain()
    assert sort_keys(handler.events[-1]) == ["OUTBOX#000001"]


# ---------------------------------------------------------------- 24-hour retention


def test_records_older_than_24_hours_are_trimmed_and_never_delivered(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    # GIVEN records written a day and a second ago, and one written now
    table.put_outbox(3)
    clock.advance(STREAM_RETENTION_SECONDS + 1)
    table.put_outbox(1, start=3)
    handler = Recorder()
    # WHEN a mapping reads the stream from TRIM_HORIZON
    mapping = stream_mapping(table, handler, streams, clock)
    mapping.drain()
    # THEN the old records are gone: counted as trimmed, never delivered
    assert [sort_keys(e) for e in handler.events] == [["OUTBOX#000003"]]
    assert mapping.stats.records_trimmed == 3
    assert len(mapping.trimmed_sequence_numbers) == 3


def test_a_checkpoint_in_trimmed_data_skips_forward_to_the_oldest_readable_record(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    # GIVEN a mapping that processed one record, then fell a day behind
    handler = Recorder()
    mapping = stream_mapping(table, handler, streams, clock)
    table.put_outbox(1)
    mapping.drain()
    table.put_outbox(2, start=1)
    clock.advance(STREAM_RETENTION_SECONDS / 2)
    table.put_outbox(1, start=3)
    clock.advance(STREAM_RETENTION_SECONDS / 2 + 1)
    # WHEN it polls again
    mapping.drain()
    # THEN the records that aged out while unread are lost, the rest delivered
    assert [sort_keys(e) for e in handler.events] == [["OUTBOX#000000"], ["OUTBOX#000003"]]
    assert mapping.stats.records_trimmed == 2


def test_a_record_retried_forever_unblocks_its_shard_once_trimmed(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(1)
    handler = Recorder(respond=fail_on("OUTBOX#000000"))
    mapping = stream_mapping(table, handler, streams, clock)
    with pytest.raises(DrainLimitReached):
        mapping.drain(max_invocations=5)
    clock.advance(STREAM_RETENTION_SECONDS + 1)
    table.put_outbox(1, start=1)
    mapping.drain(max_invocations=5)
    assert sort_keys(handler.events[-1]) == ["OUTBOX#000001"]
    assert mapping.stats.records_trimmed == 1


def test_trimmed_data_access_from_the_api_restarts_at_the_oldest_record(
    clock: VirtualClock,
) -> None:
    now = clock.now()
    shard = FakeShard(
        "shard-1", [stream_api_record(str(n), f"OUTBOX#{n}", now) for n in range(1, 5)]
    )
    arn = f"arn:aws:dynamodb:{REGION}:123456789012:table/outbox/stream/label"
    handler = Recorder()
    mapping = StreamMapping(
        mapping_config(arn, batch_size=2),
        handler,
        streams_client=FakeStreams([shard]),
        clock=clock,
    )
    mapping.poll()
    shard.trimmed = 3  # records 1-3 are gone; the checkpoint (after 2) points into them
    mapping.drain()
    assert handler.batches == [["1", "2"], ["4"]]
