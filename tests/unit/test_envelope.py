"""The envelope and outbox item contract shared by writer, publisher, sweeper and consumers."""

from __future__ import annotations

import collections
import dataclasses
import json
import random
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from ulid import ULID

from dynamodb_outbox.envelope import Envelope, InvalidEnvelope
from dynamodb_outbox.outbox_item import (
    ATTR_ENVELOPE,
    ATTR_EVENT_TYPE,
    ATTR_PENDING_SHARD,
    ATTR_PK,
    ATTR_SK,
    ATTR_STATUS,
    OUTBOX_SK_PREFIX,
    STATUS_PENDING,
    outbox_item,
    outbox_sk,
    pending_shard,
)

EVENT_ID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"


TRACEPARENT = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"


def valid_dict(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "specversion": "1.0",
        "id": EVENT_ID,
        "type": "OrderPlaced",
        "source": "shop.orders",
        "time": "2024-05-01T12:00:00.000Z",
        "subject": "ORDER#1001",
        "datacontenttype": "application/json",
        "data": {"order_id": "1001", "total": 12.5, "lines": [{"sku": "A", "qty": 2}]},
    }
    data.update(overrides)
    return data


def without(field: str) -> dict[str, Any]:
    data = valid_dict()
    del data[field]
    return data


# ------------------------------------------------------------------- round trip


def test_envelope_round_trips_through_json_with_every_field() -> None:
    # GIVEN an envelope with the optional attributes set
    optional = {
        "dataschema": "https://schemas.example.com/order-placed/1",
        "correlationid": "corr-1",
        "traceparent": TRACEPARENT,
        "tracestate": "vendor=abc",
    }
    original = Envelope.from_dict(valid_dict(**optional))

    # WHEN it goes through its JSON form and back
    restored = Envelope.from_json(original.to_json())

    # THEN nothing is lost, data number types included
    assert restored == original
    assert restored.to_dict() == valid_dict(**optional)
    assert restored.correlation_id == "corr-1"
    assert isinstance(restored.data["total"], float)
    assert isinstance(restored.data["lines"][0]["qty"], int)


def test_envelope_json_is_compact_and_keeps_non_ascii_text() -> None:
    # GIVEN a data with non-ASCII text
    envelope = Envelope.from_dict(valid_dict(data={"city": "Zürich"}))

    # WHEN it is serialised
    text = envelope.to_json()

    # THEN the bytes are compact UTF-8 (sizes computed from them match what is sent)
    assert "Zürich" in text
    assert ": " not in text and ", " not in text


def test_envelope_round_trips_from_bytes() -> None:
    envelope = Envelope.from_dict(valid_dict())
    assert Envelope.from_json(envelope.to_json().encode()) == envelope


def test_new_envelope_gets_a_ulid_id_current_utc_time_and_the_cloudevents_constants() -> None:
    # GIVEN/WHEN an envelope built with only the required fields
    envelope = Envelope(type="OrderPlaced", source="shop", subject="ORDER#1", data={})

    # THEN it carries a ULID, a millisecond UTC timestamp of now, CloudEvents 1.0 and JSON data
    ULID.from_str(envelope.id)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", envelope.time)
    written = datetime.fromisoformat(envelope.time.replace("Z", "+00:00"))
    assert abs(datetime.now(UTC) - written) < timedelta(minutes=1)
    assert envelope.to_dict()["specversion"] == "1.0"
    assert envelope.to_dict()["datacontenttype"] == "application/json"
    assert not {"dataschema", "correlationid", "traceparent", "tracestate"} & set(
        envelope.to_dict()
    )


def test_two_new_envelopes_get_different_ids() -> None:
    first = Envelope(type="T", source="s", subject="x", data={})
    second = Envelope(type="T", source="s", subject="x", data={})
    assert first.id != second.id


def test_envelope_is_immutable() -> None:
    envelope = Envelope.from_dict(valid_dict())
    with pytest.raises(dataclasses.FrozenInstanceError):
        envelope.type = "Other"  # type: ignore[misc]


# ------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "field", ["specversion", "id", "type", "source", "time", "subject", "data"]
)
def test_missing_required_field_is_refused_naming_the_field(field: str) -> None:
    # GIVEN data without one required field
    # WHEN it is read as an envelope
    # THEN the error names that field
    with pytest.raises(InvalidEnvelope, match=f"missing field\\(s\\): {field}"):
        Envelope.from_dict(without(field))


@pytest.mark.parametrize("field", ["id", "type", "source", "time", "subject"])
@pytest.mark.parametrize("bad", ["", 42, None])
def test_text_field_that_is_empty_or_not_a_string_is_refused(field: str, bad: Any) -> None:
    with pytest.raises(InvalidEnvelope, match=f"'{field}' must be a non-empty string"):
        Envelope.from_dict(valid_dict(**{field: bad}))


