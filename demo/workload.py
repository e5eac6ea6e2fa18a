"""The demo's workload: orders, each created with its ``OrderCreated`` event in one transaction."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dynamodb_outbox.writer import Condition, OutboxWriter

EVENT_TYPE = "OrderCreated"
ENTITY_SK = "META"


@dataclass(frozen=True)
class Order:
    """An order the writer committed, and the id of the event announcing it."""

    number: int
    pk: str
    event_id: str


def order_pk(number: int) -> str:
    return f"ORDER#{number:05d}"


def write_orders(writer: OutboxWriter, numbers: Iterable[int], *, source: str) -> list[Order]:
    """``PK=ORDER#<n>, SK=META`` plus one ``OrderCreated`` event each, create-only."""
    orders: list[Order] = []
    for number in numbers:
        total_cents = 1_000 + (number * 7_919) % 90_000
        entity = {
            "PK": order_pk(number),
            "SK": ENTITY_SK,
            "status": "CREATED",
            "customer": f"CUSTOMER#{number % 17:03d}",
            "total_cents": total_cents,
        }
        event = writer.new_event(
            entity,
            EVENT_TYPE,
            {"order_id": f"{number:05d}", "total_cents": total_cents, "currency": "EUR"},
            source=source,
        )
        result = writer.write(entity, event, condition=Condition.item_absent())
        orders.append(Order(number=number, pk=result.pk, event_id=result.event_ids[0]))
    return orders
