"""A consumer batch that would time out returns only the records it never started.

Before, a slow batch ran into the function's timeout: Lambda then returned
every message of the batch to the queue, those already handled included, each
one receive closer to the DLQ. Now no record is started with less than the
margin left; the unattempted ones are reported in ``batchItemFailures`` and the
rest is deleted. Time is virtual: each event takes 4 s of a 30 s invocation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    redelivered,
    sqs_event,
    sqs_record,
)
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table

TIMEOUT_SECONDS = 30.0
SECONDS_PER_EVENT = 4.0


@dataclass
class VirtualContext:
    """A Lambda context whose remaining time follows a virtual clock."""

    now: float = 0.0
    function_name: str = "orders-consumer"
    aws_request_id: str = "request-1"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:orders-consumer"
    done: list[str] = field(default_factory=list)

    def get_remaining_time_in_millis(self) -> int:
        return int((TIMEOUT_SECONDS - self.now) * 1000)

    def slow_process(self, envelope: Envelope) -> None:
        self.now += SECONDS_PER_EVENT
        self.done.append(envelope.id)


@pytest.fixture
def store(dynamodb_client: Any) -> DynamoDBPersistenceLayer:
    create_idempotency_table(dynamodb_client)
    return DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb_client)


def _run(
    store: DynamoDBPersistenceLayer,
    records: list[dict[str, Any]],
    context: VirtualContext,
    **options: Any,
) -> Any:
    return process_sqs_batch(
        sqs_event(records),  # type: ignore[arg-type]
        context.slow_process,
        persistence_store=store,
        consumer_name="orders",
        lambda_context=context,  # type: ignore[arg-type]
        **options,
    )


def test_a_batch_that_would_time_out_returns_only_the_records_it_never_started(
    store: DynamoDBPersistenceLayer,
) -> None:
    # GIVEN 10 events of 4 s each in a 30 s invocation (40 s of work)
    events = [make_envelope() for _ in range(10)]
    records = [sqs_record(eventbridge_body(e)) for e in events]
    context = VirtualContext()

    response = _run(store, records, context)

    # THEN it starts a record only with 4 s (the longest seen) + 1 s (the floor)
    # left: 7 done (28 s),
    # the 3 never started come back, and the invocation ended within its timeout
    assert context.done == [e.id for e in events[:7]]
    assert failure_ids(response) == [r["messageId"] for r in records[7:]]
    assert context.now <= TIMEOUT_SECONDS

    # AND nothing is lost: the next delivery runs exactly the three
    again = VirtualContext()
    response = _run(store, [redelivered(r) for r in records], again)
    assert failure_ids(response) == []
    assert again.done == [e.id for e in events[7:]]


def test_the_first_record_is_always_started_whatever_the_time_left(
    store: DynamoDBPersistenceLayer,
) -> None:
    records = [sqs_record(eventbridge_body(make_envelope())) for _ in range(2)]
    context = VirtualContext(now=TIMEOUT_SECONDS - 1.0)  # 1 s left: less than one record takes

    response = _run(store, records, context)

    assert len(context.done) == 1, "progress is made even in a short invocation"
    assert failure_ids(response) == [records[1]["messageId"]]


def test_on_a_fifo_queue_the_unattempted_tail_comes_back_in_order(
    store: DynamoDBPersistenceLayer,
) -> None:
    records = [
        sqs_record(eventbridge_body(make_envelope()), queue_arn=FIFO_QUEUE_ARN) for _ in range(10)
    ]
    context = VirtualContext()

    response = _run(store, records, context)

    assert failure_ids(response) == [r["messageId"] for r in records[7:]]


def test_a_raised_floor_is_honoured_whatever_the_length_of_the_invocation(
    store: DynamoDBPersistenceLayer,
) -> None:
    # GIVEN a team that keeps 20 s spare in a 30 s invocation (no cap at a fifth any more)
    records = [sqs_record(eventbridge_body(make_envelope())) for _ in range(5)]
    context = VirtualContext()

    response = _run(store, records, context, stop_margin_seconds=20.0)

    # THEN a record starts only with 4 s + 20 s left: two run, three come back
    assert len(context.done) == 2
    assert failure_ids(response) == [r["messageId"] for r in records[2:]]
    assert TIMEOUT_SECONDS - context.now >= 20.0


def test_durations_seen_in_earlier_invocations_guide_the_next_one(
    store: DynamoDBPersistenceLayer,
) -> None:
    from dynamodb_outbox.consumer._deadline import RecordDurations

    # GIVEN a warm handler that has seen a record take 12 s
    durations = RecordDurations()
    durations.add(12.0)
    records = [sqs_record(eventbridge_body(make_envelope())) for _ in range(7)]
    context = VirtualContext()

    response = _run(store, records, context, record_durations=durations)

    # THEN records start only while 12 s + 1 s is left: at 0, 4, 8, 12 and 16 s of 30
    # (without that history, 7 would have started: each takes 4 s here)
    assert len(context.done) == 5
    assert failure_ids(response) == [r["messageId"] for r in records[5:]]
