"""The producer: orders placed and paid, each change and its event in one transaction.

The functions return ``(HTTP status, body)`` as a web handler would answer;
``response_for`` maps the writer's errors to statuses (docs/python.md's table).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID, uuid4

from dynamodb_outbox import (
    Condition,
    IdempotentParameterMismatch,
    InvalidEnvelope,
    InvalidWrite,
    OutboxWriter,
    PayloadNotEncodable,
    TransactionCancelled,
    is_retryable,
)

Response = tuple[int, dict[str, Any]]


def orders_writer() -> OutboxWriter:
    # The table is keyed pk/sk: the module's table.partition_key / sort_key.
    table = os.environ["ORDERS_TABLE"]
    return OutboxWriter(table, source="shop.orders", partition_key="pk", sort_key="sk")


def response_for(error: Exception) -> Response:
    """The HTTP answer to an error the writer raised."""
    if is_retryable(error):  # throttled, a conflicting transaction, a timeout
        return 503, {"error": "try again"}
    if isinstance(error, TransactionCancelled) and error.conditional_check_failed:
        current = error.reasons[0].item  # the order as it was, when the condition failed
        if current is None:
            return 404, {"error": "no such order"}
        return 409, {"error": "order changed", "status": current["status"]}
    if isinstance(error, InvalidWrite | PayloadNotEncodable | InvalidEnvelope):
        return 400, {"error": str(error)}
    if isinstance(error, IdempotentParameterMismatch):
        return 422, {"error": "idempotency key reused for another request"}
    raise error  # a deployment fault: 500


def place_order(writer: OutboxWriter, customer_id: UUID, lines: list[dict[str, Any]]) -> Response:
    order_id = str(uuid4())
    total = sum((Decimal(line["price"]) * line["quantity"] for line in lines), Decimal("0"))
    placed_at = datetime.now(UTC)
    order = {
        "pk": f"ORDER#{order_id}",
        "sk": "META",
        "customer_id": customer_id,
        "lines": lines,
        "total": total,
        "status": "NEW",
        "version": 1,
        "placed_at": placed_at,
    }
    data = {"order_id": order_id, "customer_id": customer_id, "total": total, "lines": lines}
    try:
        event = writer.new_event(order, "OrderCreated", {**data, "placed_at": placed_at})
        writer.write(order, event, condition=Condition.item_absent("pk", return_old_item=True))
    except Exception as error:
        return response_for(error)
    return 201, {"order_id": order_id, "event_id": event.id}


def pay_order(writer: OutboxWriter, order_id: str, amount: Decimal, version: int) -> Response:
    key = {"pk": f"ORDER#{order_id}", "sk": "META"}
    paid_at = datetime.now(UTC)
    event = writer.new_event(
        key["pk"], "OrderPaid", {"order_id": order_id, "amount": amount, "paid_at": paid_at}
    )
    unchanged = Condition(
        "#status = :new AND #version = :version",
        {"#status": "status", "#version": "version"},
        {":new": "NEW", ":version": version},
        return_old_item=True,
    )
    try:
        writer.update(
            key,
            "SET #status = :paid, paid_amount = :amount, paid_at = :at, #version = :next",
            event,
            values={":paid": "PAID", ":amount": amount, ":at": paid_at, ":next": version + 1},
            condition=unchanged,
        )
    except Exception as error:
        return response_for(error)
    return 200, {"order_id": order_id, "version": version + 1}
