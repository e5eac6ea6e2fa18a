"""Whatever a consumer function raises, only its record fails (KeyboardInterrupt excepted).

Before, an exception whose ``__str__`` raised made the toolkit's own error
formatting raise, and a ``BaseException`` that is not an ``Exception``
(``asyncio.CancelledError``, ``SystemExit``, ``GeneratorExit``) escaped the
record: the whole batch failed with no partial response, processed messages
included. Three records, the middle one bad: the other two must be processed,
and the bad one's idempotency record must not stay IN_PROGRESS (its retry runs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

from dynamodb_outbox.consumer import process_sqs_batch
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


class StrRaises(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ is broken")


class ReprRaises(Exception):
    def __repr__(self) -> str:
        raise RuntimeError("__repr__ is broken")


class NothingDescribes(Exception):
    def __str__(self) -> str:
        raise SystemExit("__str__ exits")

    def __repr__(self) -> str:
        raise ValueError("__repr__ is broken")


class CustomBase(BaseException):
    """A library's own BaseException subclass."""


def _huge() -> BaseException:
    return ValueError("x" * 10_000_000)


def _not_utf8() -> BaseException:
    return ValueError("caf\udce9 \udcff\udcfe")  # surrogates: no UTF-8 encoding exists


HOSTILE: dict[str, Callable[[], BaseException]] = {
    "__str__ raises": StrRaises,
    "__repr__ raises": ReprRaises,
    "__str__ and __repr__ raise": NothingDescribes,
    "huge message": _huge,
    "non-UTF-8 text": _not_utf8,
    "CancelledError": asyncio.CancelledError,
    "SystemExit": lambda: SystemExit(3),
    "GeneratorExit": GeneratorExit,
    "a custom BaseException": CustomBase,
    "MemoryError": MemoryError,
}


@pytest.fixture
def store(dynamodb_client: Any) -> DynamoDBPersistenceLayer:
    create_idempotency_table(dynamodb_client)
    return DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb_client)


def _process(
    bad: Envelope, raised: Callable[[], BaseException], *, is_async: bool, done: list[str]
) -> Callable[[Envelope], Any]:
    def sync(envelope: Envelope) -> None:
        if envelope.id == bad.id and bad.id not in done:
            done.append(bad.id)
            raise raised()
        done.append(envelope.id)

    async def coroutine(envelope: Envelope) -> None:
        await asyncio.sleep(0)
        sync(envelope)

    return coroutine if is_async else sync


def _run(
    store: DynamoDBPersistenceLayer,
    records: list[dict[str, Any]],
    process: Callable[[Envelope], Any],
    *,
    log_exception_text: bool,
) -> Any:
    return process_sqs_batch(
        sqs_event(records),  # type: ignore[arg-type]
        process,
        persistence_store=store,
        consumer_name="hostile",
        lambda_context=FakeLambdaContext(),  # type: ignore[arg-type]
        log_exception_text=log_exception_text,
    )


@pytest.mark.parametrize("log_exception_text", [False, True], ids=["text hidden", "text logged"])
@pytest.mark.parametrize("is_async", [False, True], ids=["def", "async def"])
@pytest.mark.parametrize("raised", list(HOSTILE.values()), ids=list(HOSTILE))
def test_whatever_a_function_raises_fails_its_record_only_and_it_runs_again(
    store: DynamoDBPersistenceLayer,
    dynamodb_client: Any,
    raised: Callable[[], BaseException],
    is_async: bool,
    log_exception_text: bool,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # GIVEN three events, the middle one's first run raising something hostile
    events = [make_envelope() for _ in range(3)]
    records = [sqs_record(eventbridge_body(e)) for e in events]
    done: list[str] = []
    process = _process(events[1], raised, is_async=is_async, done=done)

    # WHEN the batch runs
    response = _run(store, records, process, log_exception_text=log_exception_text)

    # THEN only the middle one fails, the others are processed and recorded
    assert failure_ids(response) == [records[1]["messageId"]]
    assert sorted(done) == sorted(e.id for e in events)
    statuses = sorted(r["status"]["S"] for r in idempotency_records(dynamodb_client))
    assert statuses == ["COMPLETED", "COMPLETED"], "the failed one is not left IN_PROGRESS"

    # AND its redelivery runs it, the others are skipped as done
    again = _run(
        store, [redelivered(r) for r in records], process, log_exception_text=log_exception_text
    )
    assert failure_ids(again) == []
    assert done.count(events[1].id) == 2 and len(done) == 4

    # AND every line was written: none lost to a logging error, all valid UTF-8
    logged = capsys.readouterr()
    assert "--- Logging error ---" not in logged.err
    (logged.out + logged.err + caplog.text).encode("utf-8")


@pytest.mark.parametrize("raised", list(HOSTILE.values()), ids=list(HOSTILE))
def test_on_fifo_a_hostile_exception_stops_its_group_only(
    store: DynamoDBPersistenceLayer, raised: Callable[[], BaseException]
) -> None:
    events = [make_envelope() for _ in range(4)]
    groups = ["A", "A", "B", "B"]
    records = [
        sqs_record(eventbridge_body(e), queue_arn=FIFO_QUEUE_ARN, group_id=g)
        for e, g in zip(events, groups, strict=True)
    ]
    done: list[str] = []

    response = _run(
        store,
        records,
        _process(events[0], raised, is_async=False, done=done),
        log_exception_text=False,
    )

    assert failure_ids(response) == [records[0]["messageId"], records[1]["messageId"]]
    assert done == [events[0].id, events[2].id, events[3].id]


@pytest.mark.parametrize("is_async", [False, True], ids=["def", "async def"])
def test_a_keyboard_interrupt_ends_the_batch(
    store: DynamoDBPersistenceLayer, is_async: bool
) -> None:
    # KeyboardInterrupt is how a person stops a process (Ctrl-C): it is not a record's failure
    events = [make_envelope() for _ in range(3)]
    records = [sqs_record(eventbridge_body(e)) for e in events]
    process = _process(events[1], KeyboardInterrupt, is_async=is_async, done=[])

    with pytest.raises(KeyboardInterrupt):
        _run(store, records, process, log_exception_text=False)
