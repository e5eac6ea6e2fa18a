from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from uuid import UUID

import boto3
from botocore.exceptions import ClientError
from orders_service.api import orders_writer, pay_order, place_order, response_for

from dynamodb_outbox.testing import OutboxStack

CUSTOMER = UUID("6f1c1c3e-58e4-4b39-9d3c-1f2a5e0b7a10")
LINES = [{"sku": "tea", "quantity": 2, "price": Decimal("4.25")}]


def test_placing_an_order_stores_it_with_its_event(stack: OutboxStack) -> None:
    status, body = place_order(orders_writer(), CUSTOMER, LINES)

    assert status == 201
    table = boto3.resource("dynamodb").Table(stack.names.table)
    order = table.get_item(Key={"pk": f"ORDER#{body['order_id']}", "sk": "META"})["Item"]
    assert (order["total"], order["customer_id"]) == (Decimal("8.50"), str(CUSTOMER))
    assert datetime.fromisoformat(str(order["placed_at"])).tzinfo is not None


def test_paying_twice_answers_409_with_the_status(stack: OutboxStack) -> None:
    writer = orders_writer()
    order_id = place_order(writer, CUSTOMER, LINES)[1]["order_id"]

    assert pay_order(writer, order_id, Decimal("8.50"), version=1)[0] == 200
    assert pay_order(writer, order_id, Decimal("8.50"), version=1) == (
        409,
        {"error": "order changed", "status": "PAID"},
    )


def test_paying_an_unknown_order_answers_404(stack: OutboxStack) -> None:
    assert pay_order(orders_writer(), "missing", Decimal("1"), version=1)[0] == 404


def test_a_naive_datetime_answers_400_naming_the_value(stack: OutboxStack) -> None:
    lines = [{**LINES[0], "promised_for": datetime(2030, 1, 1)}]

    status, body = place_order(orders_writer(), CUSTOMER, lines)

    assert status == 400
    assert "naive datetime" in body["error"]


def test_a_throttled_write_answers_503() -> None:
    throttled = ClientError({"Error": {"Code": "ThrottlingException"}}, "TransactWriteItems")

    assert response_for(throttled) == (503, {"error": "try again"})
