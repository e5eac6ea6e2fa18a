from __future__ import annotations

from decimal import Decimal
from uuid import UUID

from orders_service.api import orders_writer, pay_order, place_order

from dynamodb_outbox.testing import OutboxStack


def test_a_paid_order_is_shipped_once_by_the_async_consumer(stack: OutboxStack) -> None:
    queue = stack.add_consumer(
        "shipping", "orders_service.shipping:handler", event_pattern={"detail-type": ["OrderPaid"]}
    )
    from orders_service import shipping

    writer = orders_writer()
    order_id = place_order(writer, UUID(int=2), [{"sku": "cup", "quantity": 1, "price": "3"}])[1][
        "order_id"
    ]
    pay_order(writer, order_id, Decimal("3"), version=1)
    stack.drain()

    stack.raise_failures()
    assert shipping.shipped == [f"parcel-{order_id}"]
    assert queue.dead_letters() == []
