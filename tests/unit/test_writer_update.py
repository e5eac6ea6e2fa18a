"""``OutboxWriter.update``: an entity changed in place with its events, and the old item on failure.

AWS is botocore's Stubber, so every request must also match the real API model.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.writer import (
    Condition,
    DuplicateItemInTransaction,
    InvalidWrite,
    NoEvents,
    OutboxWriter,
    TransactionCancelled,
    condition_check_action,
    delete_action,
    put_action,
    update_action,
)

TABLE = "orders"
KEY = {"PK": "ORDER#1", "SK": "META"}
PLACED = Condition("#status = :placed", {"#status": "status"}, {":placed": "PLACED"})


@pytest.fixture
def stubbed() -> Iterator[tuple[OutboxWriter, Stubber]]:
    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    with Stubber(client) as stubber:
        yield OutboxWriter(TABLE, client, source="shop.orders"), stubber


def paid_event() -> Envelope:
    return Envelope(type="OrderPaid", source="shop.orders", subject="ORDER#1", data={})


def test_update_sends_the_entity_update_first_then_its_events(
    stubbed: tuple[OutboxWriter, Stubber],
) -> None:
    # GIVEN the request DynamoDB must receive: the Update (with ALL_OLD) then the outbox Put
    writer, stubber = stubbed
    event = paid_event()
    update = {
        "TableName": TABLE,
        "Key": {"PK": {"S": "ORDER#1"}, "SK": {"S": "META"}},
        "UpdateExpression": "SET #status = :paid",
        "ConditionExpression": "#status = :placed",
        "ExpressionAttributeNames": {"#status": "status"},
        "ExpressionAttributeValues": {":paid": {"S": "PAID"}, ":placed": {"S": "PLACED"}},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    stubber.add_response(
        "transact_write_items",
        {},
        {"TransactItems": [{"Update": update}, {"Put": ANY}], "ClientRequestToken": "pay-1"},
    )

    # WHEN the order is paid on condition, asking for the old item on failure
    result = writer.update(
        KEY,
        "SET #status = :paid",
        event,
        values={":paid": "PAID"},
        condition=Condition(PLACED.expression, PLACED.names, PLACED.values, return_old_item=True),
        client_request_token="pay-1",
    )

    # THEN exactly that request was sent and valid for the API model
    stubber.assert_no_pending_responses()
    assert result.event_ids == (event.id,) and result.action_count == 2


def test_return_old_item_reaches_every_action_builder_and_only_when_asked() -> None:
    asked = Condition("attribute_exists(PK)", return_old_item=True)
    built = [
        condition_check_action(KEY, asked),
        update_action(KEY, "SET n = :n", values={":n": 1}, condition=asked),
        delete_action(KEY, condition=asked),
        put_action(KEY, condition=asked),
    ]
    assert [
        body["ReturnValuesOnConditionCheckFailure"] for action in built for body in action.values()
    ] == ["ALL_OLD"] * 4
    plain = update_action(KEY, "SET n = :n", values={":n": 1}, condition=PLACED)
    assert "ReturnValuesOnConditionCheckFailure" not in plain["Update"]
    assert "ReturnValuesOnConditionCheckFailure" not in Condition.item_absent().to_request()


def test_a_failed_update_names_the_entity_and_gives_its_old_item_in_plain_python(
    stubbed: tuple[OutboxWriter, Stubber],
) -> None:
    # GIVEN DynamoDB cancels on the Update's condition and returns the item (ALL_OLD)
    writer, stubber = stubbed
    old = {
        "PK": {"S": "ORDER#1"},
        "SK": {"S": "META"},
        "status": {"S": "PAID"},
        "total": {"N": "42.50"},
        "lines": {"L": [{"M": {"sku": {"S": "A-1"}, "qty": {"N": "2"}}}]},
        "digest": {"B": b"\x01\x02"},
        "flags": {"SS": ["gift"]},
        "note": {"NULL": True},
    }
    stubber.add_client_error(
        "transact_write_items",
        service_error_code="TransactionCanceledException",
        service_message="Transaction cancelled",
        modeled_fields={
            "CancellationReasons": [
                {"Code": "ConditionalCheckFailed", "Message": "failed", "Item": old},
                {"Code": "None"},
            ]
        },
    )

    # WHEN the write fails
    with pytest.raises(TransactionCancelled) as caught:
        writer.update(
            KEY, "SET #status = :paid", paid_event(), values={":paid": "PAID"}, condition=PLACED
        )

    # THEN the reason is on the entity's Update and its item reads like a Table resource's
    (failure,) = caught.value.failures
    assert (failure.index, failure.role, failure.label) == (
        0,
        "entity",
        "Update entity PK=ORDER#1 SK=META",
    )
    assert failure.item == {
        "PK": "ORDER#1",
        "SK": "META",
        "status": "PAID",
        "total": Decimal("42.50"),
        "lines": [{"sku": "A-1", "qty": Decimal("2")}],
        "digest": b"\x01\x02",
        "flags": {"gift"},
        "note": None,
    }
    assert type(failure.item["digest"]) is bytes
    assert "action 0 (Update entity PK=ORDER#1 SK=META): ConditionalCheckFailed" in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ({"PK": "ORDER#1"}, "exactly PK and SK"),
        ({"PK": "ORDER#1", "SK": "META", "status": "X"}, "exactly PK and SK"),
        ({"PK": "", "SK": "META"}, "non-empty string PK"),
        ({"PK": "ORDER#1", "SK": 7}, "non-empty string SK"),
        ({"PK": "ORDER#1", "SK": "OUTBOX#01H"}, "reserved for outbox items"),
    ],
)
def test_update_refuses_a_key_that_is_not_an_entity_key_before_calling_aws(
    stubbed: tuple[OutboxWriter, Stubber], key: dict[str, Any], message: str
) -> None:
    writer, stubber = stubbed
    with pytest.raises(InvalidWrite, match=message):
        writer.update(key, "SET n = :n", paid_event(), values={":n": 1})
    stubber.assert_no_pending_responses()


def test_update_refuses_no_event_an_empty_expression_and_a_second_action_on_the_entity(
    stubbed: tuple[OutboxWriter, Stubber],
) -> None:
    writer, _ = stubbed
    with pytest.raises(NoEvents):
        writer.update(KEY, "SET n = :n", [], values={":n": 1})
    with pytest.raises(InvalidWrite, match="non-empty update_expression"):
        writer.update(KEY, " ", paid_event())
    with pytest.raises(DuplicateItemInTransaction, match=r"action 2 .* and action 0"):
        writer.update(
            KEY, "SET n = :n", paid_event(), values={":n": 1}, extra_actions=[delete_action(KEY)]
        )
