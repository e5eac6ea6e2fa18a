"""The largest event the writer accepts reaches the consumer queue on every path.

For each path (EventBridge, EventBridge replay, SNS and SNS FIFO with raw and
non-raw delivery) the largest event the writer accepts is found by bisection
on the writer itself, so these tests hold whatever the writer's rule is:

* that event, published by the sink the publisher uses, arrives in a queue of
  the size the module creates (``max_message_size``), nothing dead-lettered,
  nothing dropped (moto with :func:`dynamodb_outbox.local.seams.aws_seams`,
  which delivers after the call and counts what SQS counts);
* one byte more is refused by the writer, and a hand-written item of that size
  is quarantined by the publisher, not sent to be lost;
* the message the queue received is no larger than the sink rules' worst case
  (``delivery_size``), so the rules bound what the emulator really delivers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.local.seams import SeamLedger, aws_seams
from dynamodb_outbox.outbox_item import outbox_item
from dynamodb_outbox.publishing import OutboxCandidate
from dynamodb_outbox.publishing._plan import _plan, _Poison
from dynamodb_outbox.sinks import EventBridgeSink, OutboundEvent, Sink, SnsSink, rules_for
from dynamodb_outbox.sizes import (
    QUEUE_MAX_MESSAGE_BYTES,
    REPLAY_NAME_MAX_LENGTH,
    sqs_message_bytes,
)
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from dynamodb_outbox.writer import EventTooLarge, OutboxWriter
from tests.factories import REGION

TABLE = "outbox-table"
ORDER = {"PK": "ORDER#1", "SK": "META"}
FIXED_ID = "01JD8Z6Q4X5N2M3K7R9T1V0W2Y"
FIXED_TIME = "2026-12-04T17:00:00Z"


@dataclass(frozen=True)
class Path:
    publish_to: str
    raw: bool = True
    replay: bool = False


PATHS = {
    "eventbridge": Path("eventbridge"),
    "eventbridge replay": Path("eventbridge", replay=True),
    "sns raw": Path("sns"),
    "sns non-raw": Path("sns", raw=False),
    "sns_fifo raw": Path("sns_fifo"),
    "sns_fifo non-raw": Path("sns_fifo", raw=False),
}


class _NoDynamoDB:
    def transact_write_items(self, **_kwargs: Any) -> dict[str, Any]:
        return {}


def _envelope(padding: int, filler: str = "x") -> Envelope:
    return Envelope(
        id=FIXED_ID,
        time=FIXED_TIME,
        type="OrderPlaced",
        source="shop.orders",
        subject="ORDER#1",
        data={"note": 'quoted "text" \\ and é', "blob": filler * padding},
    )


def _accepts(publish_to: str, envelope: Envelope) -> bool:
    try:
        OutboxWriter(TABLE, _NoDynamoDB(), publish_to=publish_to).write(ORDER, envelope)
    except EventTooLarge:
        return False
    return True


def _largest_accepted(publish_to: str) -> int:
    """The longest padding the writer accepts (it refuses the next one), by bisection."""
    low, high = 0, 2 * QUEUE_MAX_MESSAGE_BYTES
    assert _accepts(publish_to, _envelope(low)) and not _accepts(publish_to, _envelope(high))
    while high - low > 1:
        middle = (low + high) // 2
        if _accepts(publish_to, _envelope(middle)):
            low = middle
        else:
            high = middle
    return low


@pytest.fixture
def seams(aws: None) -> Iterator[SeamLedger]:
    with aws_seams() as ledger:
        yield ledger


def _queue(sqs: Any, name: str, *, fifo: bool, dlq_arn: str | None = None) -> tuple[str, str]:
    attributes = {"MaximumMessageSize": str(QUEUE_MAX_MESSAGE_BYTES)}
    if fifo:
        attributes |= {"FifoQueue": "true", "ContentBasedDeduplication": "false"}
        name += ".fifo"
    if dlq_arn is not None:
        attributes["RedrivePolicy"] = json.dumps(
            {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 5}
        )
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return url, arn


def _deliver(path: Path, envelope: Envelope) -> list[dict[str, Any]]:
    """Send ``envelope`` by the publisher's sink along ``path``; the consumer queue's messages."""
    sqs = boto3.client("sqs", region_name=REGION)
    fifo = path.publish_to == "sns_fifo"
    dlq_url, dlq_arn = _queue(sqs, "consumer-dlq", fifo=fifo)
    queue_url, queue_arn = _queue(sqs, "consumer", fifo=fifo, dlq_arn=dlq_arn)
    sink: Sink
    if path.publish_to == "eventbridge":
        events = boto3.client("events", region_name=REGION)
        bus_arn = events.create_event_bus(Name="orders")["EventBusArn"]
        events.put_rule(
            Name="consumer", EventBusName="orders", EventPattern='{"source":["shop.orders"]}'
        )
        events.put_targets(
            Rule="consumer",
            EventBusName="orders",
            Targets=[{"Id": "q", "Arn": queue_arn, "DeadLetterConfig": {"Arn": dlq_arn}}],
        )
        if path.replay:
            archive_arn = events.create_archive(ArchiveName="orders", EventSourceArn=bus_arn)[
                "ArchiveArn"
            ]
        sink = EventBridgeSink(events, "orders")
    else:
        sns = boto3.client("sns", region_name=REGION)
        attributes = {"FifoTopic": "true"} if fifo else {}
        topic_arn = sns.create_topic(
            Name="orders.fifo" if fifo else "orders", Attributes=attributes
        )["TopicArn"]
        sns.subscribe(
            TopicArn=topic_arn,
            Protocol="sqs",
            Endpoint=queue_arn,
            Attributes={
                "RawMessageDelivery": "true" if path.raw else "false",
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn}),
            },
        )
        sink = SnsSink(sns, topic_arn)
    results = sink.send([OutboundEvent.of(envelope)])
    assert [result.ok for result in results] == [True], results
    if path.replay:
        events.start_replay(
            ReplayName="r" * REPLAY_NAME_MAX_LENGTH,
            EventSourceArn=archive_arn,
            EventStartTime=datetime(2000, 1, 1, tzinfo=UTC),
            EventEndTime=datetime(2100, 1, 1, tzinfo=UTC),
            Destination={"Arn": bus_arn},
        )
    assert _receive(sqs, dlq_url) == [], "nothing may be dead-lettered"
    return _receive(sqs, queue_url)


def _receive(sqs: Any, url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while batch := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    ).get("Messages", []):
        messages.extend(batch)
    return messages


def _size(message: dict[str, Any]) -> int:
    attributes = {
        name: (value["DataType"], value.get("StringValue", ""))
        for name, value in message.get("MessageAttributes", {}).items()
    }
    return sqs_message_bytes(message["Body"], attributes)


@pytest.mark.parametrize("name", list(PATHS))
def test_largest_event_the_writer_accepts_reaches_the_queue_and_one_byte_more_is_refused(
    name: str, seams: SeamLedger
) -> None:
    path = PATHS[name]
    padding = _largest_accepted(path.publish_to)
    largest, one_more = _envelope(padding), _envelope(padding + 1)

    messages = _deliver(path, largest)

    assert len(messages) == (2 if path.replay else 1), "the event (and its replay) arrived"
    assert seams.dropped == [] and seams.dead_lettered == []
    worst = rules_for(path.publish_to).delivery_size(OutboundEvent.of(largest))
    assert all(_size(message) <= worst for message in messages), "the rules bound the message"
    if path.replay:
        replayed = [json.loads(m["Body"]) for m in messages if "replay-name" in m["Body"]]
        assert [event["replay-name"] for event in replayed] == ["r" * REPLAY_NAME_MAX_LENGTH]
    # One byte more: the writer refuses it, the publisher quarantines a hand-written one.
    assert not _accepts(path.publish_to, one_more)
    item = outbox_item("ORDER#1", one_more)
    candidate = OutboxCandidate(key={"PK": item["PK"], "SK": item["SK"]}, item=item, position=0)
    sink = (
        EventBridgeSink(object(), "orders")  # type: ignore[arg-type]
        if path.publish_to == "eventbridge"
        else SnsSink(
            object(),
            f"arn:aws:sns:{REGION}:123456789012:o{'.fifo' * (path.publish_to == 'sns_fifo')}",
        )  # type: ignore[arg-type]
    )
    poison = _plan(candidate, sink, table_keys=DEFAULT_TABLE_KEYS)
    assert isinstance(poison, _Poison), "a hand-written item one byte over is quarantined"
    assert "too large" in poison.reason


def test_non_ascii_data_counts_at_its_longest_escaped_form() -> None:
    """'é' is 2 bytes in UTF-8 and 6 as \\u00e9: the writer budgets the 6."""
    ascii_padding = _largest_accepted("eventbridge")
    accepted = 0
    low, high = 0, ascii_padding
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (
            (middle, high) if _accepts("eventbridge", _envelope(middle, "é")) else (low, middle)
        )
        accepted = low
    assert 6 * accepted <= ascii_padding < 6 * (accepted + 1)
