"""Write one order and its OrderCreated event, then wait for the audit consumer to record it.

Usage: python producer.py ORDER_ID [TABLE] [IDEMPOTENCY_TABLE]
(defaults: the example's `orders` and `orders-outbox-idempotency`).
"""

from __future__ import annotations

import sys
import time

import boto3

from dynamodb_outbox.ledger import read_ledger
from dynamodb_outbox.writer import Condition, OutboxWriter

order_id = sys.argv[1]
table = sys.argv[2] if len(sys.argv) > 2 else "orders"
idempotency_table = sys.argv[3] if len(sys.argv) > 3 else "orders-outbox-idempotency"

# The table is keyed pk/sk: the writer is told so, as the module is (main.tf).
writer = OutboxWriter(table_name=table, source="shop.orders", partition_key="pk", sort_key="sk")
order = {"pk": f"ORDER#{order_id}", "sk": "META", "total": 42, "status": "NEW"}
event = writer.new_event(order, "OrderCreated", {"order_id": order_id, "total": 42})
result = writer.write(order, event, condition=Condition.item_absent("pk"))
print("committed", result.event_ids[0])

# The reference consumer `audit` records each event it processes in a ledger.
client = boto3.client("dynamodb")
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    ledger = read_ledger(client, idempotency_table, "audit")
    entries = [entry for entry in ledger if entry["event_id"] == event.id]
    if entries:
        print("processed by audit, times_processed =", entries[0]["times_processed"])
        break
    time.sleep(5)
else:
    sys.exit("not processed within 120 s: look at the publisher's and the consumer's logs")
