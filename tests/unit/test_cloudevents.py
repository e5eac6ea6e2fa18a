"""Written events are CloudEvents 1.0 in the JSON event format, by the CloudEvents SDK's reading.

The SDK (``cloudevents``, a test-only dependency) checks the required
attributes, ``specversion``, RFC 3339 times and extension names; these tests
read what the writer commits (the outbox item's stored envelope, the bytes the
publisher sends) and what a consumer queue receives.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from cloudevents.core.base import BaseCloudEvent
from cloudevents.core.formats.json import JSONFormat

from dynamodb_outbox.consumer import parse_body
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.local.records import eventbridge_body, sns_raw_body
from dynamodb_outbox.outbox_item import ATTR_ENVELOPE
from dynamodb_outbox.writer import OutboxWriter

TRACEPARENT = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"


class RecordingClient:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return {}


def committed_envelopes(client: RecordingClient) -> list[str]:
    """The stored envelope of every outbox item the writer put."""
    return [
        action["Put"]["Item"][ATTR_ENVELOPE]["S"]
        for call in client.calls
        for action in call["TransactItems"]
        if ATTR_ENVELOPE in action.get("Put", {}).get("Item", {})
    ]


def read_cloudevent(text: str) -> BaseCloudEvent:
    return JSONFormat().read(None, text)


@pytest.fixture
def writer_and_client(monkeypatch: pytest.MonkeyPatch) -> tuple[OutboxWriter, RecordingClient]:
    monkeypatch.delenv("_X_AMZN_TRACE_ID", raising=False)
    client = RecordingClient()
    return OutboxWriter("orders", client, source="shop.orders"), client  # type: ignore[arg-type]


def test_a_written_event_with_every_attribute_is_a_valid_cloudevent(
    writer_and_client: tuple[OutboxWriter, RecordingClient],
) -> None:
    # GIVEN an event with data, a schema, a correlation id and a trace
    writer, client = writer_and_client
    order = {"PK": "ORDER#1001", "SK": "META", "status": "NEW"}
    event = writer.new_event(
        order,
        "OrderCreated",
        {
            "order_id": "1001",
            "total": Decimal("42.50"),
            "placed_at": datetime(2026, 1, 2, tzinfo=UTC),
        },
        correlation_id="req-42",
        traceparent=TRACEPARENT,
        tracestate="vendor=1",
        dataschema="https://schemas.example.com/orders/order-created-1.json",
    )

    # WHEN it is written and its stored envelope is read by the CloudEvents SDK
    writer.write(order, event)
    (stored,) = committed_envelopes(client)
    cloudevent = read_cloudevent(stored)

    # THEN every attribute is where CloudEvents 1.0 puts it
    assert cloudevent.get_specversion() == "1.0"
    assert cloudevent.get_id() == event.id
    assert cloudevent.get_source() == "shop.orders"
    assert cloudevent.get_type() == "OrderCreated"
    assert cloudevent.get_subject() == "ORDER#1001"
    assert cloudevent.get_time() == event.utc_time
    assert cloudevent.get_datacontenttype() == "application/json"
    assert cloudevent.get_dataschema() == "https://schemas.example.com/orders/order-created-1.json"
    assert cloudevent.get_data() == {
        "order_id": "1001",
        "total": 42.5,
        "placed_at": "2026-01-02T00:00:00+00:00",
    }
    # AND the correlation id and trace are extensions named as the spec requires
    assert cloudevent.get_extension("correlationid") == "req-42"
    assert cloudevent.get_extension("traceparent") == TRACEPARENT
    assert cloudevent.get_extension("tracestate") == "vendor=1"


def test_a_written_event_with_only_the_required_fields_is_a_valid_cloudevent(
    writer_and_client: tuple[OutboxWriter, RecordingClient],
) -> None:
    writer, client = writer_and_client
    writer.write_events("ORDER#7", writer.new_event("ORDER#7", "OrderPaid", {}))
    (stored,) = committed_envelopes(client)
    cloudevent = read_cloudevent(stored)
    assert (cloudevent.get_type(), cloudevent.get_subject(), cloudevent.get_data()) == (
        "OrderPaid",
        "ORDER#7",
        {},
    )
    assert not {"correlationid", "traceparent", "tracestate", "dataschema"} & set(
        json.loads(stored)
    )


def test_an_event_from_a_cloudevents_sdk_producer_reaches_the_consumer(
    writer_and_client: tuple[OutboxWriter, RecordingClient],
) -> None:
    # GIVEN an event another CloudEvents producer wrote with the SDK
    from cloudevents.core.v1.event import CloudEvent

    sdk_event = CloudEvent(
        {
            "id": "01ARZ3NDEKTSV4RRFFQ69G5FAV",
            "source": "shop.orders",
            "type": "OrderCreated",
            "subject": "ORDER#1",
            "time": datetime(2026, 12, 3, 14, 0, tzinfo=UTC),
            "datacontenttype": "application/json",
            "correlationid": "req-1",
        },
        {"order_id": "1"},
    )
    text = JSONFormat().write(sdk_event).decode()

    # WHEN a consumer reads it from an SNS raw delivery
    envelope = parse_body(text)

    # THEN the handler gets the data and the attributes
    assert envelope.data == {"order_id": "1"}
    assert envelope.correlation_id == "req-1"
    assert envelope.attributes["type"] == "OrderCreated"


@pytest.mark.parametrize("shape", [eventbridge_body, sns_raw_body], ids=["EventBridge", "SNS"])
def test_the_event_a_consumer_queue_receives_is_a_valid_cloudevent(
    writer_and_client: tuple[OutboxWriter, RecordingClient], shape: Any
) -> None:
    writer, _ = writer_and_client
    event = writer.new_event("ORDER#1", "OrderCreated", {"n": 1}, correlation_id="c")
    body = json.loads(shape(event))
    cloudevent = read_cloudevent(json.dumps(body.get("detail", body)))
    assert cloudevent.get_id() == event.id
    assert cloudevent.get_extension("correlationid") == "c"


def test_the_documented_example_event_is_an_envelope_and_a_cloudevent() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text(encoding="utf-8")
    section = doc.split("\n## The event\n", 1)[1].split("\n## ", 1)[0]
    (example,) = re.findall(r"```json\n(.*?)```", section, flags=re.DOTALL)
    envelope = Envelope.from_json(example)
    assert json.loads(envelope.to_json()) == json.loads(example)
    assert read_cloudevent(example).get_extension("traceparent") == envelope.traceparent
