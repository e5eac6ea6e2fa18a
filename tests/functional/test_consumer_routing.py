"""Routing by event type: one queue, several types, one typed function per type."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest
from pydantic import BaseModel

from dynamodb_outbox import Envelope, OutboxConsumer, Router, UnroutedEvent
from dynamodb_outbox.local import LambdaContext
from dynamodb_outbox.local.records import consumer_event
from dynamodb_outbox.testing import OutboxStack, isolated_aws
from tests.factories import make_envelope

CONTEXT = LambdaContext("arn:aws:lambda:us-east-1:123456789012:function:orders-billing-consumer")


class OrderCreated(BaseModel):
    order_id: str
    total: Decimal


class OrderPaid(BaseModel):
    order_id: str
    amount: Decimal


@pytest.fixture
def consumer() -> Iterator[tuple[OutboxConsumer, OutboxStack]]:
    with isolated_aws(), OutboxStack() as stack:
        yield OutboxConsumer(idempotency_table=stack.names.idempotency_table, name="billing"), stack


def failed_ids(response: object) -> list[str]:
    assert isinstance(response, dict)
    return [failure["itemIdentifier"] for failure in response["batchItemFailures"]]


def test_each_type_reaches_its_function_with_its_model(
    consumer: tuple[OutboxConsumer, OutboxStack],
) -> None:
    # GIVEN two types whose data have the same field names but different meanings
    outbox_consumer, _ = consumer
    router = Router()
    seen: list[object] = []

    @router.on("OrderCreated", model=OrderCreated)
    def created(event: Envelope, order: OrderCreated) -> None:
        seen.append(order)

    @router.on("OrderPaid", model=OrderPaid)
    def paid(event: Envelope, payment: OrderPaid) -> None:
        seen.append(payment)

    handler = outbox_consumer.handler(router)

    # WHEN a batch carries one of each
    response = handler(
        consumer_event(
            [
                make_envelope(type="OrderPaid", data={"order_id": "1", "amount": "5"}),
                make_envelope(type="OrderCreated", data={"order_id": "2", "total": "9"}),
            ]
        ),
        CONTEXT,
    )

    # THEN each went to its own function, parsed by its own model (by type, not shape)
    assert failed_ids(response) == []
    assert seen == [
        OrderPaid(order_id="1", amount=Decimal("5")),
        OrderCreated(order_id="2", total=Decimal("9")),
    ]


def test_a_type_without_a_route_fails_only_its_message_with_unrouted_event(
    consumer: tuple[OutboxConsumer, OutboxStack],
) -> None:
    outbox_consumer, stack = consumer
    router = Router()
    done: list[str] = []
    router.on("OrderCreated")(lambda event: done.append(event.id))
    known = make_envelope(type="OrderCreated")
    unknown = make_envelope(type="OrderRefunded")
    event = consumer_event([unknown, known])

    response = outbox_consumer.handler(router)(event, CONTEXT)

    assert failed_ids(response) == [event["Records"][0]["messageId"]]
    assert done == [known.id]
    assert isinstance(stack.failures[0].exception, UnroutedEvent)
    assert "no route for event type 'OrderRefunded' (routes: OrderCreated)" in str(
        stack.failures[0].exception
    )


def test_an_ignored_type_completes_without_running_anything(
    consumer: tuple[OutboxConsumer, OutboxStack],
) -> None:
    outbox_consumer, stack = consumer
    router = Router(ignore=["OrderShipped"])
    router.on("OrderCreated")(lambda event: pytest.fail("not this route"))

    response = outbox_consumer.handler(router)(
        consumer_event([make_envelope(type="OrderShipped")]), CONTEXT
    )

    assert failed_ids(response) == []
    assert stack.failures == []


def test_async_routes_are_awaited(consumer: tuple[OutboxConsumer, OutboxStack]) -> None:
    outbox_consumer, _ = consumer
    router = Router()
    awaited: list[str] = []

    @router.on("OrderPaid", model=OrderPaid)
    async def paid(event: Envelope, payment: OrderPaid) -> None:
        awaited.append(payment.order_id)

    response = outbox_consumer.handler(router)(
        consumer_event([make_envelope(type="OrderPaid", data={"order_id": "3", "amount": 1})]),
        CONTEXT,
    )

    assert failed_ids(response) == []
    assert awaited == ["3"]


def test_mixing_plain_and_async_routes_is_refused_when_the_route_is_added() -> None:
    router = Router()
    router.on("A")(lambda event: None)

    async def b(event: Envelope) -> None:
        return None

    with pytest.raises(TypeError, match="all `def` or all `async def`"):
        router.on("B")(b)


def test_a_type_routed_twice_or_both_routed_and_ignored_is_refused() -> None:
    router = Router(ignore=["B"])
    router.on("A")(lambda event: None)
    with pytest.raises(ValueError, match="already has a route"):
        router.on("A")
    with pytest.raises(ValueError, match="both ignored and routed"):
        router.on("B")


def test_a_route_added_after_the_handler_was_built_is_refused(
    consumer: tuple[OutboxConsumer, OutboxStack],
) -> None:
    outbox_consumer, _ = consumer
    router = Router()
    router.on("A")(lambda event: None)
    outbox_consumer.handler(router)
    with pytest.raises(RuntimeError, match=r"after consumer\.handler"):
        router.on("B")
