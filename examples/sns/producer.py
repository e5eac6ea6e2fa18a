"""Write one order with its OrderCreated event in one transaction.

Usage: python producer.py ORDER_ID [TABLE]   (default table: the example's `orders-outbox`)
"""

from __future__ import annotations

import sys

from dynamodb_outbox.writer import Condition, OutboxWriter

order_id = sys.argv[1]
table = sys.argv[2] if len(sys.argv) > 2 else "orders-outbox"

writer = OutboxWriter(table_name=table, source="shop.orders")
order = {"PK": f"ORDER#{order_id}", "SK": "META", "total": 42, "status": "NEW"}
event = writer.new_event(order, "OrderCreated", {"order_id": order_id, "total": 42})
result = writer.write(order, event, condition=Condition.item_absent())  # one TransactWriteItems
print("committed", result.event_ids[0])
