"""``@consumer.handler(model=...)``: the payload parsed by a Pydantic model, under the same rules.

A payload the model refuses fails its own message (retried, then the DLQ) and
leaves no idempotency record; the rest of the batch completes.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from pydantic import BaseModel

from dynamodb_outbox.consumer import OutboxConsumer
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.local import LambdaContext
from dynamodb_outbox.local.records import consumer_event
from tests.factories import make_envelope
from tests.functional.consumer_fixtures import failure_ids, idempotency_records
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table

CONTEXT = LambdaContext("arn:aws:lambda:us-east-1:123456789012:function:billing")


class OrderCreated(BaseModel):
    order_id: str
    total: Decimal


@pytest.fixture
def consumer(dynamodb_client: Any) -> OutboxConsumer:
    create_idempotency_table(dynamodb_client)
    return OutboxConsumer(
        persistence_store=DynamoDBPersistenceLayer(
            table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb_client
        ),
        name="billing",
        parse_float=Decimal,
    )


def test_the_function_gets_the_payload_as_the_model(consumer: OutboxConsumer) -> None:
    received: list[tuple[str, OrderCreated]] = []

    @consumer.handler(model=OrderCreated)
    def handler(event: Envelope, order: OrderCreated) -> None:
        """Charge the order."""
        received.append((event.id, order))

    event = make_envelope(data={"order_id": "1001", "total": 0.1})
    response = handler(consumer_event([event]), CONTEXT)

    assert failure_ids(response) == []
    assert received == [(event.id, OrderCreated(order_id="1001", total=Decimal("0.1")))]
    assert (handler.__name__, handler.__doc__) == ("handler", "Charge the order.")


def test_a_payload_the_model_refuses_fails_its_message_only_and_is_not_completed(
    consumer: OutboxConsumer, dynamodb_client: Any
) -> None:
    charged: list[str] = []

    @consumer.handler(model=OrderCreated)
    def handler(event: Envelope, order: OrderCreated) -> None:
        charged.append(order.order_id)

    bad = make_envelope(data={"order_id": "1002"})  # no total
    good = make_envelope(data={"order_id": "1003", "total": 5})
    event = consumer_event([bad, good])
    response = handler(event, CONTEXT)

    assert failure_ids(response) == [event["Records"][0]["messageId"]]
    assert charged == ["1003"]
    # Only the good event is recorded as done: the refused one runs again when redelivered.
    records = idempotency_records(dynamodb_client)
    assert [record["status"]["S"] for record in records] == ["COMPLETED"]


def test_an_async_typed_function_is_awaited(consumer: OutboxConsumer) -> None:
    charged: list[Decimal] = []

    @consumer.handler(model=OrderCreated)
    async def handler(event: Envelope, order: OrderCreated) -> None:
        await asyncio.sleep(0)
        charged.append(order.total)

    response = handler(
        consumer_event([make_envelope(data={"order_id": "1", "total": 12.50})]), CONTEXT
    )

    assert failure_ids(response) == []
    assert charged == [Decimal("12.5")]


def test_a_model_without_model_validate_is_refused_when_decorating(
    consumer: OutboxConsumer,
) -> None:
    with pytest.raises(TypeError, match="model must be a Pydantic v2 model class"):

        @consumer.handler(model=dict)
        def handler(event: Envelope, order: dict[str, Any]) -> None: ...

    with pytest.raises(TypeError, match="needs a function, or model="):
        consumer.handler()  # type: ignore[call-overload]
