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
import contextlib
import gc
import inspect
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

from dynamodb_outbox.consumer import _loop, process_sqs_batch
from dynamodb_outbox.consumer._loop import process_loop
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


class _SlowToStart(DynamoDBPersistenceLayer):
    """A store whose in-progress write for one event takes 50 ms (a slow network call)."""

    def __init__(self, slow_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.slow_id = slow_id

    def save_inprogress(
        self, data: dict[str, Any], remaining_time_in_millis: int | None = None
    ) -> None:
        if data.get("id") == self.slow_id:
            time.sleep(0.05)
        super().save_inprogress(data, remaining_time_in_millis)


@pytest.mark.parametrize("awaits", range(7), ids=lambda n: f"{n} awaits before acting")
def test_a_record_handed_over_as_a_keyboard_interrupt_stops_the_loop_never_runs_later(
    dynamodb_client: Any, awaits: int
) -> None:
    # The loop is kept for the process, as Lambda's runtime keeps it. Before,
    # a coroutine a worker handed to it while another record was about to
    # stop it with KeyboardInterrupt stayed on it half-run (how far depended
    # on the number of awaits: 3, at times 4, on Python 3.11): its worker
    # failed the record, which deleted the idempotency record that guards it,
    # and the next invocation on the same loop finished it while the
    # redelivery ran it as well: applied twice.
    stopper, late = make_envelope(), make_envelope()
    create_idempotency_table(dynamodb_client)
    store = _SlowToStart(late.id, table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb_client)
    applied: list[str] = []

    async def process(envelope: Envelope) -> None:
        if envelope.id == stopper.id:
            # Holds the loop while the late record's worker hands its coroutine over.
            time.sleep(0.1)
            raise KeyboardInterrupt
        for _ in range(awaits):
            await asyncio.sleep(0)
        applied.append(envelope.id)

    records = [sqs_record(eventbridge_body(e)) for e in (stopper, late)]
    with pytest.raises(KeyboardInterrupt):
        _run(store, records, process, log_exception_text=False)

    # WHEN two more invocations (same process, same loop) get its redeliveries
    responses = [
        _run(store, [redelivered(records[1])], process, log_exception_text=False) for _ in range(2)
    ]

    # THEN it took effect once, and neither failed it
    assert applied == [late.id], "applied twice: once left over on the loop, once redelivered"
    assert [failure_ids(r) for r in responses] == [[], []]


def test_a_hand_over_cancelled_before_its_first_step_is_closed_not_left_unawaited(
    dynamodb_client: Any,
) -> None:
    # The loop stops (a callback raises KeyboardInterrupt) right after the late
    # record's hand-over became a task, before its first step: the drain
    # cancels it, so nothing ever awaits the function's coroutine. It is
    # closed, and the record fails as stopped (its redelivery runs it once).
    stopper, late = make_envelope(), make_envelope()
    create_idempotency_table(dynamodb_client)
    store = _SlowToStart(late.id, table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb_client)
    applied: list[str] = []

    def stop() -> None:
        raise KeyboardInterrupt

    async def process(envelope: Envelope) -> None:
        if envelope.id == stopper.id:
            time.sleep(0.1)  # the late record's worker hands over meanwhile
            asyncio.get_running_loop().call_soon(stop)  # queued after the hand-over
            await asyncio.sleep(1)
        await asyncio.sleep(0)
        applied.append(envelope.id)

    records = [sqs_record(eventbridge_body(e)) for e in (stopper, late)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(KeyboardInterrupt):
            _run(store, records, process, log_exception_text=False)
        never_started = [
            c
            for c in gc.get_objects()
            if inspect.iscoroutine(c)
            and c.cr_code is process.__code__
            and inspect.getcoroutinestate(c) == inspect.CORO_CREATED
        ]
        gc.collect()
    assert never_started == [], "a coroutine neither run nor closed"
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []

    again = _run(store, [redelivered(records[1])], process, log_exception_text=False)
    assert failure_ids(again) == [] and applied == [late.id]


async def _exits_when_cancelled() -> None:
    try:
        await asyncio.sleep(5)
    except asyncio.CancelledError:
        sys.exit(1)  # a library's cleanup calling sys.exit


def test_the_drain_outlasts_tasks_that_stop_it_with_system_exit(dynamodb_client: Any) -> None:
    # Each child's SystemExit on cancellation stops one run of the drain
    # (asyncio raises it out of the loop). Before, the drain gave up after
    # three runs and left a record that goes on after its cancel half-run: its
    # record failed, the next invocation finished it, its redelivery ran it
    # again.
    stopper, goes_on = make_envelope(), make_envelope()
    exiting = [make_envelope() for _ in range(4)]
    create_idempotency_table(dynamodb_client)
    store = DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb_client)
    applied: list[str] = []
    stopped: list[str] = []

    async def process(envelope: Envelope) -> None:
        if envelope.id == stopper.id:
            await asyncio.sleep(0.05)
            raise KeyboardInterrupt
        if envelope in exiting and not stopped:
            await asyncio.create_task(_exits_when_cancelled())
        if envelope.id == goes_on.id:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.2)  # finishes its work anyway
            await asyncio.sleep(0)
        applied.append(envelope.id)

    records = [sqs_record(eventbridge_body(e)) for e in (stopper, goes_on, *exiting)]
    with pytest.raises(KeyboardInterrupt):
        _run(store, records, process, log_exception_text=False)
    stopped.append("yes")
    assert [t for t in asyncio.all_tasks(process_loop()) if not t.done()] == []

    again = _run(store, [redelivered(r) for r in records[1:]], process, log_exception_text=False)
    assert failure_ids(again) == []
    assert applied.count(goes_on.id) == 1


def test_the_drain_gives_up_on_a_task_that_refuses_cancellation(
    store: DynamoDBPersistenceLayer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A retry loop that takes CancelledError for one more transient error:
    # before, the stop waited for it forever (the KeyboardInterrupt never
    # left the toolkit). Now after DRAIN_SECONDS it is left on the loop.
    monkeypatch.setattr(_loop, "DRAIN_SECONDS", 0.2)
    stopper, stubborn = make_envelope(), make_envelope()
    done = threading.Event()

    async def process(envelope: Envelope) -> None:
        if envelope.id == stopper.id:
            await asyncio.sleep(0.05)
            raise KeyboardInterrupt
        while not done.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.01)

    records = [sqs_record(eventbridge_body(e)) for e in (stopper, stubborn)]
    raised: list[BaseException] = []

    def invoke() -> None:
        try:
            _run(store, records, process, log_exception_text=False)
        except BaseException as exc:
            raised.append(exc)

    runner = threading.Thread(target=invoke, daemon=True)
    try:
        runner.start()
        runner.join(10)
        assert not runner.is_alive(), "the stop hangs on a task that refuses cancellation"
        assert [type(e) for e in raised] == [KeyboardInterrupt]
    finally:
        done.set()  # let the stubborn task end, so that no later test's loop runs it
        if not runner.is_alive():
            process_loop().run_until_complete(asyncio.sleep(0.05))
