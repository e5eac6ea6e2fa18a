"""SqsMapping: batching, deletes per response, virtual visibility timeouts, redrive, FIFO."""

from __future__ import annotations

import json
from typing import Any

import pytest
from runtime_helpers import REGION, Queue, Recorder, failures, make_queue

from dynamodb_outbox.local import (
    DrainLimitReached,
    MappingConfigError,
    SqsMapping,
    VirtualClock,
    mapping_config,
)


def sqs_mapping(
    queue: Queue, handler: Any, sqs: Any, clock: VirtualClock, **settings: Any
) -> SqsMapping:
    return SqsMapping(mapping_config(queue.arn, **settings), handler, sqs_client=sqs, clock=clock)


@pytest.fixture
def dlq(sqs: Any) -> Queue:
    return make_queue(sqs, "consumer-dlq")


@pytest.fixture
def queue(sqs: Any, dlq: Queue) -> Queue:
    return make_queue(
        sqs,
        "consumer",
        VisibilityTimeout=30,
        RedrivePolicy={"deadLetterTargetArn": dlq.arn, "maxReceiveCount": 3},
    )


@pytest.fixture
def fifo(sqs: Any) -> Queue:
    return make_queue(
        sqs,
        "consumer.fifo",
        FifoQueue="true",
        ContentBasedDeduplication="true",
        VisibilityTimeout=30,
    )


def fail_bodies(*bodies: str) -> Any:
    """A partial batch response reporting the messages with these bodies."""

    def respond(event: dict[str, Any]) -> Any:
        return failures(*(r["messageId"] for r in event["Records"] if r["body"] in bodies))

    return respond


def bodies_of(handler: Recorder) -> list[list[str]]:
    return [[r["body"] for r in e["Records"]] for e in handler.events]


# ---------------------------------------------------------------- batching


def test_batch_size_caps_the_messages_of_each_invocation(
    queue: Queue, sqs: Any, clock: VirtualClock
) -> None:
    for n in range(10):
        queue.send(f"m{n}")
    handler = Recorder()
    sqs_mapping(queue, handler, sqs, clock, batch_size=4).drain()
    assert [len(batch) for batch in bodies_of(handler)] == [4, 4, 2]
    assert queue.depth() == 0


def test_batching_window_holds_a_partial_batch_until_the_virtual_clock_passes_it(
    queue: Queue, sqs: Any, clock: VirtualClock
) -> None:
    queue.send("first")
    handler = Recorder()
    mapping = sqs_mapping(
        queue, handler, sqs, clock, batch_size=50, maximum_batching_window_seconds=5
    )
    assert mapping.poll().invocations == []
    clock.advance(4)
    queue.send("second")
    assert mapping.poll().invocations == []
    clock.advance(1)
    assert len(mapping.poll().invocations) == 1
    assert bodies_of(handler) == [["first", "second"]]


def test_the_next_window_begins_when_the_previous_invocation_completes(
    queue: Queue, sqs: Any, clock: VirtualClock
) -> None:
    """AWS: "the next batching window begins as soon as the previous function
    invocation completes", so a message arriving after it ran out goes at once."""
    queue.send("first")
    handler = Recorder()
    mapping = sqs_mapping(
        queue, handler, sqs, clock, batch_size=50, maximum_batching_window_seconds=5
    )
    mapping.drain()
    clock.advance(100)
    queue.send("later")
    assert len(mapping.poll().invocations) == 1
    assert bodies_of(handler) == [["first"], ["later"]]


def test_more_than_ten_messages_per_batch_needs_a_batching_window(
    queue: Queue, sqs: Any, clock: VirtualClock
) -> None:
    with pytest.raises(MappingConfigError, match="MaximumBatchingWindowInSeconds"):
        sqs_mapping(queue, Recorder(), sqs, clock, batch_size=11)


def test_a_function_timeout_beyond_the_visibility_timeout_is_refused(
    queue: Queue, sqs: Any, clock: VirtualClock
) -> None:
    with pytest.raises(MappingConfigError, match="visibility timeout"):
        SqsMapping(
            mapping_config(queue.arn),
            Recorder(),
            sqs_client=sqs,
            clock=clock,
            function_timeout_seconds=31,
        )


# ---------------------------------------------------------------- event shape


