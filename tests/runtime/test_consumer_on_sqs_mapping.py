"""The consumer toolkit on the local SQS mapping: slow handlers, async handlers, cancellation.

A 10 s function timeout and handlers that take 2 s, 3.5 s or a varying time
per record, on the virtual clock. Before, the toolkit started records until a
margin capped at a fifth of the invocation was left: at 3.5 s every
invocation timed out and every message of the batch came back, processed ones
included; at 2 s the invocation ended at exactly 0 ms left. Now no invocation
times out, each ends with time to spare, and no processed message is
delivered again; the records a batch never started come back, unattempted.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from runtime_helpers import Queue, make_queue

from dynamodb_outbox.consumer import OutboxConsumer
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.local import SqsMapping, VirtualClock, mapping_config
from dynamodb_outbox.local.records import eventbridge_body
from tests.factories import make_envelope
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table

TIMEOUT_SECONDS = 10.0
MESSAGES = 20


@pytest.fixture
def consumer(dynamodb: Any) -> OutboxConsumer:
    create_idempotency_table(dynamodb)
    return OutboxConsumer(
        persistence_store=DynamoDBPersistenceLayer(
            table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb
        ),
        name="slow-consumer",
    )


@pytest.fixture
def queues(sqs: Any) -> tuple[Queue, Queue]:
    dlq = make_queue(sqs, "slow-consumer-dlq")
    queue = make_queue(
        sqs,
        "slow-consumer",
        VisibilityTimeout=30,
        RedrivePolicy={"deadLetterTargetArn": dlq.arn, "maxReceiveCount": 5},
    )
    return queue, dlq


class Watch:
    """Wraps the Lambda handler: what each invocation saw, and the time it left unused."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.processed: set[str] = set()
        self.redelivered_processed: list[str] = []
        self.millis_left: list[int] = []

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        delivered = [record["messageId"] for record in event["Records"]]
        self.redelivered_processed += [m for m in delivered if m in self.processed]
        response = self.handler(event, context)
        self.millis_left.append(context.get_remaining_time_in_millis())
        failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
        self.processed |= set(delivered) - failed
        return response


DURATIONS = {
    "2 s": [2.0],
    "3.5 s": [3.5],
    "varying": [1.5, 3.0, 0.5, 2.5, 3.5, 1.0, 2.0, 0.2],
}


@pytest.mark.parametrize("durations", list(DURATIONS.values()), ids=list(DURATIONS))
def test_a_slow_consumer_never_times_out_and_no_processed_message_comes_back(
    sqs: Any,
    clock: VirtualClock,
    consumer: OutboxConsumer,
    queues: tuple[Queue, Queue],
    durations: list[float],
) -> None:
    # GIVEN 20 events and a handler taking the given time per record (virtual clock)
    queue, dlq = queues
    events = [make_envelope() for _ in range(MESSAGES)]
    for event in events:
        queue.send(eventbridge_body(event))
    runs: Counter[str] = Counter()
    took = itertools.cycle(durations)

    @consumer.handler
    def handler(envelope: Envelope) -> None:
        clock.advance(next(took))
        runs[envelope.id] += 1

    watch = Watch(handler)
    mapping = SqsMapping(
        mapping_config(queue.arn, report_batch_item_failures=True, batch_size=10),
        watch,
        sqs_client=sqs,
        clock=clock,
        function_timeout_seconds=TIMEOUT_SECONDS,
    )

    # WHEN the mapping drains the queue
    mapping.drain()

    # THEN no invocation timed out, and each ended with time to spare
    assert [i.error for i in mapping.invocations if i.error] == []
    assert min(watch.millis_left) > 0
    # AND no processed message was delivered again; every event ran exactly once
    assert watch.redelivered_processed == []
    assert runs == Counter({event.id: 1 for event in events})
    assert queue.depth() == 0 and dlq.depth() == 0


def test_an_async_consumer_keeps_its_loop_across_invocations_of_the_mapping(
    sqs: Any, clock: VirtualClock, consumer: OutboxConsumer, queues: tuple[Queue, Queue]
) -> None:
    # GIVEN an async client bound to the loop of its first use, and three batches
    queue, _ = queues
    for _ in range(6):
        queue.send(eventbridge_body(make_envelope()))
    loops: list[asyncio.AbstractEventLoop] = []

    @consumer.handler
    async def handler(envelope: Envelope) -> None:
        loop = asyncio.get_running_loop()
        if loops and loop is not loops[0]:
            raise RuntimeError("Future attached to a different loop")
        loops.append(loop)
        await asyncio.sleep(0)

    mapping = SqsMapping(
        mapping_config(queue.arn, report_batch_item_failures=True, batch_size=2),
        handler,
        sqs_client=sqs,
        clock=clock,
        function_timeout_seconds=TIMEOUT_SECONDS,
    )

    mapping.drain()

    assert [i.outcome for i in mapping.invocations] == ["success"] * 3
    assert len(loops) == 6 and len(set(map(id, loops))) == 1


def test_a_cancelled_record_comes_back_alone_and_the_rest_of_its_batch_is_deleted(
    sqs: Any, clock: VirtualClock, consumer: OutboxConsumer, queues: tuple[Queue, Queue]
) -> None:
    queue, dlq = queues
    events = [make_envelope() for _ in range(3)]
    for event in events:
        queue.send(eventbridge_body(event))
    runs: Counter[str] = Counter()

    @consumer.handler
    async def handler(envelope: Envelope) -> None:
        runs[envelope.id] += 1
        if envelope.id == events[1].id and runs[envelope.id] == 1:
            call = asyncio.ensure_future(asyncio.sleep(3600))
            call.cancel()
            await call

    mapping = SqsMapping(
        mapping_config(queue.arn, report_batch_item_failures=True),
        handler,
        sqs_client=sqs,
        clock=clock,
        function_timeout_seconds=TIMEOUT_SECONDS,
    )

    mapping.drain()

    first, second = mapping.invocations
    assert (first.outcome, len(first.failed_ids)) == ("partial", 1)
    assert second.outcome == "success" and len(second.item_ids) == 1
    assert runs == Counter({events[0].id: 1, events[1].id: 2, events[2].id: 1})
    assert queue.depth() == 0 and dlq.depth() == 0
