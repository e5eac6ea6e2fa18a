"""The per-subject ``sequence``: CloudEvents' sequence extension, from writer to consumer.

Written by the producer with the aggregate's version, in the same transaction
as the entity; stored in the envelope and, for the sweeper, on the outbox item.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from cloudevents.core.formats.json import JSONFormat

from dynamodb_outbox.consumer import parse_body
from dynamodb_outbox.envelope import MAX_SEQUENCE, Envelope, InvalidEnvelope
from dynamodb_outbox.local.records import sns_raw_body
from dynamodb_outbox.outbox_item import ATTR_SEQUENCE, ATTR_SUBJECT, outbox_item
from dynamodb_outbox.writer import InvalidWrite, OutboxWriter
from tests.factories import make_envelope

ORDER = {"PK": "ORDER#1", "SK": "META", "version": 2}


class RecordingClient:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return {}


def test_the_sequence_travels_as_19_digits_so_text_order_is_number_order() -> None:
    envelope = make_envelope(sequence=42)

    text = envelope.to_json()

    assert json.loads(text)["sequence"] == "0000000000000000042"
    assert Envelope.from_json(text).sequence == 42
    assert f"{9:019d}" < f"{10:019d}"
    # AND any CloudEvents reader sees it as the extension attribute
    assert JSONFormat().read(None, text).get_extension("sequence") == "0000000000000000042"


def test_an_event_without_a_sequence_carries_no_sequence_attribute() -> None:
    envelope = make_envelope()

    assert "sequence" not in json.loads(envelope.to_json())
    assert ATTR_SEQUENCE not in outbox_item("ORDER#1", envelope)


@pytest.mark.parametrize("bad", [0, -1, MAX_SEQUENCE + 1, True, 1.5, "3"])
def test_a_sequence_that_is_not_a_positive_64_bit_integer_is_refused(bad: Any) -> None:
    with pytest.raises(InvalidEnvelope, match="'sequence' must be an integer from 1 to"):
        make_envelope(sequence=bad)


@pytest.mark.parametrize("text", ["", "12a", "-1", "1" * 20, "\u0661", 7])
def test_a_received_sequence_that_is_not_a_digit_string_is_refused(text: Any) -> None:
    body = json.loads(make_envelope().to_json()) | {"sequence": text}

    with pytest.raises(InvalidEnvelope, match="'sequence'"):
        Envelope.from_dict(body)


def test_the_writer_puts_the_sequence_in_the_envelope_and_on_the_outbox_item() -> None:
    client = RecordingClient()
    writer = OutboxWriter("orders", client, source="shop.orders")  # type: ignore[arg-type]
    paid = writer.new_event(ORDER, "OrderPaid", {"total": 1}, sequence=ORDER["version"])

    writer.write(ORDER, paid)

    item = client.calls[0]["TransactItems"][1]["Put"]["Item"]
    assert item[ATTR_SEQUENCE] == {"N": "2"}
    assert item[ATTR_SUBJECT] == {"S": "ORDER#1"}
    assert Envelope.from_json(item["envelope"]["S"]).sequence == 2
    # AND a consumer reads it back
    assert parse_body(sns_raw_body(paid)).sequence == 2


def test_two_events_of_one_subject_with_one_sequence_are_refused_before_any_call() -> None:
    client = RecordingClient()
    writer = OutboxWriter("orders", client, source="shop.orders")  # type: ignore[arg-type]
    first = writer.new_event(ORDER, "OrderPaid", {}, sequence=3)
    second = writer.new_event(ORDER, "OrderShipped", {}, sequence=3)

    with pytest.raises(InvalidWrite, match=r"events #0 and #1 of subject ORDER#1 both carry"):
        writer.write(ORDER, [first, second])
    assert client.calls == []


def test_a_sequenced_event_whose_subject_is_not_its_partition_key_is_refused() -> None:
    # The publishers find a subject's pending sequences in one partition: a subject
    # written under two partition keys could not be kept in order
    client = RecordingClient()
    writer = OutboxWriter("orders", client, source="shop.orders")  # type: ignore[arg-type]
    first = writer.new_event(ORDER, "OrderPaid", {}, sequence=3)
    audit = writer.new_event(ORDER, "Audit", {}, subject="AUDIT#1", sequence=3)

    with pytest.raises(
        InvalidWrite,
        match=r"event #1 carries sequence 3 but its subject AUDIT#1 is not the PK it is "
        r"written under \(ORDER#1\)",
    ):
        writer.write(ORDER, [first, audit])
    with pytest.raises(InvalidWrite, match=r"subject ORDER#1 is not the PK .* \(ORDER#2\)"):
        writer.write_events("ORDER#2", first)
    assert client.calls == []
    # Without a sequence, any subject is fine (its order is best effort)
    writer.write(ORDER, [first, writer.new_event(ORDER, "Audit", {}, subject="AUDIT#1")])
    assert len(client.calls) == 1