@pytest.mark.parametrize(
    "bad_id", ["not-a-ulid", "01ARZ3NDEKTSV4RRFFQ69G5FA", "8" * 26, "01arz3ndektsv4rrffq69g5fav"]
)
def test_id_that_is_not_a_ulid_is_refused(bad_id: str) -> None:
    # The id is the outbox SK and every consumer's idempotency key: it must be a ULID.
    with pytest.raises(InvalidEnvelope, match="is not a ULID"):
        Envelope.from_dict(valid_dict(id=bad_id))


def test_constructor_validates_too() -> None:
    with pytest.raises(InvalidEnvelope, match="is not a ULID"):
        Envelope(type="T", source="s", subject="x", data={}, id="nope")


@pytest.mark.parametrize("data", [[1, 2], "text", None, 3])
def test_data_field_that_is_not_an_object_is_refused(data: Any) -> None:
    with pytest.raises(InvalidEnvelope, match="'data' must be a JSON object"):
        Envelope.from_dict(valid_dict(data=data))


@pytest.mark.parametrize("version", ["0.3", "1", 1.0, None])
def test_specversion_other_than_1_0_is_refused(version: Any) -> None:
    with pytest.raises(InvalidEnvelope, match=r"'specversion' must be '1\.0'"):
        Envelope.from_dict(valid_dict(specversion=version))


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", None])
def test_datacontenttype_other_than_json_is_refused(content_type: Any) -> None:
    with pytest.raises(InvalidEnvelope, match="'datacontenttype' must be 'application/json'"):
        Envelope.from_dict(valid_dict(datacontenttype=content_type))


def test_datacontenttype_may_be_absent_as_cloudevents_json_format_allows() -> None:
    data = valid_dict()
    del data["datacontenttype"]
    assert Envelope.from_dict(data).to_dict()["datacontenttype"] == "application/json"


@pytest.mark.parametrize("name", ["dataschema", "correlationid", "traceparent", "tracestate"])
@pytest.mark.parametrize("bad", [123, ""])
def test_optional_attribute_must_be_a_non_empty_string_when_present(name: str, bad: Any) -> None:
    with pytest.raises(InvalidEnvelope, match=f"'{name}' must be a non-empty string"):
        Envelope.from_dict(valid_dict(**{name: bad}))


@pytest.mark.parametrize("field", ["dataschema", "correlation_id", "traceparent", "tracestate"])
def test_optional_attribute_may_be_absent(field: str) -> None:
    assert getattr(Envelope.from_dict(valid_dict()), field) is None


def test_extension_attribute_names_are_lowercase_letters_and_digits() -> None:
    # CloudEvents: extension names are [a-z0-9]; the Python fields keep readable names.
    envelope = Envelope.from_dict(
        valid_dict(correlationid="c-1", traceparent=TRACEPARENT, tracestate="a=b")
    )
    assert all(re.fullmatch("[a-z0-9]+", name) for name in envelope.to_dict())
    assert "correlation_id" not in envelope.to_dict()


def test_attributes_are_every_member_but_data() -> None:
    envelope = Envelope.from_dict(valid_dict(correlationid="c-1"))
    assert envelope.attributes == {k: v for k, v in envelope.to_dict().items() if k != "data"}
    assert envelope.attributes["correlationid"] == "c-1"


@pytest.mark.parametrize("data", [[], "x", 1, None])
def test_data_that_is_not_an_object_is_refused(data: Any) -> None:
    with pytest.raises(InvalidEnvelope, match="must be a JSON object"):
        Envelope.from_dict(data)


def test_text_that_is_not_json_is_refused() -> None:
    with pytest.raises(InvalidEnvelope, match="not valid JSON"):
        Envelope.from_json("{not json")


def test_invalid_envelope_is_a_value_error() -> None:
    # Callers that already handle ValueError for bad input keep working.
    assert issubclass(InvalidEnvelope, ValueError)


# ---------------------------------------------------------------- outbox item


def test_outbox_item_has_the_shape_the_publisher_and_sweeper_read() -> None:
    # GIVEN an envelope about an order
    envelope = Envelope.from_dict(valid_dict())

    # WHEN its outbox item is built in the order's partition
    item = outbox_item("ORDER#1001", envelope)

    # THEN it is a low-level item keyed PK/SK=OUTBOX#<id>, carrying the envelope JSON,
    # its type, PENDING status and a pending-index shard
    assert item == {
        ATTR_PK: {"S": "ORDER#1001"},
        ATTR_SK: {"S": OUTBOX_SK_PREFIX + EVENT_ID},
        ATTR_ENVELOPE: {"S": envelope.to_json()},
        ATTR_EVENT_TYPE: {"S": "OrderPlaced"},
        ATTR_STATUS: {"S": STATUS_PENDING},
        ATTR_PENDING_SHARD: {"S": pending_shard(EVENT_ID)},
    }
    assert item[ATTR_SK]["S"] == outbox_sk(envelope.id) == "OUTBOX#" + EVENT_ID
    assert Envelope.from_json(item[ATTR_ENVELOPE]["S"]) == envelope


