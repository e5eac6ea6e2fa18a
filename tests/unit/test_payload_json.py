"""The data rule (dynamodb_outbox.payload_json): what DynamoDB and Python hand a
producer is encoded by one documented rule, and what has no faithful JSON form is
refused with the path of the value."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest

from dynamodb_outbox.consumer import parse_body
from dynamodb_outbox.envelope import Envelope, InvalidEnvelope
from dynamodb_outbox.payload_json import PayloadNotEncodable, dumps, to_json_value
from dynamodb_outbox.sinks import EventBridgeRules, OutboundEvent
from dynamodb_outbox.writer import InvalidWrite, OutboxWriter, UnpublishableEvent
from tests.factories import make_envelope

# A money value a float cannot hold: float(...) is 12345678901234568.0.
BIG_MONEY = Decimal("12345678901234567.89")


def envelope_of(data: dict[str, Any]) -> Envelope:
    return make_envelope(data=data)


def test_decimal_is_written_with_its_exact_digits() -> None:
    text = envelope_of({"total": Decimal("19.90"), "big": BIG_MONEY, "n": Decimal("-0.000001")})
    data_text = text.to_json()
    assert '"total":19.90' in data_text
    assert '"big":12345678901234567.89' in data_text
    assert '"n":-0.000001' in data_text


def test_decimal_round_trips_exactly_when_read_with_parse_float_decimal() -> None:
    sent = envelope_of({"total": BIG_MONEY, "lines": [{"price": Decimal("0.10")}] * 3})

    received = Envelope.from_json(sent.to_json(), parse_float=Decimal)

    assert received.data["total"] == BIG_MONEY
    assert sum(line["price"] for line in received.data["lines"]) == Decimal("0.30")
    assert received.to_json() == sent.to_json()


def test_reading_with_floats_is_the_default_and_loses_what_floats_cannot_hold() -> None:
    # Documented: a consumer that wants exact money passes parse_float=Decimal.
    received = Envelope.from_json(envelope_of({"total": BIG_MONEY}).to_json())
    assert received.data["total"] == float(BIG_MONEY) != BIG_MONEY


def test_datetime_date_and_uuid_are_written_as_iso_8601_and_strings() -> None:
    paris = timezone(timedelta(hours=2))
    data = {
        "at": datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=paris),
        "utc": datetime(2024, 5, 1, 10, 0, tzinfo=UTC),
        "day": date(2024, 5, 1),
        "id": UUID("12345678-1234-5678-1234-567812345678"),
        "pair": (1, "a"),
    }

    written = json.loads(envelope_of(data).to_json())["data"]

    assert written == {
        "at": "2024-05-01T12:00:00.123000+02:00",
        "utc": "2024-05-01T10:00:00+00:00",
        "day": "2024-05-01",
        "id": "12345678-1234-5678-1234-567812345678",
        "pair": [1, "a"],
    }
    assert datetime.fromisoformat(written["at"]) == data["at"]


def test_naive_datetime_is_refused_naming_its_path() -> None:
    with pytest.raises(InvalidEnvelope, match=r"data\.order\.placed_at is a naive datetime"):
        envelope_of({"order": {"placed_at": datetime(2024, 5, 1, 12, 0)}})


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (float("nan"), "JSON cannot represent"),
        (float("inf"), "JSON cannot represent"),
        (Decimal("NaN"), "JSON cannot represent"),
        (Decimal("-Infinity"), "JSON cannot represent"),
        (Decimal("1E+400"), "beyond a float's range"),
        (b"\x00\x01", "bytes, which has no JSON form"),
        ({1, 2}, "set, which has no JSON form"),
        (object(), "object, which has no JSON form"),
    ],
)
def test_values_without_a_faithful_json_form_are_refused(value: Any, reason: str) -> None:
    with pytest.raises(InvalidEnvelope, match=rf"data\.items\[1\].*{reason}"):
        envelope_of({"items": [1, value]})


def test_a_callers_default_converts_what_the_rule_refuses() -> None:
    writer = OutboxWriter("orders", source="shop.orders")

    event = writer.new_event(
        "ORDER#1", "OrderCreated", {"blob": b"\x00\xff", "tags": {"b"}}, default=_hex_or_list
    )

    assert event.data == {"blob": "00ff", "tags": ["b"]}


def test_a_default_that_refuses_names_the_value() -> None:
    writer = OutboxWriter("orders", source="shop.orders")
    with pytest.raises(InvalidWrite, match=r"data\.blob is a bytes that default= refused"):
        writer.new_event("ORDER#1", "T", {"blob": b"x"}, default=_refuse)


def test_a_default_returning_the_same_type_is_refused_instead_of_looping() -> None:
    with pytest.raises(PayloadNotEncodable, match="returned a bytes for a bytes"):
        to_json_value({"blob": b"x"}, default=lambda value: value)


def test_non_string_keys_become_strings_as_json_makes_them() -> None:
    assert to_json_value({2: "a", None: "b", True: "c", 1.5: "d"}) == {
        "2": "a",
        "null": "b",
        "true": "c",
        "1.5": "d",
    }


def test_the_copy_shares_nothing_mutable_with_the_callers_data() -> None:
    lines = [{"price": Decimal("1.00")}]
    copy = to_json_value({"lines": lines})
    lines[0]["price"] = Decimal("2.00")
    assert copy == {"lines": [{"price": Decimal("1.00")}]}


@pytest.mark.parametrize(
    "data",
    [
        {"a": [1, 2.5, None, True, 'é\n"', {"b": Decimal("1E+3")}], "c": Decimal("-0")},
        {"x": [Decimal("123.4500"), Decimal("7")], "s": "\u2028"},
    ],
)
def test_the_exact_encoder_writes_the_same_json_as_the_standard_one_but_exact(
    data: dict[str, Any],
) -> None:
    text = dumps(data)
    assert json.loads(text, parse_float=Decimal) == data
    as_floats = json.loads(json.dumps(data, default=float, ensure_ascii=False))
    assert json.loads(text) == as_floats


def test_an_integer_decimal_beyond_64_bits_is_refused_for_eventbridge_as_the_publisher_does() -> (
    None
):
    # Decimal("1" * 20) is written as an integer token: PutEvents refuses it, so the
    # writer must too, or the publisher could only quarantine it.
    envelope = envelope_of({"n": Decimal("1" * 20)})
    read_back = Envelope.from_json(envelope.to_json())  # what the publisher parses
    rules = EventBridgeRules()
    assert rules.refusal(OutboundEvent.of(read_back)) is not None
    assert rules.refusal(OutboundEvent.of(envelope)) is not None
    writer = OutboxWriter("orders", source="shop.orders")
    with pytest.raises(UnpublishableEvent, match="outside the signed 64-bit range"):
        writer.write(
            {"PK": "ORDER#1", "SK": "META"},
            writer.new_event("ORDER#1", "T", {"n": envelope.data["n"]}),
        )


def test_a_consumer_reading_eventbridge_and_sns_bodies_gets_exact_decimals() -> None:
    sent = envelope_of({"total": BIG_MONEY})
    eventbridge = json.dumps({"detail-type": sent.type, "source": sent.source, "detail": 0})
    eventbridge = eventbridge.replace("0}", sent.to_json() + "}")
    for body in (sent.to_json(), eventbridge):
        assert parse_body(body, parse_float=Decimal).data["total"] == BIG_MONEY
        assert parse_body(body).data["total"] == float(BIG_MONEY)


def _hex_or_list(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, set):
        return sorted(value)
    raise TypeError(f"cannot encode {type(value).__name__}")


def _refuse(value: Any) -> Any:
    raise TypeError("no thanks")