def test_records_have_the_lambda_sqs_event_shape(
    queue: Queue, sqs: Any, clock: VirtualClock
) -> None:
    message_id = queue.send(
        '{"id": "01J"}',
        MessageAttributes={
            "trace": {"DataType": "String", "StringValue": "abc"},
            "raw": {"DataType": "Binary", "BinaryValue": b"\x01"},
        },
    )
    handler = Recorder()
    sqs_mapping(queue, handler, sqs, clock).drain()
    [record] = handler.events[0]["Records"]
    assert record["messageId"] == message_id
    assert record["body"] == '{"id": "01J"}'
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"] == queue.arn
    assert record["awsRegion"] == REGION
    assert record["receiptHandle"] and record["md5OfBody"]
    attributes = record["attributes"]
    assert attributes["ApproximateReceiveCount"] == "1"
    assert {"SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"} <= set(attributes)
    assert record["messageAttributes"]["trace"] == {
        "stringValue": "abc",
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": "String",
    }
    assert record["messageAttributes"]["raw"]["binaryValue"] == "AQ=="


def test_fifo_records_carry_their_message_group(fifo: Queue, sqs: Any, clock: VirtualClock) -> None:
    fifo.send("a1", MessageGroupId="A")
    handler = Recorder()
    sqs_mapping(fifo, handler, sqs, clock).drain()
    attributes = handler.events[0]["Records"][0]["attributes"]
    assert attributes["MessageGroupId"] == "A"
    # (AWS also sends "SequenceNumber"; moto 5.2.5 does not return it.)
    assert "MessageDeduplicationId" in attributes


# ---------------------------------------------------------------- deletes per response


def test_a_successful_batch_is_deleted(queue: Queue, sqs: Any, clock: VirtualClock) -> None:
    for n in range(3):
        queue.send(f"m{n}")
    mapping = sqs_mapping(queue, Recorder(), sqs, clock, report_batch_item_failures=True)
    mapping.poll()
    assert mapping.stats.messages_deleted == 3
    assert queue.depth() == 0


def test_a_partial_failure_deletes_only_the_messages_not_reported(
    queue: Queue, sqs: Any, clock: VirtualClock
) -> None:
    for body in ("ok-1", "bad", "ok-2"):
        queue.send(body)
    handler = Recorder(respond=fail_bodies("bad"))
    mapping = sqs_mapping(queue, handler, sqs, clock, report_batch_item_failures=True)
    mapping.poll()
    assert mapping.invocations[0].outcome == "partial"
    assert queue.depth() == 1
    clock.advance(30)
    handler.respond = None
    mapping.poll()
    assert bodies_of(handler) == [["ok-1", "bad", "ok-2"], ["bad"]]
    assert queue.depth() == 0


@pytest.mark.parametrize(
    "response",
    [
        {"batchItemFailures": [{"itemIdentifier": ""}]},
        {"batchItemFailures": [{"itemIdentifier": None}]},
        {"batchItemFailures": [{"ItemIdentifier": "x"}]},
        {"batchItemFailures": [{"messageId": "x"}]},
        {"batchItemFailures": [{"itemIdentifier": "not-in-the-batch"}]},
        {"batchItemFailures": ["x"]},
    ],
    ids=["empty", "null", "ItemIdentifier", "messageId", "unknown-id", "not-an-object"],
)
def test_a_malformed_response_keeps_every_message_of_the_batch(
    response: Any, queue: Queue, sqs: Any, clock: VirtualClock
) -> None:
    for n in range(3):
        queue.send(f"m{n}")
    mapping = sqs_mapping(
        queue, Recorder(respond=response), sqs, clock, report_batch_item_failures=True
    )
    mapping.poll()
    assert mapping.invocations[0].outcome == "failure"
    assert mapping.stats.messages_deleted == 0
    assert queue.depth() == 3


def test_an_exception_keeps_every_message_of_the_batch(
    queue: Queue, sqs: Any, clock: VirtualClock
) -> None:
    for n in range(3):
        queue.send(f"m{n}")

    def raising(event: dict[str, Any], context: Any) -> None:
        raise RuntimeError("downstream unavailable")

    mapping = sqs_mapping(queue, raising, sqs, clock, report_batch_item_failures=True)
    mapping.poll()
    assert mapping.stats.messages_deleted == 0
    assert queue.depth() == 3


def test_without_report_batch_item_failures_a_returned_failure_list_is_ignored(
    queue: Queue, sqs: Any, clock: VirtualClock
) -> None:
    queue.send("bad")
    mapping = sqs_mapping(queue, Recorder(respond=fail_bodies("bad")), sqs, clock)
    mapping.poll()
    assert queue.depth() == 0


# ---------------------------------------------------------------- visibility and redrive


