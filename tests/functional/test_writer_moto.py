"""The writer against moto's DynamoDB: atomicity, cancellation reasons, stream records.

Fixtures live in this file (not a shared conftest) and carry a ``writer_``
prefix so they cannot shadow fixtures of other functional tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import boto3
import pytest
from boto3.dynamodb.types import TypeDeserializer
from moto import mock_aws

from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.event_ids import event_id_for
from dynamodb_outbox.outbox_item import OUTBOX_SK_PREFIX, STATUS_PENDING, outbox_sk
from dynamodb_outbox.writer import (
    Condition,
    OutboxWriter,
    TransactionCancelled,
    condition_check_action,
    update_action,
)
from tests.support.moto_tables import create_outbox_table

TABLE = "writer-outbox-test"
ORDER = {"PK": "ORDER#1001", "SK": "META", "status": "PLACED", "total": Decimal("42.50")}
CUSTOMER_KEY = {"PK": "CUSTOMER#7", "SK": "META"}

_deserializer = TypeDeserializer()


@pytest.fixture
def writer_aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and the settings moto needs in-process (streams 404 without them)."""
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def writer_dynamodb(writer_aws_env: None) -> Iterator[Any]:
    """A moto DynamoDB client with the outbox table."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_outbox_table(client, TABLE)
        yield client


@pytest.fixture
def writer_under_test(writer_dynamodb: Any) -> OutboxWriter:
    return OutboxWriter(TABLE, writer_dynamodb, source="shop.orders")


def all_items(client: Any) -> list[dict[str, Any]]:
    items = client.scan(TableName=TABLE, ConsistentRead=True)["Items"]
    return sorted(
        ({k: _deserializer.deserialize(v) for k, v in item.items()} for item in items),
        key=lambda item: (item["PK"], item["SK"]),
    )


def outbox_items(client: Any) -> list[dict[str, Any]]:
    return [item for item in all_items(client) if item["SK"].startswith(OUTBOX_SK_PREFIX)]


def stream_records(client: Any) -> list[dict[str, Any]]:
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    arn = client.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records.extend(streams.get_records(ShardIterator=iterator)["Records"])
    return records


def test_entity_and_its_outbox_item_are_committed_together(
    writer_under_test: OutboxWriter, writer_dynamodb: Any
) -> None:
    # GIVEN a new order and its event
    placed = writer_under_test.new_event(ORDER, "OrderPlaced", {"order_id": "1001", "total": 42.5})

    # WHEN they are written
    result = writer_under_test.write(ORDER, placed, condition=Condition.item_absent())

    # THEN the table holds the order and one pending outbox item in the order's partition
    items = all_items(writer_dynamodb)
    assert [(item["PK"], item["SK"]) for item in items] == [
        ("ORDER#1001", "META"),
        ("ORDER#1001", "OUTBOX#" + placed.id),
    ]
    assert items[0] == ORDER
    outbox = items[1]
    assert outbox["outbox_status"] == STATUS_PENDING
    assert outbox["event_type"] == "OrderPlaced"
    assert Envelope.from_json(outbox["envelope"]) == placed
    assert result.event_ids == (placed.id,)
    assert result.outbox_sks == (outbox["SK"],)


def test_outbox_item_reaches_the_stream_as_an_insert_carrying_the_envelope(
    writer_under_test: OutboxWriter, writer_dynamodb: Any
) -> None:
    # GIVEN/WHEN an order is written with its event
    placed = writer_under_test.new_event(ORDER, "OrderPlaced", {"order_id": "1001"})
    writer_under_test.write(ORDER, placed)

    # THEN the stream has an INSERT for the outbox item whose new image holds the envelope,
    # which is what the publisher's filter (INSERT, SK prefix OUTBOX#) selects
    records = stream_records(writer_dynamodb)
    outbox = [
        record
        for record in records
        if record["dynamodb"]["Keys"]["SK"]["S"].startswith(OUTBOX_SK_PREFIX)
    ]
    assert len(outbox) == 1
    assert outbox[0]["eventName"] == "INSERT"
    image = outbox[0]["dynamodb"]["NewImage"]
    assert Envelope.from_json(image["envelope"]["S"]) == placed


def test_creating_an_existing_entity_is_cancelled_naming_the_entity_put(
    writer_under_test: OutboxWriter, writer_dynamodb: Any
) -> None:
    # GIVEN the order already exists with its first event
    first = writer_under_test.new_event(ORDER, "OrderPlaced", {})
    writer_under_test.write(ORDER, first, condition=Condition.item_absent())

    # WHEN the same order is created again with a new event
    second = writer_under_test.new_event(ORDER, "OrderPlaced", {})
    changed = {**ORDER, "status": "CHANGED"}
    with pytest.raises(TransactionCancelled) as caught:
        writer_under_test.write(changed, second, condition=Condition.item_absent())

    # THEN the error names the entity Put as the cause...
    error = caught.value
    assert error.conditional_check_failed is True
    assert "action 0 (Put entity PK=ORDER#1001 SK=META): ConditionalCheckFailed" in str(error)
    assert [(r.index, r.role, r.code) for r in error.reasons] == [
        (0, "entity", "ConditionalCheckFailed"),
        (1, "event", None),
    ]
    # ...and nothing of the second write exists: no overwrite, no second event
    assert all_items(writer_dynamodb)[0]["status"] == "PLACED"
    assert [item["SK"] for item in outbox_items(writer_dynamodb)] == [outbox_sk(first.id)]


def test_failed_extra_condition_check_leaves_neither_entity_nor_outbox_item(
    writer_under_test: OutboxWriter, writer_dynamodb: Any
) -> None:
    # GIVEN a blocked customer
    writer_dynamodb.put_item(
        TableName=TABLE,
        Item={"PK": {"S": "CUSTOMER#7"}, "SK": {"S": "META"}, "status": {"S": "BLOCKED"}},
    )
    before = all_items(writer_dynamodb)

    # WHEN an order is written on condition that the customer is active
    active = condition_check_action(
        CUSTOMER_KEY, Condition("#s = :active", {"#s": "status"}, {":active": "ACTIVE"})
    )
    placed = writer_under_test.new_event(ORDER, "OrderPlaced", {})
    with pytest.raises(TransactionCancelled) as caught:
        writer_under_test.write(ORDER, placed, extra_actions=[active])

    # THEN the check is named as the cause and the table is exactly as before
    error = caught.value
    assert [(r.index, r.role) for r in error.failures] == [(2, "extra")]
    assert "action 2 (ConditionCheck PK=CUSTOMER#7 SK=META): ConditionalCheckFailed" in str(error)
    assert all_items(writer_dynamodb) == before
    assert outbox_items(writer_dynamodb) == []


def test_extra_update_commits_with_the_entity_and_its_event(
    writer_under_test: OutboxWriter, writer_dynamodb: Any
) -> None:
    # GIVEN an active customer with an order counter
    writer_dynamodb.put_item(
        TableName=TABLE,
        Item={
            "PK": {"S": "CUSTOMER#7"},
            "SK": {"S": "META"},
            "status": {"S": "ACTIVE"},
            "orders": {"N": "4"},
        },
    )

    # WHEN an order is written with an Update that bumps the counter if the customer is active
    bump = update_action(
        CUSTOMER_KEY,
        "SET #orders = #orders + :one",
        names={"#orders": "orders"},
        values={":one": 1},
        condition=Condition("#status = :active", {"#status": "status"}, {":active": "ACTIVE"}),
    )
    placed = writer_under_test.new_event(ORDER, "OrderPlaced", {})
    writer_under_test.write(ORDER, placed, extra_actions=[bump], client_request_token="order-1001")

    # THEN all three changes are there
    items = {(item["PK"], item["SK"]): item for item in all_items(writer_dynamodb)}
    assert items[("CUSTOMER#7", "META")]["orders"] == 5
    assert ("ORDER#1001", "META") in items
    assert ("ORDER#1001", outbox_sk(placed.id)) in items


def test_write_events_adds_events_to_an_entity_changed_by_an_update(
    writer_under_test: OutboxWriter, writer_dynamodb: Any
) -> None:
    # GIVEN an existing order
    writer_under_test.write(ORDER, writer_under_test.new_event(ORDER, "OrderPlaced", {}))

    # WHEN it is shipped through an Update plus an event, without rewriting the entity
    ship = update_action(
        {"PK": "ORDER#1001", "SK": "META"},
        "SET #s = :shipped",
        names={"#s": "status"},
        values={":shipped": "SHIPPED"},
        condition=Condition("#s = :placed", values={":placed": "PLACED"}),
    )
    shipped = writer_under_test.new_event("ORDER#1001", "OrderShipped", {})
    writer_under_test.write_events("ORDER#1001", shipped, extra_actions=[ship])

    # THEN the order changed and a second outbox item exists
    items = all_items(writer_dynamodb)
    assert items[0]["status"] == "SHIPPED"
    assert [item["event_type"] for item in outbox_items(writer_dynamodb)].count("OrderShipped") == 1


def test_on_moto_a_retry_of_a_committed_request_is_cancelled_by_the_outbox_condition(
    writer_under_test: OutboxWriter,
) -> None:
    # moto ignores ClientRequestToken (AWS would answer the retry with success for
    # 10 minutes): the retry reaches the outbox Put's attribute_not_exists(SK) and
    # is cancelled, naming the event. Either way nothing is written twice.
    sent_at = datetime.now(UTC)
    attempts = []
    for _attempt in range(2):
        event = writer_under_test.new_event(
            ORDER, "OrderPlaced", {"n": 1}, event_id=event_id_for("key-42", sent_at)
        )
        attempts.append(event)
        order = {**ORDER, "status": "PLACED"}
        try:
            writer_under_test.write(order, event, client_request_token=event.id)
        except TransactionCancelled as cancelled:
            failures = [(reason.role, reason.code) for reason in cancelled.failures]
    assert failures == [("event", "ConditionalCheckFailed")]
    assert attempts[0].to_json() == attempts[1].to_json()
    assert len(outbox_items(writer_under_test.client)) == 1


# ------------------------------------------------------- change an entity, emit an event

PAID = Condition("#status = :placed", {"#status": "status"}, {":placed": "PLACED"})


def pay(writer: OutboxWriter, condition: Condition) -> Envelope:
    paid = writer.new_event("ORDER#1001", "OrderPaid", {"order_id": "1001"})
    writer.update(
        {"PK": "ORDER#1001", "SK": "META"},
        "SET #status = :paid, paid_total = :total",
        paid,
        values={":paid": "PAID", ":total": Decimal("42.50")},
        condition=condition,
    )
    return paid


def test_update_changes_the_entity_and_commits_its_event(
    writer_under_test: OutboxWriter, writer_dynamodb: Any
) -> None:
    # GIVEN a placed order
    writer_under_test.write(ORDER, writer_under_test.new_event(ORDER, "OrderPlaced", {}))

    # WHEN it is paid on condition that it is still placed
    paid = pay(writer_under_test, PAID)

    # THEN the order changed in place and its event is in the outbox
    order = all_items(writer_dynamodb)[0]
    assert (order["status"], order["paid_total"], order["total"]) == (
        "PAID",
        Decimal("42.50"),
        Decimal("42.50"),
    )
    assert outbox_sk(paid.id) in [item["SK"] for item in outbox_items(writer_dynamodb)]


def test_a_failed_update_condition_returns_the_old_item_in_plain_python(
    writer_under_test: OutboxWriter, writer_dynamodb: Any
) -> None:
    # GIVEN an order already paid, with a number, binary and a set among its attributes
    order = {**ORDER, "status": "PAID", "blob": b"\x00\xff", "tags": {"gift", "rush"}}
    writer_under_test.write(order, writer_under_test.new_event(order, "OrderPlaced", {}))
    before = all_items(writer_dynamodb)

    # WHEN it is paid again, asking for the old item on a failed condition
    with pytest.raises(TransactionCancelled) as caught:
        pay(writer_under_test, Condition(PAID.expression, PAID.names, PAID.values, True))

    # THEN the entity's Update is the cause and carries the item as it was, in plain Python
    (failure,) = caught.value.failures
    assert (failure.index, failure.role, failure.code) == (0, "entity", "ConditionalCheckFailed")
    assert failure.label == "Update entity PK=ORDER#1001 SK=META"
    assert failure.item == {
        "PK": "ORDER#1001",
        "SK": "META",
        "status": "PAID",
        "total": Decimal("42.50"),
        "blob": b"\x00\xff",
        "tags": {"gift", "rush"},
    }
    assert type(failure.item["blob"]) is bytes
    # ...and nothing was written: no second event, the order unchanged
    assert all_items(writer_dynamodb) == before


def test_without_return_old_item_the_reason_carries_no_item(
    writer_under_test: OutboxWriter, writer_dynamodb: Any
) -> None:
    writer_under_test.write(
        {**ORDER, "status": "PAID"}, writer_under_test.new_event(ORDER, "X", {})
    )
    with pytest.raises(TransactionCancelled) as caught:
        pay(writer_under_test, PAID)
    assert [(r.role, r.item) for r in caught.value.failures] == [("entity", None)]


def test_create_only_can_return_the_existing_item(
    writer_under_test: OutboxWriter, writer_dynamodb: Any
) -> None:
    writer_under_test.write(ORDER, writer_under_test.new_event(ORDER, "OrderPlaced", {}))
    again = writer_under_test.new_event(ORDER, "OrderPlaced", {})
    with pytest.raises(TransactionCancelled) as caught:
        writer_under_test.write(
            {**ORDER, "status": "NEW"}, again, condition=Condition.item_absent(return_old_item=True)
        )
    (failure,) = caught.value.failures
    assert failure.role == "entity" and failure.item is not None
    assert failure.item["status"] == "PLACED"
