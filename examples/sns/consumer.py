"""The billing function: consumes OrderCreated / OrderCancelled from its queue.

Deployed by main.tf as `orders-outbox-billing` (handler `consumer.handler`), with
dynamodb_outbox from the module's layer and Powertools from its public layer.
"""

from __future__ import annotations

import os

from dynamodb_outbox.consumer import OutboxConsumer
from dynamodb_outbox.envelope import Envelope

# Idempotency records are scoped to this consumer's name (env OUTBOX_CONSUMER_NAME).
consumer = OutboxConsumer(idempotency_table=os.environ["OUTBOX_IDEMPOTENCY_TABLE"])


@consumer.handler
def handler(event: Envelope) -> None:
    """Runs once per event id; raising fails only this message (retried, then its DLQ)."""
    if event.type == "OrderCreated":
        print(f"charge order {event.data['order_id']}: {event.data['total']}")
    elif event.type == "OrderCancelled":
        print(f"refund order {event.data['order_id']}")
