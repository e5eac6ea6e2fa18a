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
    FIFO_QUEUE_ARN,
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


# --------------------------------------------------------------------------- one loop per process


class LoopBoundClient:
    """Like aiohttp's ClientSession or asyncpg's pool: usable only on the loop it first ran on."""

    def __init__(self) -> None:
        self.loops: list[asyncio.AbstractEventLoop] = []

    async def call(self) -> None:
        loop = asyncio.get_running_loop()
        if self.loops and loop is not self.loops[0]:
            raise RuntimeError("Future attached to a different loop")
        self.loops.append(loop)
        await asyncio.sleep(0)


def test_a_client_bound_to_the_first_invocations_loop_works_in_the_next_invocations(
    store: DynamoDBPersistenceLayer,
) -> None:
    # GIVEN an async client made once and reused by a warm environment
    client = LoopBoundClient()
    consumer = OutboxConsumer(persistence_store=store, name=CONSUMER)

    @consumer.handler
    async def handler(envelope: Envelope) -> None:
        await client.call()

    # WHEN three invocations in a row use it
    responses = [
        handler(
            sqs_event([sqs_record(eventbridge_body(make_envelope())) for _ in range(2)]),  # type: ignore[arg-type]
            FakeLambdaContext(),  # type: ignore[arg-type]
        )
        for _ in range(3)
    ]

    # THEN every event of every invocation ran on the one loop the client is bound to
    assert responses == [{"batchItemFailures": []}] * 3
    assert len(client.loops) == 6 and len(set(map(id, client.loops))) == 1


def test_an_async_handler_called_from_inside_a_running_loop_processes_its_events(
    store: DynamoDBPersistenceLayer,
) -> None:
    consumer = OutboxConsumer(persistence_store=store, name=CONSUMER)
    done: list[str] = []

    @consumer.handler
    async def handler(envelope: Envelope) -> None:
        await asyncio.sleep(0)
        done.append(envelope.id)

    events = [make_envelope() for _ in range(2)]

    async def caller() -> Any:  # e.g. a test or a web framework that runs a loop itself
        return handler(
            sqs_event([sqs_record(eventbridge_body(e)) for e in events]),  # type: ignore[arg-type]
            FakeLambdaContext(),  # type: ignore[arg-type]
        )

    assert asyncio.run(caller()) == {"batchItemFailures": []}
    assert sorted(done) == sorted(e.id for e in events)


# --------------------------------------------------------------------------- concurrency

#: Only waited for in full when the records do NOT run concurrently (the bug).
NEVER_REACHED_SECONDS = 5.0


def test_five_async_events_are_in_flight_at_once(store: DynamoDBPersistenceLayer) -> None:
    # GIVEN five events, each awaiting until all five are being awaited together
    in_flight = 0
    most = 0
    all_in: asyncio.Event | None = None

    async def process(envelope: Envelope) -> None:
        nonlocal in_flight, most, all_in
        all_in = all_in or asyncio.Event()
        in_flight += 1
        most = max(most, in_flight)
        if in_flight == 5:
            all_in.set()
        await asyncio.wait_for(all_in.wait(), NEVER_REACHED_SECONDS)
        in_flight -= 1

    records = [sqs_record(eventbridge_body(make_envelope())) for _ in range(5)]

    response = _run(store, records, process)

    # THEN they were all awaited at once, and all succeeded
    assert failure_ids(response) == []
    assert most == 5


def test_max_concurrency_bounds_the_events_in_flight(store: DynamoDBPersistenceLayer) -> None:
    in_flight = 0
    most = 0

    async def process(envelope: Envelope) -> None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        for _ in range(20):
            await asyncio.sleep(0)
        in_flight -= 1

    records = [sqs_record(eventbridge_body(make_envelope())) for _ in range(6)]
    response = process_sqs_batch(
        sqs_event(records),  # type: ignore[arg-type]
        process,
        persistence_store=store,
        consumer_name=CONSUMER,
        max_concurrency=2,
    )

    assert failure_ids(response) == []
    assert 1 <= most <= 2


def test_max_concurrency_below_one_is_refused(store: DynamoDBPersistenceLayer) -> None:
    with pytest.raises(ValueError, match="max_concurrency must be at least 1, got 0"):
        OutboxConsumer(persistence_store=store, name=CONSUMER, max_concurrency=0)


def test_async_fifo_groups_run_one_record_at_a_time_in_order_and_a_failure_stops_its_group(
    store: DynamoDBPersistenceLayer,
) -> None:
    # GIVEN two message groups of three, interleaved; group A's second event fails
    groups = ["A", "B", "A", "B", "A", "B"]
    events = [make_envelope() for _ in groups]
    records = [
        sqs_record(eventbridge_body(e), queue_arn=FIFO_QUEUE_ARN, group_id=g)
        for e, g in zip(events, groups, strict=True)
    ]
    started: dict[str, list[str]] = {"A": [], "B": []}
    running: dict[str, int] = {"A": 0, "B": 0}
    overlapped: list[str] = []
    group_of = {e.id: g for e, g in zip(events, groups, strict=True)}

    async def process(envelope: Envelope) -> None:
        group = group_of[envelope.id]
        running[group] += 1
        if running[group] > 1:
            overlapped.append(group)
        started[group].append(envelope.id)
        for _ in range(10):
            await asyncio.sleep(0)
        running[group] -= 1
        if envelope.id == events[2].id:
            raise RuntimeError("A's second event fails")

    response = _run(store, records, process)

    # THEN each group ran one record at a time, in order; A stopped at its failure
    assert overlapped == []
    assert started["A"] == [events[0].id, events[2].id]
    assert started["B"] == [events[1].id, events[3].id, events[5].id]
    assert failure_ids(response) == [records[2]["messageId"], records[4]["messageId"]]


# --------------------------------------------------------------------------- cancellation


def test_an_event_whose_awaited_work_is_cancelled_fails_alone_and_runs_again(
    store: DynamoDBPersistenceLayer, dynamodb_client: Any
) -> None:
    # GIVEN three events, the middle one's awaited call cancelled
    # (asyncio.CancelledError is a BaseException, not an Exception)
    events = [make_envelope() for _ in range(3)]
    done: list[str] = []

    async def process(envelope: Envelope) -> None:
        if envelope.id == events[1].id and envelope.id not in done:
            call = asyncio.ensure_future(asyncio.sleep(3600))
            call.cancel()
            done.append(envelope.id)
            await call
        done.append(envelope.id)

    records = [sqs_record(eventbridge_body(e)) for e in events]
    response = _run(store, records, process)

    # THEN only it fails; the others are processed, and its record is not left in progress
    assert failure_ids(response) == [records[1]["messageId"]]
    completed = [r for r in idempotency_records(dynamodb_client) if r["status"]["S"] == "COMPLETED"]
    assert len(completed) == 2
    again = _run(store, [redelivered(r) for r in records], process)
    assert failure_ids(again) == []
    assert done.count(events[1].id) == 2, "cancelled once, then run to the end"
