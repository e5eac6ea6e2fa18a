"""A handler with a stray ``yield`` fails its event: its body never ran.

Called, a generator function (``def`` or ``async def`` with ``yield``) returns a
generator object without running a line of its body. Completing the event then
would lose it: the idempotency record says done and the message is deleted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

from dynamodb_outbox.consumer import process_sqs_batch
from dynamodb_outbox.envelope import Envelope
from tests.functional.consumer_fixtures import (
    envelopes,
    eventbridge_body,
    failure_ids,
    idempotency_records,
    sqs_event,
    sqs_record,
)
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table


@pytest.fixture
def store(dynamodb_client: Any) -> DynamoDBPersistenceLayer:
    create_idempotency_table(dynamodb_client)
    return DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb_client)


def _one(store: DynamoDBPersistenceLayer, handler: Any) -> tuple[Envelope, Any]:
    (event,) = envelopes(1)
    response = process_sqs_batch(
        sqs_event([sqs_record(eventbridge_body(event), event.id)]),  # type: ignore[arg-type]
        handler,
        persistence_store=store,
        consumer_name="orders",
    )
    return event, response


def test_a_generator_handler_fails_its_event(
    store: DynamoDBPersistenceLayer, dynamodb_client: Any
) -> None:
    ran: list[str] = []

    def handler(envelope: Envelope) -> Iterator[None]:
        ran.append(envelope.id)
        yield

    event, response = _one(store, handler)

    assert ran == []
    assert failure_ids(response) == [event.id]
    assert idempotency_records(dynamodb_client) == []


def test_an_async_generator_handler_fails_its_event(
    store: DynamoDBPersistenceLayer, dynamodb_client: Any
) -> None:
    ran: list[str] = []

    async def handler(envelope: Envelope) -> AsyncIterator[None]:
        ran.append(envelope.id)
        yield

    event, response = _one(store, handler)

    assert ran == []
    assert failure_ids(response) == [event.id]
    assert idempotency_records(dynamodb_client) == []
