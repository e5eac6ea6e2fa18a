"""Shipping: an async consumer of OrderPaid (it awaits its carrier's API)."""

from __future__ import annotations

import asyncio
import os
from decimal import Decimal

from pydantic import BaseModel

from dynamodb_outbox import Envelope, OutboxConsumer


class OrderPaid(BaseModel):
    order_id: str
    amount: Decimal


shipped: list[str] = []

consumer = OutboxConsumer(idempotency_table=os.environ["OUTBOX_IDEMPOTENCY_TABLE"])


async def book_carrier(order_id: str) -> str:
    await asyncio.sleep(0)  # the carrier's API call
    return f"parcel-{order_id}"


@consumer.handler(model=OrderPaid)
async def handler(event: Envelope, payment: OrderPaid) -> None:
    shipped.append(await book_carrier(payment.order_id))
