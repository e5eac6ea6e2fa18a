"""The writer refuses exactly what the table's sink would refuse, by the sink's own rules.

Each rule is checked one byte (or one character) either side of its limit, for
the writer (refused before any call) and for the publisher's planning (poison),
so that the two can never disagree: an event the writer accepts is never
quarantined for its size or shape.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.outbox_item import outbox_item
from dynamodb_outbox.publishing import OutboxCandidate
from dynamodb_outbox.publishing._plan import _plan, _Poison, _Publish
from dynamodb_outbox.sinks import (
    PUT_EVENTS_MAX_REQUEST_BYTES,
    SNS_ATTRIBUTE_OVERHEAD_BYTES,
    SNS_MAX_REQUEST_BYTES,
    EventBridgeSink,
    OutboundEvent,
    SnsSink,
    rules_for,
)
from dynamodb_outbox.sizes import QUEUE_DELIVERY_BUDGET_BYTES
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from dynamodb_outbox.writer import EventTooLarge, InvalidWrite, OutboxWriter, UnpublishableEvent

TABLE = "outbox-table"
ORDER = {"PK": "ORDER#1", "SK": "META"}
TOPIC = "arn:aws:sns:eu-west-1:123456789012:orders"
FIFO_TOPIC = "arn:aws:sns:eu-west-1:123456789012:orders.fifo"


class RecordingClient:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return {}


def _sinks() -> dict[str, Any]:
    return {
        "eventbridge": EventBridgeSink(object(), "bus"),  # type: ignore[arg-type]
        "sns": SnsSink(object(), TOPIC),  # type: ignore[arg-type]
        "sns_fifo": SnsSink(object(), FIFO_TOPIC),  # type: ignore[arg-type]
    }


def _envelope(**fields: Any) -> Envelope:
    values: dict[str, Any] = {
        "type": "OrderPlaced",
        "source": "shop.orders",
        "subject": "ORDER#1",
        "data": {},
    }
    values.update(fields)
    return Envelope(**values)


def _of_size(publish_to: str, size: int, **fields: Any) -> Envelope:
    """An envelope whose entry size for ``publish_to`` is exactly ``size`` bytes."""
    rules = rules_for(publish_to)
    base = _envelope(data={"blob": ""}, **fields)
    missing = size - rules.entry_size(OutboundEvent.of(base))
    assert missing >= 0
    envelope = _envelope(data={"blob": "x" * missing}, id=base.id, time=base.time, **fields)
    assert rules.entry_size(OutboundEvent.of(envelope)) == size
    return envelope


def _writer_accepts(publish_to: str, envelope: Envelope) -> bool:
    client = RecordingClient()
    try:
        OutboxWriter(TABLE, client, publish_to=publish_to).write(ORDER, envelope)
    except InvalidWrite:
        assert client.calls == [], "a refused write must not reach DynamoDB"
        return False
    return True


def _publisher_publishes(publish_to: str, envelope: Envelope) -> bool:
    item = outbox_item("ORDER#1", envelope)
    candidate = OutboxCandidate(key={"PK": item["PK"], "SK": item["SK"]}, item=item, position=0)
    plan = _plan(candidate, _sinks()[publish_to], table_keys=DEFAULT_TABLE_KEYS)
    assert isinstance(plan, _Publish | _Poison)
    return isinstance(plan, _Publish)


def _of_delivery_size(publish_to: str, size: int) -> Envelope:
    """An envelope whose worst-case queue message for ``publish_to`` is exactly ``size`` bytes."""
    rules = rules_for(publish_to)
    base = _envelope(data={"blob": ""})
    missing = size - rules.delivery_size(OutboundEvent.of(base))
    assert missing >= 0
    envelope = _envelope(data={"blob": "x" * missing}, id=base.id, time=base.time)
    assert rules.delivery_size(OutboundEvent.of(envelope)) == size
    return envelope


@pytest.mark.parametrize("publish_to", ["eventbridge", "sns", "sns_fifo"])
@pytest.mark.parametrize("delta", [-1, 0, 1])
def test_size_limit_is_the_consumer_queues_to_the_byte(publish_to: str, delta: int) -> None:
    # The binding limit on every path: what a consumer queue and its DLQ can take
    # after the bus or topic wrapped the event (dynamodb_outbox.sizes).
    limit = rules_for(publish_to).max_delivery_bytes
    envelope = _of_delivery_size(publish_to, limit + delta)

    accepted = _writer_accepts(publish_to, envelope)

    assert accepted == (delta <= 0)
    assert _publisher_publishes(publish_to, envelope) == accepted


@pytest.mark.parametrize(
    ("publish_to", "limit"),
    [
        # PutEvents: "the total entry size must be less than 256KB".
        ("eventbridge", PUT_EVENTS_MAX_REQUEST_BYTES),
        # PublishBatch: 256 KiB "including each message's body and attributes".
        ("sns", SNS_MAX_REQUEST_BYTES),
        ("sns_fifo", SNS_MAX_REQUEST_BYTES),
    ],
)
def test_the_queue_bound_is_below_the_api_entry_bound(publish_to: str, limit: int) -> None:
    # So the API's own limit never refuses what the writer accepted: the event at
    # the queue bound is an entry under the API's limit.
    envelope = _of_delivery_size(publish_to, rules_for(publish_to).max_delivery_bytes)
    assert rules_for(publish_to).entry_size(OutboundEvent.of(envelope)) <= limit


def test_eventbridge_limit_is_one_byte_under_256_kib() -> None:
    assert PUT_EVENTS_MAX_REQUEST_BYTES == 262_143


def test_sns_counts_both_message_attributes() -> None:
    envelope = _envelope(type="T" * 10, source="S" * 20)
    body = envelope.to_json()
    size = rules_for("sns").entry_size(OutboundEvent.of(envelope))
    assert SNS_ATTRIBUTE_OVERHEAD_BYTES == 28
    assert size == len(body.encode()) + 28 + 10 + 20


def test_too_large_names_the_sink_the_limit_and_the_size() -> None:
    limit = QUEUE_DELIVERY_BUDGET_BYTES
    envelope = _of_delivery_size("sns", limit + 1)
    with pytest.raises(EventTooLarge, match=r"action 1 .* after PublishBatch") as caught:
        OutboxWriter(TABLE, RecordingClient(), publish_to="sns").write(ORDER, envelope)
    assert (caught.value.limit, caught.value.actual, caught.value.index) == (limit, limit + 1, 1)


# An event PutEvents would refuse as a whole request (ValidationException), or
# per entry: refused by the EventBridge writer, taken by the SNS one.
EVENTBRIDGE_ONLY = [
    ("detail type of 129 characters", {"type": "T" * 129}, "DetailType of at most 128"),
    ("detail type of 65 emoji (130 UTF-16 units)", {"type": "\U0001f4e6" * 65}, "at most 128"),
    ("source of 257 characters", {"source": "s" * 257}, "Source of at most 256"),
    ("source reserved for AWS", {"source": "aws.orders"}, "reserves"),
    ("source reserved for AWS, upper case", {"source": "AWS.orders"}, "reserves"),
    ("integer above int64", {"data": {"n": 2**63}}, "signed 64-bit"),
    ("integer below int64", {"data": {"n": [-(2**63) - 1]}}, "signed 64-bit"),
]


@pytest.mark.parametrize(
    ("fields", "why"), [e[1:] for e in EVENTBRIDGE_ONLY], ids=[e[0] for e in EVENTBRIDGE_ONLY]
)
def test_eventbridge_refuses_what_putevents_never_accepts(fields: dict[str, Any], why: str) -> None:
    envelope = _envelope(**fields)

    with pytest.raises(UnpublishableEvent, match=why) as caught:
        OutboxWriter(TABLE, RecordingClient()).write(ORDER, envelope)

    assert caught.value.index == 1
    assert not _publisher_publishes("eventbridge", envelope)
    assert _writer_accepts("sns", envelope)
    assert _publisher_publishes("sns", envelope)


@pytest.mark.parametrize(
    "fields",
    [
        {"type": "T" * 128},
        {"type": "\U0001f4e6" * 64},
        {"source": "s" * 256},
        {"source": "awsome.orders"},
        {"data": {"max": 2**63 - 1, "min": -(2**63), "float": 1e300}},
        {"data": {"digits": "12345678901234567890123"}},
    ],
    ids=["type-128", "type-64-emoji", "source-256", "aws-lookalike", "int64-bounds", "digit-text"],
)
def test_eventbridge_takes_everything_at_its_limits(fields: dict[str, Any]) -> None:
    envelope = _envelope(**fields)
    assert _writer_accepts("eventbridge", envelope)
    assert _publisher_publishes("eventbridge", envelope)


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"type": "Order\x01Placed"}, "U\\+0001"),
        ({"source": "shop\x1forders"}, "U\\+001F"),
    ],
)
def test_sns_refuses_attribute_values_sqs_cannot_carry(fields: dict[str, Any], why: str) -> None:
    envelope = _envelope(**fields)
    with pytest.raises(UnpublishableEvent, match=why):
        OutboxWriter(TABLE, RecordingClient(), publish_to="sns").write(ORDER, envelope)
    assert not _publisher_publishes("sns", envelope)
    assert _writer_accepts("eventbridge", envelope)  # the bus escapes them in its JSON


def test_sns_fifo_refuses_a_subject_that_is_no_message_group_id() -> None:
    envelope = _envelope(subject="ORDER 1")
    with pytest.raises(UnpublishableEvent, match="MessageGroupId"):
        OutboxWriter(TABLE, RecordingClient(), publish_to="sns_fifo").write(ORDER, envelope)
    assert _writer_accepts("sns", envelope)


def test_unknown_publish_to_is_refused_with_the_choices() -> None:
    with pytest.raises(InvalidWrite, match=r"eventbridge, sns, sns_fifo.*'kafka'"):
        OutboxWriter(TABLE, RecordingClient(), publish_to="kafka")


def test_the_committed_body_is_the_envelope_json_the_rules_measured() -> None:
    client = RecordingClient()
    envelope = _envelope(data={"city": "Zürich"})
    OutboxWriter(TABLE, client).write(ORDER, envelope)
    (_, put) = client.calls[0]["TransactItems"]
    assert json.loads(put["Put"]["Item"]["envelope"]["S"]) == envelope.to_dict()
    assert put["Put"]["Item"]["envelope"]["S"] == envelope.to_json()
