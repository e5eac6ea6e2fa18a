"""What a record's child task raises, or a handler that stops the loop, fails that record only.

asyncio raises a ``SystemExit`` out of ``run_until_complete`` from any task,
not only the one it runs: from a child task that a record started with
``create_task``, ``gather`` or ``wait_for`` it used to end the whole batch
(on Lambda, ``Runtime.ExitError``: every message back, processed ones
included). A handler that stops the running loop made ``run_until_complete``
give up the same way.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

from dynamodb_outbox.consumer import process_sqs_batch
from dynamodb_outbox.envelope import Envelope
from tests.functional.consumer_fixtures import (
    envelopes,
    eventbridge_body,
    failure_ids,
    sqs_event,
    sqs_record,
)
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table


@pytest.fixture
def store(dynamodb_client: Any) -> DynamoDBPersistenceLayer:
    create_idempotency_table(dynamodb_client)
    return DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb_client)


def _three(store: DynamoDBPersistenceLayer, handler: Any) -> tuple[list[Envelope], Any]:
    events = envelopes(3)
    response = process_sqs_batch(
        sqs_event([sqs_record(eventbridge_body(e), e.id) for e in events]),  # type: ignore[arg-type]
        handler,
        persistence_store=store,
        consumer_name="orders",
    )
    return events, response


@pytest.mark.parametrize("how", ["wait_for", "gather", "create_task"])
def test_system_exit_in_a_child_task_fails_only_its_record(
    store: DynamoDBPersistenceLayer, how: str
) -> None:
    done: list[str] = []

    async def child() -> None:
        await asyncio.sleep(0)
        sys.exit(3)  # a library helper calling sys.exit

    async def handler(envelope: Envelope) -> None:
        if envelope.subject == "ORDER#1001":
            if how == "wait_for":
                await asyncio.wait_for(child(), 5)
            elif how == "gather":
                await asyncio.gather(child())
            else:
                await asyncio.create_task(child())
            return
        await asyncio.sleep(0.05)
        done.append(envelope.id)

    events, response = _three(store, handler)

    assert failure_ids(response) == [events[1].id]
    assert sorted(done) == sorted([events[0].id, events[2].id])


def test_a_handler_that_stops_the_loop_does_not_fail_the_batch(
    store: DynamoDBPersistenceLayer,
) -> None:
    done: list[str] = []

    async def handler(envelope: Envelope) -> None:
        if envelope.subject == "ORDER#1001":
            asyncio.get_running_loop().stop()
        await asyncio.sleep(0.05)
        done.append(envelope.id)

    events, response = _three(store, handler)

    assert failure_ids(response) == []
    assert sorted(done) == sorted(event.id for event in events)
