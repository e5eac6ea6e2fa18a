from __future__ import annotations

from decimal import Decimal
from uuid import UUID

import pytest
from orders_service.api import orders_writer, pay_order, place_order

from dynamodb_outbox import UnroutedEvent
from dynamodb_outbox.testing import OutboxStack

BILLING = "orders_service.billing:handler"
LINES = [{"sku": "tea", "quantity": 2, "price": Decimal("4.25")}]


def test_an_order_is_invoiced_then_settled_in_exact_money(stack: OutboxStack) -> None:
    stack.add_consumer("billing", BILLING, event_pattern={"source": ["shop.orders"]})
    from orders_service import billing

    writer = orders_writer()
    order_id = place_order(writer, UUID(int=1), LINES)[1]["order_id"]
    pay_order(writer, order_id, Decimal("8.50"), version=1)
    stack.drain()

    stack.raise_failures()
    assert billing.ledger == [
        ("invoiced", order_id, Decimal("8.50")),
        ("settled", order_id, Decimal("8.50")),
    ]


def test_a_payment_billing_refuses_fails_with_its_reason(stack: OutboxStack) -> None:
    queue = stack.add_consumer("billing", BILLING, event_pattern={"detail-type": ["OrderPaid"]})

    pay = orders_writer()
    pay.write_events("ORDER#9", [pay.new_event("ORDER#9", "OrderPaid", _paid("9", "0"))])
    stack.drain()

    assert {type(failure.exception) for failure in stack.failures} == {ValueError}
    assert "payment of 0 for order 9" in str(stack.failures[0].exception)
    assert [event.type for event in queue.dead_events()] == ["OrderPaid"]


def test_a_type_billing_has_no_route_for_ends_in_the_dlq(stack: OutboxStack) -> None:
    queue = stack.add_consumer("billing", BILLING, event_pattern={"source": ["shop.orders"]})

    writer = orders_writer()
    writer.write_events("ORDER#5", [writer.new_event("ORDER#5", "OrderShipped", {"id": "5"})])
    stack.drain()

    assert isinstance(stack.failures[0].exception, UnroutedEvent)
    assert [event.type for event in queue.dead_events()] == ["OrderShipped"]
    with pytest.raises(AssertionError, match="no route for event type 'OrderShipped'"):
        stack.raise_failures()


def _paid(order_id: str, amount: str) -> dict[str, object]:
    return {"order_id": order_id, "amount": Decimal(amount), "paid_at": "2030-01-01T00:00:00Z"}