def test_a_failed_message_stays_invisible_until_its_virtual_visibility_timeout_ends(
    queue: Queue, sqs: Any, clock: VirtualClock
) -> None:
    queue.send("flaky")
    handler = Recorder(respond=fail_bodies("flaky"))
    mapping = sqs_mapping(queue, handler, sqs, clock, report_batch_item_failures=True)
    mapping.poll()
    # WHEN polled before the 30 s visibility timeout has passed on the virtual clock
    clock.advance(29.9)
    waiting = mapping.poll()
    # THEN nothing comes back, and the poll says when it will
    assert waiting.invocations == []
    assert waiting.next_ready_at == pytest.approx(clock.now() + 0.1)
    # WHEN the timeout has passed
    clock.advance(0.1)
    mapping.poll()
    # THEN the message is received again
    assert len(handler.events) == 2
    assert handler.events[1]["Records"][0]["attributes"]["ApproximateReceiveCount"] == "2"


def test_redrive_moves_a_message_to_the_dlq_after_max_receive_count_receives(
    queue: Queue, dlq: Queue, sqs: Any, clock: VirtualClock
) -> None:
    queue.send("poison")
    queue.send("fine")
    handler = Recorder(respond=fail_bodies("poison"))
    mapping = sqs_mapping(queue, handler, sqs, clock, report_batch_item_failures=True)
    started = clock.now()
    # WHEN drained (the clock jumps from one visibility deadline to the next)
    mapping.drain()
    # THEN the poison message was received maxReceiveCount (3) times, then redriven
    assert [b for b in bodies_of(handler)] == [["poison", "fine"], ["poison"], ["poison"]]
    assert clock.now() == pytest.approx(started + 2 * 30)
    assert dlq.bodies() == ["poison"]
    assert queue.depth() == 0


def test_without_a_redrive_policy_a_poison_message_loops_until_drain_stops(
    sqs: Any, clock: VirtualClock
) -> None:
    plain = make_queue(sqs, "no-dlq", VisibilityTimeout=30)
    plain.send("poison")
    mapping = sqs_mapping(plain, Recorder(respond=lambda e: 1 / 0), sqs, clock)
    with pytest.raises(DrainLimitReached):
        mapping.drain(max_invocations=10)
    assert plain.depth() == 1


# ---------------------------------------------------------------- FIFO


def test_a_fifo_group_is_blocked_while_one_of_its_messages_is_in_flight(
    fifo: Queue, sqs: Any, clock: VirtualClock
) -> None:
    # GIVEN group A (a1, a2) and group B (b1); the handler fails a1, and so, keeping
    # the group's order, reports a1 and every message of A after it
    fifo.send("a1", MessageGroupId="A")
    fifo.send("a2", MessageGroupId="A")
    fifo.send("b1", MessageGroupId="B")

    def respond(event: dict[str, Any]) -> Any:
        if len(handler.events) > 1:
            return None
        return failures(*(r["messageId"] for r in event["Records"] if r["body"] in ("a1", "a2")))

    handler = Recorder(respond=respond)
    mapping = sqs_mapping(fifo, handler, sqs, clock, report_batch_item_failures=True)
    mapping.poll()
    assert bodies_of(handler) == [["a1", "a2", "b1"]]
    # WHEN new messages arrive in both groups before the visibility timeout ends
    fifo.send("a3", MessageGroupId="A")
    fifo.send("b2", MessageGroupId="B")
    clock.advance(10)
    mapping.poll()
    # THEN only group B moves: group A waits for its in-flight messages
    assert bodies_of(handler)[1] == ["b2"]
    assert mapping.poll().invocations == []
    # WHEN the visibility timeout ends
    clock.advance(20)
    mapping.poll()
    # THEN group A resumes, in order
    assert bodies_of(handler)[2] == ["a1", "a2", "a3"]
    assert fifo.depth() == 0


def test_a_fifo_mapping_takes_at_most_ten_messages_and_no_window(
    fifo: Queue, sqs: Any, clock: VirtualClock
) -> None:
    with pytest.raises(MappingConfigError, match="FIFO"):
        sqs_mapping(fifo, Recorder(), sqs, clock, batch_size=20, maximum_batching_window_seconds=1)
    with pytest.raises(MappingConfigError, match="FIFO"):
        sqs_mapping(fifo, Recorder(), sqs, clock, maximum_batching_window_seconds=1)


# ---------------------------------------------------------------- filters


def test_messages_matching_no_filter_are_deleted_without_reaching_the_handler(
    queue: Queue, sqs: Any, clock: VirtualClock
) -> None:
    queue.send(json.dumps({"type": "OrderPlaced"}))
    queue.send(json.dumps({"type": "OrderCancelled"}))
    queue.send("not json")
    handler = Recorder()
    mapping = sqs_mapping(
        queue, handler, sqs, clock, filter_patterns=[{"body": {"type": ["OrderPlaced"]}}]
    )
    mapping.drain()
    assert bodies_of(handler) == [[json.dumps({"type": "OrderPlaced"})]]
    assert mapping.stats.messages_filtered == 2
    assert queue.depth() == 0
