"""The shipping function: one order's events, in order, from its FIFO queue.

Deployed by main.tf as `orders-fifo-shipping` (handler `consumer.handler`), with
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
    """Runs once per event id, each order's events in their `sequence` order.

    Raising fails this message and holds the later messages of its order (its
    message group) in the queue until it succeeds or reaches the DLQ; other
    orders in the batch carry on.
    """
    # Log the event's id, type and place, never its data: order fields are
    # business data, and logs are read more widely than the queue.
    extra = {"event_id": event.id, "subject": event.subject, "sequence": event.sequence}
    if event.type == "OrderPaid":
        consumer.logger.info("shipping order", extra=extra)
    else:
        consumer.logger.info("noted", extra={**extra, "event_type": event.type})
