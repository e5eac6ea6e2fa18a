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
    # Log the event's id and type, never its data: order fields are business
    # data, and logs are read more widely than the queue.
    if event.type == "OrderCreated":
        consumer.logger.info("charging order", extra={"event_id": event.id})
    elif event.type == "OrderCancelled":
        consumer.logger.info("refunding order", extra={"event_id": event.id})