def test_outbox_item_uses_the_requested_number_of_shards() -> None:
    envelope = Envelope.from_dict(valid_dict())
    assert outbox_item("P", envelope, pending_shards=1)[ATTR_PENDING_SHARD] == {"S": "00"}


def test_outbox_item_refuses_an_empty_partition_key() -> None:
    with pytest.raises(ValueError, match="non-empty string"):
        outbox_item("", Envelope.from_dict(valid_dict()))


def test_outbox_item_is_plain_json_serialisable_strings_only() -> None:
    # Every value is an S attribute: nothing the stream or the filter could mistype.
    item = outbox_item("P", Envelope.from_dict(valid_dict()))
    assert all(list(value) == ["S"] and isinstance(value["S"], str) for value in item.values())
    json.dumps(item)


# --------------------------------------------------------------- pending shard


def burst_of_ids(count: int, *, sequential: bool) -> list[str]:
    """ULIDs of one millisecond, random or monotonic (the worst case for a hash on the id)."""
    rng = random.Random(42)
    timestamp_ms = 1_700_000_000_000
    base = (timestamp_ms << 80) | rng.getrandbits(80)
    if sequential:
        return [str(ULID.from_int(base + k)) for k in range(count)]
    return [str(ULID.from_int((timestamp_ms << 80) | rng.getrandbits(80))) for _ in range(count)]


@pytest.mark.parametrize("sequential", [False, True], ids=["random", "monotonic"])
def test_pending_shard_spreads_ids_evenly_over_every_shard(sequential: bool) -> None:
    # GIVEN 800 ids written in the same millisecond
    ids = burst_of_ids(800, sequential=sequential)

    # WHEN they are assigned to 8 shards
    counts = collections.Counter(pending_shard(event_id, 8) for event_id in ids)

    # THEN every shard gets its share (100 each on average), no hot partition
    assert sorted(counts) == [f"{n:02d}" for n in range(8)]
    assert min(counts.values()) >= 60
    assert max(counts.values()) <= 140


def test_pending_shard_is_stable_across_calls_and_processes() -> None:
    # The sweeper queries shards written by other processes and other releases:
    # the value must be a pure function of the id (no salted hash()).
    assert pending_shard("01ARZ3NDEKTSV4RRFFQ69G5FAV") == "05"
    assert pending_shard("01ARZ3NDEKTSV4RRFFQ69G5FAV", 4) == "01"
    assert pending_shard("01ARZ3NDEKTSV4RRFFQ69G5FAV", 16) == "13"
    assert pending_shard("01HZZZZZZZZZZZZZZZZZZZZZZZ") == "02"
    ids = burst_of_ids(50, sequential=False)
    assert [pending_shard(i) for i in ids] == [pending_shard(i) for i in ids]


@pytest.mark.parametrize("shards", [1, 3, 8, 16])
def test_pending_shard_stays_within_the_shard_count(shards: int) -> None:
    values = {pending_shard(i, shards) for i in burst_of_ids(200, sequential=False)}
    assert values <= {f"{n:02d}" for n in range(shards)}


@pytest.mark.parametrize("shards", [0, -1, 101])
def test_pending_shard_refuses_a_shard_count_outside_1_to_100(shards: int) -> None:
    with pytest.raises(ValueError, match="between 1 and 100"):
        pending_shard(str(ULID()), shards)


@pytest.mark.parametrize(
    "bad_time",
    [
        "yesterday",
        "2026-13-01T00:00:00Z",
        "",
        "2024-05-01T12:00:00",  # ISO 8601 without an offset: not RFC 3339
        "2024-05-01",
        "20240501T120000Z",
    ],
)
def test_time_that_is_not_rfc_3339_is_refused(bad_time: str) -> None:
    with pytest.raises(InvalidEnvelope, match="'time' must be"):
        Envelope(type="T", source="s", subject="x", data={}, time=bad_time)


def test_data_changed_by_the_caller_after_construction_does_not_change_the_event() -> None:
    data: dict[str, Any] = {"items": [1, 2]}
    envelope = Envelope(type="T", source="s", subject="x", data=data)
    before = envelope.to_json()
    data["items"].append(3)
    data["extra"] = True
    assert envelope.to_json() == before


@pytest.mark.parametrize("data", [{"x": float("nan")}, {"x": float("inf")}, {"x": {1, 2}}])
def test_data_not_encodable_as_strict_json_is_refused(data: dict[str, Any]) -> None:
    with pytest.raises(InvalidEnvelope, match="not encodable as JSON"):
        Envelope(type="T", source="s", subject="x", data=data)
