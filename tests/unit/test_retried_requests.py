"""A client retrying an HTTP request resends the same event: ids derived from the
request's key, the envelope time taken from the id, and the same TransactWriteItems
request byte for byte, so DynamoDB's ClientRequestToken can make the retry a no-op."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dynamodb_outbox.event_ids import event_id_datetime, event_id_for, new_event_id
from dynamodb_outbox.writer import InvalidWrite, OutboxWriter
from dynamodb_outbox.writer._limits import MAX_EVENT_ID_LEAD_SECONDS

ORDER = {"PK": "ORDER#1", "SK": "META", "status": "NEW"}
FIRST_SENT = datetime(2024, 5, 1, 10, 30, 0, 123456, tzinfo=UTC)


class RecordingClient:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return {}


def test_the_same_request_key_and_time_give_the_same_ulid() -> None:
    first = event_id_for("POST /orders key-42", FIRST_SENT)

    assert first == event_id_for("POST /orders key-42", FIRST_SENT)
    assert first != event_id_for("POST /orders key-43", FIRST_SENT)
    assert event_id_datetime(first) == FIRST_SENT.replace(microsecond=123000)


def test_derived_ids_sort_by_their_time_like_fresh_ones() -> None:
    # The outbox SK is OUTBOX#<id> and the sweeper bounds it by time.
    earlier = event_id_for("zzz", FIRST_SENT)
    later = event_id_for("aaa", FIRST_SENT + timedelta(milliseconds=1))
    assert earlier < later


def test_a_naive_time_or_empty_key_is_refused() -> None:
    with pytest.raises(ValueError, match="aware datetime"):
        event_id_for("key", datetime(2024, 5, 1))
    with pytest.raises(ValueError, match="non-empty string"):
        event_id_for("", FIRST_SENT)


def test_a_retried_request_sends_the_very_same_transaction() -> None:
    # GIVEN two attempts of one HTTP request, built independently (another process,
    # a later moment), from the request's key and the time the client first sent it
    client = RecordingClient()
    writer = OutboxWriter("orders", client, source="shop.orders")  # type: ignore[arg-type]
    sent_at = datetime.now(UTC) - timedelta(seconds=30)
    for _attempt in range(2):
        event_id = event_id_for("idempotency-key-42", sent_at)
        event = writer.new_event(ORDER, "OrderCreated", {"n": 1}, event_id=event_id)
        writer.write(ORDER, event, client_request_token=event.id)

    # THEN both requests are equal: AWS treats the second as the first's retry
    first, second = client.calls
    assert first == second
    assert first["ClientRequestToken"] == event_id
    envelope = json.loads(first["TransactItems"][1]["Put"]["Item"]["envelope"]["S"])
    assert envelope["id"] == event_id
    assert envelope["time"] == sent_at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_an_explicit_time_is_kept() -> None:
    writer = OutboxWriter("orders", RecordingClient(), source="s")  # type: ignore[arg-type]
    event = writer.new_event(
        ORDER, "T", {}, event_id=new_event_id(), time=datetime(2024, 1, 1, tzinfo=UTC)
    )
    assert event.time == "2024-01-01T00:00:00.000Z"


@pytest.mark.parametrize(
    "bad_id",
    [
        "order-42",  # not a ULID at all
        "01hx3z7k8q9m2n4p5r6s7t8v9w",  # lower case: would sort after every canonical id
        "01HX3Z7K8Q9M2N4P5R6S7T8V9",  # 25 characters
    ],
)
def test_an_event_id_that_is_not_a_canonical_ulid_is_refused(bad_id: str) -> None:
    writer = OutboxWriter("orders", RecordingClient(), source="s")  # type: ignore[arg-type]
    with pytest.raises(InvalidWrite, match=r"is not a ULID.*must sort by time"):
        writer.new_event(ORDER, "T", {}, event_id=bad_id)


def test_an_event_id_dated_far_in_the_future_is_refused() -> None:
    # The sweeper reads SK < OUTBOX#<ULID of now - min age>: it would not see the
    # event until that future time, should the stream path lose it.
    writer = OutboxWriter("orders", RecordingClient(), source="s")  # type: ignore[arg-type]
    ahead = datetime.now(UTC) + timedelta(seconds=MAX_EVENT_ID_LEAD_SECONDS + 60)
    with pytest.raises(InvalidWrite, match="ahead of now"):
        writer.new_event(ORDER, "T", {}, event_id=event_id_for("k", ahead))
    skewed = datetime.now(UTC) + timedelta(seconds=30)  # a little clock skew is fine
    assert writer.new_event(ORDER, "T", {}, event_id=event_id_for("k", skewed)).id
