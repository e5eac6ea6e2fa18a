"""One slow record does not starve the records after it, invocation after invocation.

With "longest recent duration + floor" as the rule, one record that took nearly
the whole invocation (a hung downstream call, a cold first record) made every
later warm invocation run exactly one record and return the rest unstarted,
each a receive closer to the DLQ without ever running: an independent review
sent 20 of 40 healthy messages to the DLQ this way. The expected duration is
now the 90th percentile of recent durations, and a record that took at least
the invocation's time less the floor is not kept (no later record could ever
be given that long).

The queue is simulated: 40 messages received ten at a time, oldest first,
maxReceiveCount 5 (the module's default); time is virtual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

from dynamodb_outbox.consumer import OutboxConsumer
from dynamodb_outbox.consumer._deadline import RecordDurations
from dynamodb_outbox.envelope import Envelope
from tests.functional.consumer_fixtures import (
    envelopes,
    eventbridge_body,
    failure_ids,
    sqs_event,
    sqs_record,
)
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table

MAX_RECEIVE_COUNT = 5
NORMAL_SECONDS = 0.05


@pytest.fixture
def store(dynamodb_client: Any) -> DynamoDBPersistenceLayer:
    create_idempotency_table(dynamodb_client)
    return DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb_client)


@dataclass
class VirtualContext:
    timeout: float
    now: float = 0.0
    function_name: str = "orders"
    aws_request_id: str = "r"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:orders"

    def get_remaining_time_in_millis(self) -> int:
        return int((self.timeout - self.now) * 1000)


@pytest.mark.parametrize(
    ("timeout", "outlier"), [(10.0, 9.2), (3.0, 2.0), (60.0, 59.0), (10.0, 8.5), (10.0, 4.0)]
)
def test_one_slow_record_sends_no_healthy_message_to_the_dlq(
    store: DynamoDBPersistenceLayer, timeout: float, outlier: float
) -> None:
    consumer = OutboxConsumer(persistence_store=store, name="orders")
    context = VirtualContext(timeout=timeout)
    queue = [(event, sqs_record(eventbridge_body(event))) for event in envelopes(40)]
    slow = queue[0][0].id

    @consumer.handler
    def handler(envelope: Envelope) -> None:
        context.now += outlier if envelope.id == slow else NORMAL_SECONDS

    receives = {record["messageId"]: 0 for _, record in queue}
    dead_lettered: list[str] = []
    processed = 0
    while queue:
        batch, context.now = queue[:10], 0.0
        for _, record in batch:
            receives[record["messageId"]] += 1
        event = sqs_event([record for _, record in batch])
        failed = set(failure_ids(handler(event, context)))  # type: ignore[arg-type]
        processed += len(batch) - len(failed)
        remaining = []
        for item in queue:
            message_id = item[1]["messageId"]
            if any(item is sent for sent in batch) and message_id not in failed:
                continue
            if message_id in failed and receives[message_id] >= MAX_RECEIVE_COUNT:
                dead_lettered.append(message_id)
                continue
            remaining.append(item)
        queue = remaining

    assert dead_lettered == []
    assert processed == 40


def test_the_expected_duration_is_the_90th_percentile_of_recent_ones() -> None:
    durations = RecordDurations()
    for seconds in (9.0, *([0.1] * 8)):
        durations.add(seconds)
    assert durations.expected() == 9.0  # fewer than ten known: the longest

    durations.add(0.1)
    assert durations.expected() == 0.1  # one slow record in ten is not counted
