"""Create an order, then pay it: two events of one order, which consumers get in order.

Usage: python producer.py ORDER_ID [TABLE]   (default table: the example's `orders-fifo`)

Each event carries the order's new version as its `sequence`, written in the
same transaction as the change, on a condition on the version before: sequence
order is commit order, and a consumer can tell a gap or a reordering.
"""

from __future__ import annotations

import sys

from dynamodb_outbox.writer import Condition, OutboxWriter

order_id = sys.argv[1]
table = sys.argv[2] if len(sys.argv) > 2 else "orders-fifo"

# publish_to: the module's setting, so the writer applies the FIFO topic's rules.
writer = OutboxWriter(table_name=table, source="shop.orders", publish_to="sns_fifo")

order = {"PK": f"ORDER#{order_id}", "SK": "META", "total": 42, "status": "NEW", "version": 1}
created = writer.new_event(order, "OrderCreated", {"order_id": order_id, "total": 42}, sequence=1)
writer.write(order, created, condition=Condition.item_absent())

paid = writer.new_event(order["PK"], "OrderPaid", {"order_id": order_id}, sequence=2)
writer.update(
    {"PK": order["PK"], "SK": "META"},
    "SET #status = :paid, #version = :next",
    paid,
    names={"#status": "status", "#version": "version"},
    values={":paid": "PAID", ":next": 2},
    condition=Condition("#version = :current", {"#version": "version"}, {":current": 1}),
)
print("committed", created.id, "then", paid.id)
