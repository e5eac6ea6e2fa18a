"""``async def`` consumers: awaited to the end, under the same idempotency and partial batch rules.

Before, an async function was called and never awaited, and the event was
recorded COMPLETED: gone, with a "never awaited" RuntimeWarning as the only
sign. A plain function that returns an awaitable must fail its message, since
nothing awaited it.
"""

from __future__ import annotations

import asyncio
import functools
import warnings
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

from dynamodb_outbox.consumer import OutboxConsumer, process_sqs_batch
from dynamodb_outbox.envelope import Envelope
from tests.factories import make_envelope
from tests.functional.consumer_fixtures import (
    eventbridge_body,
    failure_ids,
    idempotency_records,
    redelivered,
    sqs_event,
    sqs_record,
)
from tests.support.lambda_context import FakeLambdaContext
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table

CONSUMER = "async-consumer"


@pytest.fixture
def store(dynamodb_client: Any) -> DynamoDBPersistenceLayer:
    create_idempotency_table(dynamodb_client)
    return DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb_client)


def _run(store: DynamoDBPersistenceLayer, records: list[dict[str, Any]], process: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "coroutine was never awaited"
        return process_sqs_batch(
            sqs_event(records),  # type: ignore[arg-type]
            process,
            persistence_store=store,
            consumer_name=CONSUMER,
            lambda_context=FakeLambdaContext(),  # type: ignore[arg-type]
        )


def test_an_async_consumer_is_awaited_to_the_end_of_each_event(
    store: DynamoDBPersistenceLayer,
) -> None:
    done: list[str] = []

    async def process(envelope: Envelope) -> None:
        await asyncio.sleep(0)  # the effect happens after a suspension point
        done.append(envelope.id)

    events = [make_envelope() for _ in range(3)]
    response = _run(store, [sqs_record(eventbridge_body(e)) for e in events], process)

    assert failure_ids(response) == []
    assert sorted(done) == sorted(e.id for e in events), "concurrent: in no promised order"


def test_an_async_consumer_that_raises_fails_its_message_only_and_runs_again_later(
    store: DynamoDBPersistenceLayer, dynamodb_client: Any
) -> None:
    bad, good = make_envelope(), make_envelope()
    attempts: list[str] = []

    async def process(envelope: Envelope) -> None:
        attempts.append(envelope.id)
        await asyncio.sleep(0)
        if envelope.id == bad.id and attempts.count(bad.id) == 1:
            raise RuntimeError("downstream is down")

    bad_record, good_record = sqs_record(eventbridge_body(bad)), sqs_record(eventbridge_body(good))
    first = _run(store, [bad_record, good_record], process)
    assert failure_ids(first) == [bad_record["messageId"]]
    assert [r for r in idempotency_records(dynamodb_client) if r["status"]["S"] == "COMPLETED"]

    again = _run(store, [redelivered(bad_record), redelivered(good_record)], process)

    assert failure_ids(again) == []
    assert sorted(attempts[:2]) == sorted([bad.id, good.id])
    assert attempts[2:] == [bad.id], "the redelivered duplicate is skipped"


def test_an_async_call_method_is_awaited(store: DynamoDBPersistenceLayer) -> None:
    class Handler:
        def __init__(self) -> None:
            self.done: list[str] = []

        async def __call__(self, envelope: Envelope) -> None:
            await asyncio.sleep(0)
            self.done.append(envelope.id)

    handler, envelope = Handler(), make_envelope()
    assert failure_ids(_run(store, [sqs_record(eventbridge_body(envelope))], handler)) == []
    assert handler.done == [envelope.id]


def test_an_async_function_behind_a_partial_is_awaited(store: DynamoDBPersistenceLayer) -> None:
    done: list[str] = []

    async def process(envelope: Envelope, *, into: list[str]) -> None:
        await asyncio.sleep(0)
        into.append(envelope.id)

    envelope = make_envelope()
    response = _run(
        store, [sqs_record(eventbridge_body(envelope))], functools.partial(process, into=done)
    )
    assert failure_ids(response) == []
    assert done == [envelope.id]


def test_a_plain_function_returning_an_awaitable_fails_its_message_and_records_nothing(
    store: DynamoDBPersistenceLayer, dynamodb_client: Any
) -> None:
    ran: list[str] = []

    async def effect(envelope: Envelope) -> None:
        ran.append(envelope.id)

    def process(envelope: Envelope) -> Any:
        return effect(envelope)  # forgot to await: the effect never runs

    record = sqs_record(eventbridge_body(make_envelope()))
    response = _run(store, [record], process)

    assert failure_ids(response) == [record["messageId"]]
    assert ran == []
    assert idempotency_records(dynamodb_client) == [], "not recorded as done: it will run again"


def test_the_decorated_async_handler_keeps_its_name_and_works_end_to_end(
    store: DynamoDBPersistenceLayer,
) -> None:
    consumer = OutboxConsumer(persistence_store=store, name=CONSUMER)
    done: list[str] = []

    @consumer.handler
    async def billing(envelope: Envelope) -> None:
        """Bills the order."""
        await asyncio.sleep(0)
        done.append(envelope.id)

    envelope = make_envelope()
    response = billing(
        sqs_event([sqs_record(eventbridge_body(envelope))]),  # type: ignore[arg-type]
        FakeLambdaContext(),  # type: ignore[arg-type]
    )

    assert response == {"batchItemFailures": []}
    assert done == [envelope.id]
    assert (billing.__name__, billing.__doc__) == ("billing", "Bills the order.")
