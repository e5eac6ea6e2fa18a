"""Billing: one queue carrying OrderCreated and OrderPaid, routed by type to typed models."""

from __future__ import annotations

import os
from datetime import datetime
from decimal import Decimal
from uuid import UUID

from pydantic import BaseModel

from dynamodb_outbox import Envelope, OutboxConsumer, Router


class OrderLine(BaseModel):
    sku: str
    quantity: int
    price: Decimal


class OrderCreated(BaseModel):
    order_id: str
    customer_id: UUID
    total: Decimal
    lines: list[OrderLine]
    placed_at: datetime


class OrderPaid(BaseModel):
    order_id: str
    amount: Decimal
    paid_at: datetime


#: What billing did, in order (a real service writes to its own store).
ledger: list[tuple[str, str, Decimal]] = []

consumer = OutboxConsumer(
    idempotency_table=os.environ["OUTBOX_IDEMPOTENCY_TABLE"], parse_float=Decimal
)
router = Router()


@router.on("OrderCreated", model=OrderCreated)
def invoice(event: Envelope, order: OrderCreated) -> None:
    ledger.append(("invoiced", order.order_id, order.total))


@router.on("OrderPaid", model=OrderPaid)
def settle(event: Envelope, payment: OrderPaid) -> None:
    if payment.amount <= 0:
        raise ValueError(f"payment of {payment.amount} for order {payment.order_id}")
    ledger.append(("settled", payment.order_id, payment.amount))


handler = consumer.handler(router)
