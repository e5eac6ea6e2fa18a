"""The writer: what it sends in one TransactWriteItems, what it refuses, how it reports AWS errors.

AWS is replaced by a recording fake client, or by botocore's Stubber where the
request must also match the real API model.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from dynamodb_outbox.envelope import Envelope, InvalidEnvelope
from dynamodb_outbox.outbox_item import (
    DEFAULT_PENDING_SHARDS,
    outbox_item,
    outbox_sk,
    pending_shard,
)
from dynamodb_outbox.sinks import rules_for
from dynamodb_outbox.writer import (
    Condition,
    DuplicateItemInTransaction,
    IdempotentParameterMismatch,
    InvalidWrite,
    ItemTooLarge,
    LimitExceeded,
    NoEvents,
    OutboxWriteError,
    OutboxWriter,
    TooManyActions,
    TransactionCancelled,
    TransactionInProgress,
    TransactionTooLarge,
    condition_check_action,
    delete_action,
    put_action,
    update_action,
)
from dynamodb_outbox.writer._attribute_values import attribute_value_size, item_size, serialize_item
from dynamodb_outbox.writer._limits import (
    MAX_ITEM_BYTES,
    MAX_TRANSACTION_ACTIONS,
    MAX_TRANSACTION_BYTES,
)
from tests.support.aws_errors import client_error

TABLE = "outbox-table"
ORDER = {"PK": "ORDER#1", "SK": "META", "status": "PLACED", "total": Decimal("12.50")}


class RecordingClient:
    """Stands in for the DynamoDB client: records requests, optionally fails them."""

    def __init__(self, error: ClientError | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.error = error

    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error
        return {}

    @property
    def items(self) -> list[dict[str, Any]]:
        assert len(self.calls) == 1, "expected exactly one TransactWriteItems call"
        items: list[dict[str, Any]] = self.calls[0]["TransactItems"]
        return items


def event(type_: str = "OrderPlaced", subject: str = "ORDER#1", **data: Any) -> Envelope:
    return Envelope(type=type_, source="shop.orders", subject=subject, data=data)


@pytest.fixture
def client() -> RecordingClient:
    return RecordingClient()


@pytest.fixture
def writer(client: RecordingClient) -> OutboxWriter:
    return OutboxWriter(TABLE, client, source="shop.orders")


@pytest.fixture
def real_client() -> Iterator[Any]:
    """A real botocore client (never reaching the network) for Stubber tests."""
    yield boto3.client(
        "dynamodb",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


# --------------------------------------------------------------- building events


def test_new_event_defaults_subject_to_the_entity_pk_and_source_to_the_writer(
    writer: OutboxWriter,
) -> None:
    # GIVEN a writer with a default source
    # WHEN an event is built for an entity
    envelope = writer.new_event(ORDER, "OrderPlaced", {"total": "12.50"}, correlation_id="c-1")

    # THEN it is about the entity's PK, from the writer's source
    assert envelope.subject == "ORDER#1"
    assert envelope.source == "shop.orders"
    assert envelope.type == "OrderPlaced"
    assert envelope.correlation_id == "c-1"
    assert dict(envelope.data) == {"total": "12.50"}


def test_new_event_accepts_explicit_subject_source_and_a_bare_pk(writer: OutboxWriter) -> None:
    envelope = writer.new_event("ORDER#2", "OrderShipped", {}, subject="SHIP#9", source="ship")
    assert (envelope.subject, envelope.source) == ("SHIP#9", "ship")
    assert writer.new_event("ORDER#2", "OrderShipped", {}).subject == "ORDER#2"


def test_new_event_without_any_source_is_refused() -> None:
    # GIVEN a writer without a default source
    writer = OutboxWriter(TABLE, RecordingClient())
    # WHEN/THEN an event without a source is refused with a hint
    with pytest.raises(InvalidWrite, match="needs a source"):
        writer.new_event(ORDER, "OrderPlaced", {})


@pytest.mark.parametrize(
    ("event_type", "data", "message"),
    [("", {}, "'type' must be a non-empty string"), ("T", [1], "'data' must be a JSON object")],
)
def test_new_event_with_invalid_fields_raises_a_writer_error(
    writer: OutboxWriter, event_type: str, data: Any, message: str
) -> None:
    with pytest.raises(InvalidWrite, match=message):
        writer.new_event(ORDER, event_type, data)


def test_writer_creates_no_client_until_the_first_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN boto3.client is watched
    created: list[str] = []
    fake = RecordingClient()

    def fake_boto3_client(service: str, *args: Any, **kwargs: Any) -> RecordingClient:
        created.append(service)
        return fake

    monkeypatch.setattr(boto3, "client", fake_boto3_client)

    # WHEN a writer is built without a client
    writer = OutboxWriter(TABLE)
    # THEN no client exists yet (no credentials or region needed at import time)
    assert created == []

    # WHEN it writes
    writer.write(ORDER, [event()])
    # THEN one DynamoDB client was created and used
    assert created == ["dynamodb"]
    assert len(fake.calls) == 1


def test_eight_threads_sharing_a_writer_create_exactly_one_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN a client factory that holds each caller until all 8 threads are inside
    # it (or 0.2 s pass): without a lock, every thread would make a client of its own
    threads = 8
    inside = threading.Barrier(threads, timeout=0.2)
    created: list[RecordingClient] = []

    def slow_boto3_client(service: str, *args: Any, **kwargs: Any) -> RecordingClient:
        with contextlib.suppress(threading.BrokenBarrierError):
            inside.wait()
        created.append(RecordingClient())
        return created[-1]

    monkeypatch.setattr(boto3, "client", slow_boto3_client)
    writer = OutboxWriter(TABLE)
    start = threading.Barrier(threads)

    def first_use() -> object:
        start.wait()
        return writer.client

    # WHEN 8 threads use the writer's client at once
    with ThreadPoolExecutor(threads) as pool:
        clients = list(pool.map(lambda _: first_use(), range(threads)))

    # THEN one client was made and every thread got it
    assert len(created) == 1
    assert all(client is created[0] for client in clients)


# ----------------------------------------------------------- the transaction


def test_write_sends_one_transaction_with_the_entity_put_then_one_outbox_put_per_event(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    # GIVEN an order and two events about it
    placed, reserved = event("OrderPlaced"), event("StockReserved")

    # WHEN they are written
    writer.write(ORDER, [placed, reserved])

    # THEN exactly one TransactWriteItems carries the entity Put and one Put per event
    items = client.items
    assert [list(item) for item in items] == [["Put"], ["Put"], ["Put"]]
    assert all(item["Put"]["TableName"] == TABLE for item in items)
    assert items[0]["Put"]["Item"]["SK"] == {"S": "META"}
    assert [item["Put"]["Item"]["SK"]["S"] for item in items[1:]] == [
        outbox_sk(placed.id),
        outbox_sk(reserved.id),
    ]


def test_outbox_items_follow_the_envelope_contract_in_the_entity_partition(
    client: RecordingClient,
) -> None:
    # GIVEN a writer (the pending shards are the package's, the sweeper's)
    writer = OutboxWriter(TABLE, client)
    placed = event()

    # WHEN an event is written with the order
    writer.write(ORDER, placed)

    # THEN its item is exactly the envelope module's outbox item, in the order's partition
    item = client.items[1]["Put"]["Item"]
    assert item == outbox_item("ORDER#1", placed)
    assert item["outbox_pending_shard"] == {"S": pending_shard(placed.id, DEFAULT_PENDING_SHARDS)}
    assert Envelope.from_json(item["envelope"]["S"]) == placed


def test_outbox_put_refuses_to_overwrite_an_existing_outbox_item(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    writer.write(ORDER, event())
    put = client.items[1]["Put"]
    assert put["ConditionExpression"] == "attribute_not_exists(#outbox_sk)"
    assert put["ExpressionAttributeNames"] == {"#outbox_sk": "SK"}


def test_entity_put_is_unconditional_unless_a_condition_is_given(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    writer.write(ORDER, event())
    assert "ConditionExpression" not in client.items[0]["Put"]


def test_create_only_condition_guards_the_entity_put(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    # WHEN the order is written create-only
    writer.write(ORDER, event(), condition=Condition.item_absent())

    # THEN the entity Put fails if the order exists
    put = client.items[0]["Put"]
    assert put["ConditionExpression"] == "attribute_not_exists(#absent_key)"
    assert put["ExpressionAttributeNames"] == {"#absent_key": "PK"}


def test_condition_values_are_converted_to_attribute_values(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    # GIVEN an optimistic-lock condition with a plain Python value
    condition = Condition("#v = :expected", {"#v": "version"}, {":expected": 3})
    # WHEN it guards the entity
    writer.write(ORDER, event(), condition=condition)
    # THEN the value is sent as a DynamoDB number
    assert client.items[0]["Put"]["ExpressionAttributeValues"] == {":expected": {"N": "3"}}


def test_entity_values_are_converted_to_dynamodb_attribute_values(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    entity = {
        "PK": "ORDER#1",
        "SK": "META",
        "total": Decimal("12.50"),
        "count": 3,
        "paid": True,
        "note": None,
        "raw": b"\x00\x01",
        "tags": {"gift", "express"},
        "lines": [{"sku": "A", "qty": 2}],
    }
    writer.write(entity, event())
    item = client.items[0]["Put"]["Item"]
    assert item["total"] == {"N": "12.50"}
    assert item["count"] == {"N": "3"}
    assert item["paid"] == {"BOOL": True}
    assert item["note"] == {"NULL": True}
    assert item["raw"] == {"B": b"\x00\x01"}
    assert sorted(item["tags"]["SS"]) == ["express", "gift"]
    assert item["lines"] == {"L": [{"M": {"sku": {"S": "A"}, "qty": {"N": "2"}}}]}


def test_floats_are_stored_as_the_decimal_python_prints(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    # GIVEN floats that have no exact binary representation, at any depth
    entity = {**ORDER, "rate": 0.1, "nested": {"values": [0.1 + 0.2, 2.5]}, "set": {1.5}}

    # WHEN the entity is written
    writer.write(entity, event())

    # THEN each is stored as its shortest round-trip decimal, not the binary expansion
    item = client.items[0]["Put"]["Item"]
    assert item["rate"] == {"N": "0.1"}
    assert item["nested"]["M"]["values"]["L"] == [{"N": "0.30000000000000004"}, {"N": "2.5"}]
    assert item["set"] == {"NS": ["1.5"]}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_float_is_refused_naming_the_attribute_path(
    writer: OutboxWriter, client: RecordingClient, value: float
) -> None:
    with pytest.raises(InvalidWrite, match=r"'metrics\.score'.*no NaN or Infinity"):
        writer.write({**ORDER, "metrics": {"score": value}}, event())
    assert client.calls == []


def test_empty_set_is_refused_naming_the_attribute(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    # DynamoDB has no empty set; boto3 would send {"SS": []} and AWS would reject it.
    with pytest.raises(InvalidWrite, match="'tags' is an empty set"):
        writer.write({**ORDER, "tags": set()}, event())
    assert client.calls == []


@pytest.mark.parametrize("number", [Decimal("1E+200"), Decimal("1." + "1" * 40)])
def test_number_beyond_dynamodb_range_or_precision_is_refused(
    writer: OutboxWriter, number: Decimal
) -> None:
    with pytest.raises(InvalidWrite, match="'amount': a number does not fit DynamoDB"):
        writer.write({**ORDER, "amount": number}, event())


def test_value_of_unsupported_type_is_refused(writer: OutboxWriter) -> None:
    with pytest.raises(InvalidWrite, match="'when' cannot be stored"):
        writer.write({**ORDER, "when": object()}, event())


@pytest.mark.parametrize(
    "entity",
    [
        {"SK": "META"},
        {"PK": "ORDER#1"},
        {"PK": "", "SK": "META"},
        {"PK": 1, "SK": "META"},
        {"PK": "ORDER#1", "SK": None},
    ],
)
def test_entity_without_string_pk_and_sk_is_refused(
    writer: OutboxWriter, client: RecordingClient, entity: dict[str, Any]
) -> None:
    with pytest.raises(InvalidWrite, match=r"needs a non-empty string (PK|SK)"):
        writer.write(entity, event())
    assert client.calls == []


def test_entity_sk_with_the_outbox_prefix_is_refused(writer: OutboxWriter) -> None:
    # The stream filter keys on SK prefix OUTBOX#: such an entity would be "published".
    with pytest.raises(InvalidWrite, match="reserved for outbox items"):
        writer.write({"PK": "ORDER#1", "SK": "OUTBOX#x"}, event())


def test_event_that_is_not_an_envelope_is_refused(writer: OutboxWriter) -> None:
    with pytest.raises(InvalidWrite, match="event #0 must be an Envelope"):
        writer.write(ORDER, [{"type": "OrderPlaced"}])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"score": float("nan")}, "data.score is nan"),
        ({"amount": Decimal("Infinity")}, "data.amount is Decimal"),
        ({"blob": b"x"}, "data.blob is a bytes"),
    ],
)
def test_event_whose_data_is_not_json_is_refused_before_any_write(
    client: RecordingClient, data: dict[str, Any], reason: str
) -> None:
    # NaN would be a bare NaN token (invalid JSON the bus rejects forever); bytes
    # have no faithful JSON form. The envelope refuses both, so no write can carry them.
    with pytest.raises(InvalidEnvelope, match=f"not encodable as JSON.*{reason}"):
        event(**data)
    assert client.calls == []


# ------------------------------------------------------------------ extra actions


def test_extra_actions_follow_the_events_and_default_to_the_writer_table(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    # GIVEN a raw ConditionCheck without TableName and an Update on another table
    check = {
        "ConditionCheck": {
            "Key": {"PK": {"S": "CUSTOMER#7"}, "SK": {"S": "META"}},
            "ConditionExpression": "attribute_exists(PK)",
        }
    }
    counter = update_action(
        {"id": "orders"}, "ADD #n :one", names={"#n": "n"}, values={":one": 1}, table_name="stats"
    )

    # WHEN they are written with the order
    writer.write(ORDER, [event()], extra_actions=[check, counter])

    # THEN they come after entity and events, the check on this table, the caller's dict intact
    items = client.items
    assert len(items) == 4
    assert items[2] == {"ConditionCheck": {"TableName": TABLE, **check["ConditionCheck"]}}
    assert items[3]["Update"]["TableName"] == "stats"
    assert "TableName" not in check["ConditionCheck"]


def test_action_builders_produce_low_level_transact_items() -> None:
    customer = {"PK": "CUSTOMER#7", "SK": "META"}
    assert condition_check_action(customer, Condition.item_exists()) == {
        "ConditionCheck": {
            "Key": {"PK": {"S": "CUSTOMER#7"}, "SK": {"S": "META"}},
            "ConditionExpression": "attribute_exists(#present_key)",
            "ExpressionAttributeNames": {"#present_key": "PK"},
        }
    }
    assert update_action(
        customer,
        "SET #orders = #orders + :one",
        names={"#orders": "orders"},
        values={":one": 1},
        condition=Condition("#status = :active", {"#status": "status"}, {":active": "ACTIVE"}),
    ) == {
        "Update": {
            "Key": {"PK": {"S": "CUSTOMER#7"}, "SK": {"S": "META"}},
            "UpdateExpression": "SET #orders = #orders + :one",
            "ConditionExpression": "#status = :active",
            "ExpressionAttributeNames": {"#orders": "orders", "#status": "status"},
            "ExpressionAttributeValues": {":one": {"N": "1"}, ":active": {"S": "ACTIVE"}},
        }
    }
    assert delete_action(customer, table_name="other") == {
        "Delete": {"TableName": "other", "Key": {"PK": {"S": "CUSTOMER#7"}, "SK": {"S": "META"}}}
    }
    assert put_action({"id": "x", "n": 1.5}, table_name="other") == {
        "Put": {"TableName": "other", "Item": {"id": {"S": "x"}, "n": {"N": "1.5"}}}
    }


def test_update_builder_refuses_a_placeholder_with_two_meanings() -> None:
    with pytest.raises(InvalidWrite, match="placeholder :v means two different things"):
        update_action(
            {"PK": "A", "SK": "B"},
            "SET x = :v",
            values={":v": 1},
            condition=Condition("y = :v", values={":v": 2}),
        )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"Put": {}, "Delete": {}}, "exactly one of"),
        ({"Get": {"Key": {}}}, "'Get' is not one of"),
        ({"Update": {"Key": {"PK": {"S": "A"}}}}, "needs an UpdateExpression"),
        ({"ConditionCheck": {"ConditionExpression": "x"}}, "needs a Key mapping"),
        ({"Put": {"TableName": TABLE}}, "needs an Item mapping"),
        ({"Delete": {"TableName": "", "Key": {"PK": {"S": "A"}}}}, "TableName must be"),
    ],
)
def test_malformed_extra_action_is_refused_naming_its_position(
    writer: OutboxWriter, client: RecordingClient, raw: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidWrite, match=f"extra action #0 \\(action 2\\).*{message}"):
        writer.write(ORDER, event(), extra_actions=[raw])
    assert client.calls == []


def test_write_events_writes_outbox_items_next_to_an_updated_entity(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    # GIVEN a change expressed as an Update of the entity rather than a full Put
    ship = update_action(
        {"PK": "ORDER#1", "SK": "META"}, "SET #s = :s", names={"#s": "status"}, values={":s": "X"}
    )
    shipped = event("OrderShipped")

    # WHEN the event is written with it
    result = writer.write_events("ORDER#1", [shipped], extra_actions=[ship])

    # THEN the transaction is the outbox Put plus the Update, no entity Put
    items = client.items
    assert items[0]["Put"]["Item"]["SK"] == {"S": outbox_sk(shipped.id)}
    assert items[0]["Put"]["Item"]["PK"] == {"S": "ORDER#1"}
    assert items[1]["Update"]["TableName"] == TABLE
    assert result.event_ids == (shipped.id,)


def test_write_events_requires_an_event(writer: OutboxWriter) -> None:
    with pytest.raises(NoEvents):
        writer.write_events("ORDER#1", [])


@pytest.mark.parametrize("shards", [0, 1, 4, 16, 100, 101])
def test_a_writer_with_shards_the_sweeper_never_reads_is_refused(shards: int) -> None:
    """The sweeper reads DEFAULT_PENDING_SHARDS shards: any other count would hide items."""
    with pytest.raises(InvalidWrite, match=r"pending_shards .*the sweeper"):
        OutboxWriter(TABLE, RecordingClient(), pending_shards=shards)


def test_a_writer_given_the_sweepers_shard_count_is_accepted() -> None:
    writer = OutboxWriter(TABLE, RecordingClient(), pending_shards=DEFAULT_PENDING_SHARDS)

    assert writer.pending_shards == DEFAULT_PENDING_SHARDS


# ------------------------------------------------------------------------ events


def test_write_without_events_is_refused_before_calling_aws(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    with pytest.raises(NoEvents, match="allow_no_events=True"):
        writer.write(ORDER, [])
    assert client.calls == []


def test_write_without_events_is_allowed_when_explicit(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    result = writer.write(ORDER, [], allow_no_events=True)
    assert [list(item) for item in client.items] == [["Put"]]
    assert result.event_ids == () and result.outbox_sks == ()


def test_write_result_lists_event_ids_and_outbox_sks_in_order(writer: OutboxWriter) -> None:
    first, second = event("A"), event("B")
    result = writer.write(
        ORDER, [first, second], extra_actions=[delete_action({"PK": "X", "SK": "Y"})]
    )
    assert result.pk == "ORDER#1"
    assert result.event_ids == (first.id, second.id)
    assert result.outbox_sks == ("OUTBOX#" + first.id, "OUTBOX#" + second.id)
    assert result.action_count == 4


def test_a_single_envelope_is_accepted_without_a_list(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    placed = event()
    assert writer.write(ORDER, placed).event_ids == (placed.id,)
    assert len(client.items) == 2


# ------------------------------------------------------------------------ limits


def test_more_than_100_actions_are_refused_before_calling_aws(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    # GIVEN the entity plus 100 events: 101 actions
    events = [event() for _ in range(100)]

    # WHEN/THEN the write is refused, naming the limit and the count, nothing sent
    with pytest.raises(TooManyActions, match=r"has 101 actions.*at most 100") as caught:
        writer.write(ORDER, events)
    assert (caught.value.limit, caught.value.actual) == (MAX_TRANSACTION_ACTIONS, 101)
    assert client.calls == []


def test_exactly_100_actions_are_sent(writer: OutboxWriter, client: RecordingClient) -> None:
    writer.write(ORDER, [event() for _ in range(99)])
    assert len(client.items) == 100


def entity_of_size(size: int, sk: str = "META") -> dict[str, Any]:
    """An entity whose item size is exactly ``size`` bytes (ASCII strings only)."""
    fixed = len("PK") + len("ORDER#1") + len("SK") + len(sk) + len("blob")
    return {"PK": "ORDER#1", "SK": sk, "blob": "x" * (size - fixed)}


def test_entity_of_exactly_400_kb_is_accepted(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    entity = entity_of_size(MAX_ITEM_BYTES)
    assert item_size(client_side_item(entity)) == MAX_ITEM_BYTES
    writer.write(entity, event())
    assert len(client.calls) == 1


def test_entity_over_400_kb_is_refused_naming_the_action_and_its_size(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    with pytest.raises(
        ItemTooLarge,
        match=r"action 0 \(Put entity PK=ORDER#1 SK=META\) is about "
        f"{MAX_ITEM_BYTES + 1} bytes.*limit of {MAX_ITEM_BYTES}",
    ) as caught:
        writer.write(entity_of_size(MAX_ITEM_BYTES + 1), event())
    assert (caught.value.index, caught.value.actual) == (0, MAX_ITEM_BYTES + 1)
    assert client.calls == []


def test_extra_put_over_400_kb_is_refused(writer: OutboxWriter, client: RecordingClient) -> None:
    big = put_action(entity_of_size(MAX_ITEM_BYTES + 10, sk="BIG"))
    with pytest.raises(ItemTooLarge, match=r"action 2 \(Put PK=ORDER#1 SK=BIG\)"):
        writer.write(ORDER, event(), extra_actions=[big])
    assert client.calls == []


def test_transaction_over_4_mb_is_refused_even_when_every_item_fits(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    # GIVEN 11 items of 390 KB: each under 400 KB, together over 4 MB
    parts = [put_action(entity_of_size(390 * 1024, sk=f"PART#{n:02d}")) for n in range(10)]
    entity = entity_of_size(390 * 1024)

    # WHEN/THEN the transaction is refused with its total and the limit
    with pytest.raises(
        TransactionTooLarge, match=f"limit of {MAX_TRANSACTION_BYTES} bytes"
    ) as caught:
        writer.write(entity, event(), extra_actions=parts)
    assert caught.value.actual > MAX_TRANSACTION_BYTES
    assert caught.value.limit == MAX_TRANSACTION_BYTES
    assert client.calls == []


def test_transaction_just_under_4_mb_is_sent(writer: OutboxWriter, client: RecordingClient) -> None:
    parts = [put_action(entity_of_size(370 * 1024, sk=f"PART#{n:02d}")) for n in range(10)]
    writer.write(entity_of_size(300 * 1024), event(), extra_actions=parts)
    assert len(client.items) == 12


def client_side_item(entity: dict[str, Any]) -> dict[str, Any]:
    return serialize_item(entity)


# ---------------------------------------------------------------- item size rules


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"S": "abc"}, 3),
        ({"S": "héllo"}, 6),  # UTF-8 bytes, not characters
        ({"S": ""}, 0),
        ({"B": b"\x00\x01\x02"}, 3),  # raw bytes, not base64
        ({"BOOL": False}, 1),
        ({"NULL": True}, 1),
        ({"SS": ["a", "bc"]}, 3),
        ({"BS": [b"xy", b"z"]}, 3),
        ({"L": []}, 3),
        ({"M": {}}, 3),
        ({"L": [{"S": "ab"}, {"BOOL": True}]}, 3 + (1 + 2) + (1 + 1)),
        ({"M": {"key": {"S": "v"}}}, 3 + 1 + 3 + 1),  # map keys count like attribute names
        ({"M": {"a": {"L": [{"S": "x"}]}}}, 3 + 1 + 1 + (3 + 1 + 1)),
    ],
)
def test_attribute_value_size_follows_the_aws_rules(value: dict[str, Any], expected: int) -> None:
    assert attribute_value_size(value) == expected


def documented_number_size(text: str) -> int:
    """AWS: about 1 byte per two significant digits + 1, leading/trailing zeros trimmed."""
    significant = "".join(map(str, Decimal(text).as_tuple().digits)).strip("0") or "0"
    return -(-len(significant) // 2) + 1


@pytest.mark.parametrize(
    "number", ["0", "1", "12", "123", "-7", "12.5", "0.00012", "1000000", "9" * 38, "-1.5E+100"]
)
def test_number_size_never_undercounts_the_documented_estimate(number: str) -> None:
    size = attribute_value_size({"N": number})
    assert documented_number_size(number) <= size <= documented_number_size(number) + 2


def test_number_size_trims_leading_and_trailing_zeros() -> None:
    assert attribute_value_size({"N": "1000000"}) == attribute_value_size({"N": "1"})
    assert attribute_value_size({"N": "0.00012"}) == attribute_value_size({"N": "12"})
    assert attribute_value_size({"N": "1" * 38}) > attribute_value_size({"N": "1" * 10})


def test_negative_numbers_count_one_more_byte() -> None:
    assert attribute_value_size({"N": "-5"}) == attribute_value_size({"N": "5"}) + 1


def test_item_size_adds_attribute_names_in_utf8() -> None:
    assert item_size({"PK": {"S": "A"}, "é": {"BOOL": True}}) == (2 + 1) + (2 + 1)


def test_number_set_is_the_sum_of_its_numbers() -> None:
    assert attribute_value_size({"NS": ["1", "22"]}) == 2 * attribute_value_size({"N": "1"})


# ------------------------------------------------------------------- duplicates


def test_two_events_with_the_same_id_are_refused_as_actions_on_one_item(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    placed = event()
    with pytest.raises(
        DuplicateItemInTransaction, match=r"action 2 .* and action 1 .*same item"
    ) as caught:
        writer.write(ORDER, [placed, placed])
    assert (caught.value.first_index, caught.value.second_index) == (1, 2)
    assert client.calls == []


def test_extra_action_on_the_entity_item_is_refused_naming_both_actions(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    # GIVEN a ConditionCheck on the very item the write puts
    check = condition_check_action({"PK": "ORDER#1", "SK": "META"}, Condition.item_absent())

    # WHEN/THEN AWS would reject it; the writer says which actions clash and what to do
    with pytest.raises(
        DuplicateItemInTransaction,
        match=r"action 2 \(ConditionCheck PK=ORDER#1 SK=META\) and action 0 "
        r"\(Put entity PK=ORDER#1 SK=META\).*into its condition",
    ):
        writer.write(ORDER, event(), extra_actions=[check])
    assert client.calls == []


def test_equal_numeric_keys_count_as_the_same_item(writer: OutboxWriter) -> None:
    # 1 and 1.0 are the same DynamoDB number, hence the same key.
    first = {"Delete": {"TableName": "stats", "Key": {"id": {"N": "1"}}}}
    second = {
        "ConditionCheck": {
            "TableName": "stats",
            "Key": {"id": {"N": "1.0"}},
            "ConditionExpression": "attribute_exists(id)",
        }
    }
    with pytest.raises(DuplicateItemInTransaction, match="on stats id=1"):
        writer.write(ORDER, event(), extra_actions=[first, second])


def test_same_key_on_different_tables_is_not_a_duplicate(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    other = delete_action({"PK": "ORDER#1", "SK": "META"}, table_name="archive")
    writer.write(ORDER, event(), extra_actions=[other])
    assert len(client.items) == 3


def test_put_on_another_table_is_checked_for_duplicates_when_its_key_schema_is_declared(
    client: RecordingClient,
) -> None:
    writer = OutboxWriter(TABLE, client, key_schemas={"stats": ["id"]})
    put = put_action({"id": "orders", "n": 1}, table_name="stats")
    update = update_action({"id": "orders"}, "ADD n :one", values={":one": 1}, table_name="stats")
    with pytest.raises(DuplicateItemInTransaction, match=r"Update on stats id=orders"):
        writer.write(ORDER, event(), extra_actions=[put, update])


# ----------------------------------------------------------------------- tokens


def test_client_request_token_is_passed_through(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    writer.write(ORDER, event(), client_request_token="order-1-place")
    assert client.calls[0]["ClientRequestToken"] == "order-1-place"


def test_without_a_token_the_writer_leaves_it_to_botocore(
    writer: OutboxWriter, client: RecordingClient
) -> None:
    # botocore fills ClientRequestToken (an idempotency-token member) for its own retries.
    writer.write(ORDER, event())
    assert "ClientRequestToken" not in client.calls[0]


def test_token_of_36_characters_is_accepted(writer: OutboxWriter, client: RecordingClient) -> None:
    writer.write(ORDER, event(), client_request_token="t" * 36)
    assert client.calls[0]["ClientRequestToken"] == "t" * 36


@pytest.mark.parametrize(("token", "shown"), [("t" * 37, "got 37"), ("", "got 0"), (7, "got int")])
def test_invalid_token_is_refused_before_calling_aws(
    writer: OutboxWriter, client: RecordingClient, token: Any, shown: str
) -> None:
    with pytest.raises(InvalidWrite, match=f"1 to 36 characters, {shown}"):
        writer.write(ORDER, event(), client_request_token=token)
    assert client.calls == []


# ---------------------------------------------------------- AWS errors (Stubber)


def stubbed_writer(real_client: Any) -> tuple[OutboxWriter, Stubber]:
    stubber = Stubber(real_client)
    stubber.activate()
    return OutboxWriter(TABLE, real_client), stubber


def test_request_matches_the_transact_write_items_api_model(real_client: Any) -> None:
    # GIVEN a Stubber that validates the request against botocore's model of the API
    writer, stubber = stubbed_writer(real_client)
    placed = event()
    check = condition_check_action({"PK": "CUSTOMER#7", "SK": "META"}, Condition.item_exists())
    bump = update_action(
        {"PK": "CUSTOMER#7", "SK": "STATS"}, "ADD #n :one", names={"#n": "n"}, values={":one": 1}
    )
    stubber.add_response(
        "transact_write_items",
        {},
        {
            "TransactItems": [
                {
                    "Put": {
                        "TableName": TABLE,
                        "Item": serialize_item(ORDER),
                        "ConditionExpression": "attribute_not_exists(#absent_key)",
                        "ExpressionAttributeNames": {"#absent_key": "PK"},
                    }
                },
                {
                    "Put": {
                        "TableName": TABLE,
                        "Item": outbox_item("ORDER#1", placed),
                        "ConditionExpression": "attribute_not_exists(#outbox_sk)",
                        "ExpressionAttributeNames": {"#outbox_sk": "SK"},
                    }
                },
                {"ConditionCheck": {"TableName": TABLE, **check["ConditionCheck"]}},
                {"Update": {"TableName": TABLE, **bump["Update"]}},
            ],
            "ClientRequestToken": "retry-token-1",
        },
    )

    # WHEN the write is made
    writer.write(
        ORDER,
        placed,
        condition=Condition.item_absent(),
        extra_actions=[check, bump],
        client_request_token="retry-token-1",
    )

    # THEN exactly that valid request was sent
    stubber.assert_no_pending_responses()


def cancel(stubber: Stubber, codes: list[str | None], message: str = "") -> None:
    reasons = [
        {"Code": code, "Message": f"{code} happened"} if code else {"Code": "None"}
        for code in codes
    ]
    stubber.add_client_error(
        "transact_write_items",
        service_error_code="TransactionCanceledException",
        service_message=message or "Transaction cancelled, please refer cancellation reasons",
        modeled_fields={"CancellationReasons": reasons},
    )


def test_transaction_conflict_is_reported_on_the_action_that_caused_it(real_client: Any) -> None:
    # GIVEN DynamoDB cancels because another transaction touched the outbox item
    writer, stubber = stubbed_writer(real_client)
    placed = event()
    cancel(stubber, [None, "TransactionConflict", None])

    # WHEN the write is made
    with pytest.raises(TransactionCancelled) as caught:
        writer.write(ORDER, placed, extra_actions=[delete_action({"PK": "CART#1", "SK": "META"})])

    # THEN the message and the reasons name that action, and the failure is retryable
    error = caught.value
    assert (
        f"action 1 (Put outbox event OrderPlaced PK=ORDER#1 SK=OUTBOX#{placed.id}): "
        "TransactionConflict — TransactionConflict happened" in str(error)
    )
    assert "action 0" not in str(error) and "action 2" not in str(error)
    assert [r.code for r in error.reasons] == [None, "TransactionConflict", None]
    assert [r.role for r in error.reasons] == ["entity", "event", "extra"]
    assert [r.index for r in error.failures] == [1]
    assert error.retryable is True
    assert error.conditional_check_failed is False
    assert isinstance(error.__cause__, ClientError)


def test_validation_error_is_reported_and_is_not_retryable(real_client: Any) -> None:
    writer, stubber = stubbed_writer(real_client)
    cancel(stubber, [None, None, "ValidationError"])
    bump = update_action(
        {"PK": "C#1", "SK": "S"}, "SET #n = :bad", names={"#n": "n"}, values={":bad": "x"}
    )
    with pytest.raises(
        TransactionCancelled, match=r"action 2 \(Update PK=C#1 SK=S\): ValidationError"
    ) as caught:
        writer.write(ORDER, event(), extra_actions=[bump])
    assert caught.value.retryable is False
    assert caught.value.conditional_check_failed is False


def test_conditional_check_failure_on_an_extra_action_names_it_and_keeps_the_old_item(
    client: RecordingClient,
) -> None:
    # GIVEN a cancellation whose reason carries the item returned by ALL_OLD
    old = {"PK": {"S": "CUSTOMER#7"}, "SK": {"S": "META"}, "status": {"S": "BLOCKED"}}
    client.error = client_error(
        "TransactionCanceledException",
        "TransactWriteItems",
        "Transaction cancelled",
        CancellationReasons=[
            {"Code": "None"},
            {"Code": "None"},
            {
                "Code": "ConditionalCheckFailed",
                "Message": "The conditional request failed",
                "Item": old,
            },
        ],
    )
    writer = OutboxWriter(TABLE, client)
    check = condition_check_action({"PK": "CUSTOMER#7", "SK": "META"}, Condition.item_exists())

    # WHEN the write fails
    with pytest.raises(TransactionCancelled) as caught:
        writer.write(ORDER, event(), extra_actions=[check])

    # THEN the failure is on the check, not the entity, and carries the old item
    error = caught.value
    assert error.conditional_check_failed is True
    assert [(r.index, r.role) for r in error.failures] == [(2, "extra")]
    assert error.failures[0].item == {"PK": "CUSTOMER#7", "SK": "META", "status": "BLOCKED"}
    assert "action 2 (ConditionCheck PK=CUSTOMER#7 SK=META): ConditionalCheckFailed" in str(error)


def test_cancellation_codes_are_read_from_the_message_when_reasons_are_missing(
    client: RecordingClient,
) -> None:
    client.error = client_error(
        "TransactionCanceledException",
        "TransactWriteItems",
        "Transaction cancelled, please refer cancellation reasons for specific reasons "
        "[ConditionalCheckFailed, None]",
    )
    writer = OutboxWriter(TABLE, client)
    with pytest.raises(
        TransactionCancelled,
        match=r"action 0 \(Put entity PK=ORDER#1 SK=META\): "
        "ConditionalCheckFailed",
    ) as caught:
        writer.write(ORDER, event())
    assert [r.code for r in caught.value.reasons] == ["ConditionalCheckFailed", None]


def test_reasons_that_do_not_match_the_actions_are_not_guessed(client: RecordingClient) -> None:
    client.error = client_error(
        "TransactionCanceledException",
        "TransactWriteItems",
        "cancelled",
        CancellationReasons=[{"Code": "None"}],
    )
    writer = OutboxWriter(TABLE, client)
    expected = r"1 cancellation reason.*for 2 action"
    with pytest.raises(TransactionCancelled, match=expected) as caught:
        writer.write(ORDER, event())
    assert caught.value.reasons == []


def test_token_reused_with_different_parameters_becomes_a_clear_error(real_client: Any) -> None:
    # GIVEN DynamoDB saw this token for another request in the last 10 minutes
    writer, stubber = stubbed_writer(real_client)
    stubber.add_client_error(
        "transact_write_items",
        service_error_code="IdempotentParameterMismatchException",
        service_message="Request parameters do not match",
    )

    # WHEN/THEN the error says the token was reused with different parameters
    with pytest.raises(
        IdempotentParameterMismatch, match=r"token was already used .* different parameters"
    ) as caught:
        writer.write(ORDER, event(), client_request_token="order-1")
    assert isinstance(caught.value.__cause__, ClientError)


def test_token_still_in_progress_becomes_a_clear_error(client: RecordingClient) -> None:
    client.error = client_error(
        "TransactionInProgressException", "TransactWriteItems", "in progress"
    )
    writer = OutboxWriter(TABLE, client)
    with pytest.raises(TransactionInProgress, match="still in progress"):
        writer.write(ORDER, event(), client_request_token="order-1")


def test_other_aws_errors_propagate_unchanged(client: RecordingClient) -> None:
    # Throttling, missing table, access denied...: the caller's usual handling applies.
    original = client_error(
        "ResourceNotFoundException", "TransactWriteItems", "Requested resource not found"
    )
    client.error = original
    writer = OutboxWriter(TABLE, client)
    with pytest.raises(ClientError) as caught:
        writer.write(ORDER, event())
    assert caught.value is original
    assert caught.value.__cause__ is None


def test_every_writer_error_shares_one_base_and_refusals_are_value_errors() -> None:
    for error in (
        NoEvents,
        DuplicateItemInTransaction,
        TooManyActions,
        TransactionTooLarge,
        ItemTooLarge,
        LimitExceeded,
    ):
        assert issubclass(error, InvalidWrite)
        assert issubclass(error, ValueError)
    for aws_error in (
        InvalidWrite,
        TransactionCancelled,
        IdempotentParameterMismatch,
        TransactionInProgress,
    ):
        assert issubclass(aws_error, OutboxWriteError)
    assert not issubclass(TransactionCancelled, ValueError)


# --------------------------------------------------------------------- packaging


def test_importing_the_writer_loads_no_heavy_dependency() -> None:
    # The writer ships in the layer for application code: stdlib, boto3/botocore and
    # the envelope module only (no Powertools, no moto, no pydantic).
    code = (
        "import sys, json, dynamodb_outbox.writer\n"
        "heavy = ('aws_lambda_powertools', 'moto', 'pydantic', 'mypy_boto3', 'requests')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(output) == []


# ------------------------------------------------------------------------ settings


def test_a_writer_from_the_modules_writer_environment_has_its_table_keys_and_sink() -> None:
    writer = OutboxWriter.from_environment(
        {
            "OUTBOX_TABLE_NAME": "orders-outbox",
            "OUTBOX_PARTITION_KEY": "pk",
            "OUTBOX_SORT_KEY": "sk",
            "OUTBOX_PUBLISH_TO": "sns_fifo",
        },
        RecordingClient(),
    )

    assert writer.table_name == "orders-outbox"
    assert writer.table_keys.names == ("pk", "sk")
    assert writer.sink_rules is rules_for("sns_fifo")


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({}, "OUTBOX_TABLE_NAME"),
        ({"OUTBOX_TABLE_NAME": "t", "OUTBOX_PUBLISH_TO": "kinesis"}, "kinesis"),
        ({"OUTBOX_TABLE_NAME": "t", "OUTBOX_PARTITION_KEY": "envelope"}, "OUTBOX_PARTITION_KEY"),
    ],
)
def test_a_writer_environment_missing_or_wrong_is_refused_naming_it(
    environ: dict[str, str], named: str
) -> None:
    with pytest.raises(InvalidWrite, match=named):
        OutboxWriter.from_environment(environ, RecordingClient())
