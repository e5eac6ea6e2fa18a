"""Values an application hands the package: Decimal in built records, datetime and
UUID in entities (stored as event data stores them), the exceptions it catches."""

from __future__ import annotations

import inspect
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from uuid import UUID

import pytest

import dynamodb_outbox
from dynamodb_outbox.consumer import parse_body
from dynamodb_outbox.local.records import consumer_event
from dynamodb_outbox.payload_json import to_json_value
from dynamodb_outbox.writer import InvalidWrite
from dynamodb_outbox.writer import _errors as writer_errors
from dynamodb_outbox.writer._attribute_values import serialize_item
from tests.factories import make_envelope

WHEN = datetime(2024, 5, 1, 12, 30, tzinfo=timezone(timedelta(hours=2)))
ORDER_UUID = UUID("6f1c1c3e-58e4-4b39-9d3c-1f2a5e0b7a10")


def test_a_built_eventbridge_record_keeps_decimal_data_exact() -> None:
    envelope = make_envelope(data={"order_id": "1", "total": Decimal("19.90")})

    body = consumer_event([envelope])["Records"][0]["body"]

    assert '"total":19.90' in body
    assert parse_body(body, parse_float=Decimal).data == {
        "order_id": "1",
        "total": Decimal("19.90"),
    }
    assert parse_body(body).id == envelope.id


@pytest.mark.parametrize(
    "value",
    [WHEN, WHEN.astimezone(UTC), date(2024, 5, 1), ORDER_UUID],
    ids=["datetime+02:00", "datetime-utc", "date", "uuid"],
)
def test_an_entity_stores_datetime_date_and_uuid_as_event_data_writes_them(value: object) -> None:
    stored = serialize_item({"value": value, "nested": {"in": [value]}})

    as_in_events = to_json_value(value)
    assert stored["value"] == {"S": as_in_events}
    assert stored["nested"] == {"M": {"in": {"L": [{"S": as_in_events}]}}}


def test_a_naive_datetime_in_an_entity_is_refused_with_what_to_do() -> None:
    with pytest.raises(InvalidWrite, match=r"order\.placed_at is a naive datetime.*time zone"):
        serialize_item({"order": {"placed_at": datetime(2024, 5, 1)}})


def test_an_unstorable_value_is_refused_with_what_to_convert_it_to() -> None:
    with pytest.raises(
        InvalidWrite, match=r"attribute 'price'.*convert it first to str, int, Decimal"
    ):
        serialize_item({"price": complex(1, 2)})


def test_every_exception_the_writer_raises_is_importable_from_the_package() -> None:
    errors = {
        name
        for name in writer_errors.__all__
        if inspect.isclass(getattr(writer_errors, name))
        and issubclass(getattr(writer_errors, name), Exception)
    }
    assert errors <= set(dynamodb_outbox.__all__)
    for name in errors:
        assert getattr(dynamodb_outbox, name) is getattr(writer_errors, name)


def test_the_python_doc_draws_the_writers_exception_tree_as_the_module_does() -> None:
    from pathlib import Path

    doc = Path(__file__).resolve().parents[2] / "docs" / "python.md"
    drawn = doc.read_text(encoding="utf-8").split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    docstring = (writer_errors.__doc__ or "").splitlines()
    start = next(
        i for i, line in enumerate(docstring) if line.strip().startswith("OutboxWriteError")
    )
    assert drawn == [line.removeprefix("    ") for line in docstring[start : start + len(drawn)]]
    assert docstring[start + len(drawn)].strip() == ""  # the whole tree
