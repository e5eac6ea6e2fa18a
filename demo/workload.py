"""The demo's workload: orders, each created with its ``OrderCreated`` event in one transaction.

On the ordered path (``--ordering fifo``) each order is then confirmed, in a
second transaction with its ``OrderConfirmed`` event, once every order exists:
two events per subject, the second written after the first, interleaved with
the other orders' events, so that "order per subject" has something to hold.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from dynamodb_outbox.writer import Condition, OutboxWriter

EVENT_TYPE = "OrderCreated"
FOLLOW_UP_EVENT_TYPE = "OrderConfirmed"
ENTITY_SK = "META"


@dataclass(frozen=True)
class Order:
    """An order the writer committed, and the id of the event announcing it."""

    number: int
    pk: str
    event_id: str
    #: the OrderConfirmed event's id, on the ordered path
    follow_up_event_id: str | None = None

    @property
    def event_ids(self) -> tuple[str, ...]:
        """The order's events in write order (its subject's expected delivery order)."""
        if self.follow_up_event_id is None:
            return (self.event_id,)
        return (self.event_id, self.follow_up_event_id)


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


def confirm_orders(writer: OutboxWriter, orders: Iterable[Order], *, source: str) -> list[Order]:
    """Each order set to CONFIRMED with its ``OrderConfirmed`` event, one transaction each."""
    confirmed: list[Order] = []
    for order in orders:
        event = writer.new_event(
            order.pk, FOLLOW_UP_EVENT_TYPE, {"order_id": f"{order.number:05d}"}, source=source
        )
        result = writer.update(
            {"PK": order.pk, "SK": ENTITY_SK},
            "SET #status = :confirmed",
            event,
            names={"#status": "status"},
            values={":confirmed": "CONFIRMED"},
        )
        confirmed.append(replace(order, follow_up_event_id=result.event_ids[0]))
    return confirmed
