"""Concurrent invocations of one consumer: a duplicate in flight twice is processed once.

A bus or queue duplicate of an event can land in two batches that Lambda runs
at the same time (SQS ``MaximumConcurrency``). The first invocation to reach it
writes the idempotency record INPROGRESS; the other must neither run it nor
drop it: it returns the message, which comes back after its visibility timeout
and is then skipped as done. The local runtime interleaves the invocations at
every AWS call, reproducibly per seed, so many seeds explore many orders.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import boto3
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

from dynamodb_outbox.consumer import process_sqs_batch
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.local import SqsMapping, VirtualClock, mapping_config
from tests.factories import REGION, make_envelope
from tests.functional.consumer_fixtures import eventbridge_body
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table

CONSUMER = "concurrent-consumer"
SEEDS = range(12)


def _run_with_seed(seed: int, dynamodb_client: Any) -> tuple[Counter[str], list[Envelope], int]:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName=f"busy-{seed}", Attributes={"VisibilityTimeout": "30"})[
        "QueueUrl"
    ]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    table = create_idempotency_table(dynamodb_client, f"{IDEMPOTENCY_TABLE}-{seed}")
    store = DynamoDBPersistenceLayer(table_name=table, boto3_client=dynamodb_client)
    events = [make_envelope() for _ in range(3)]
    # Two batches of two: the first event's duplicate opens the second batch.
    for envelope in (events[0], events[1], events[0], events[2]):
        sqs.send_message(QueueUrl=url, MessageBody=eventbridge_body(envelope))

    effects: Counter[str] = Counter()

    def process(envelope: Envelope) -> None:
        effects[envelope.id] += 1

    def handler(event: dict[str, Any], context: Any) -> Any:
        return process_sqs_batch(
            event,  # type: ignore[arg-type]
            process,
            persistence_store=store,
            consumer_name=CONSUMER,
            lambda_context=context,
        )

    clock = VirtualClock()
    mapping = SqsMapping(
        mapping_config(arn, batch_size=2, report_batch_item_failures=True, maximum_concurrency=2),
        handler,
        sqs_client=sqs,
        clock=clock,
        random_source=random.Random(seed),
    )
    mapping.drain()
    returned = mapping.stats.messages_failed
    assert not mapping.has_pending_work()
    return effects, events, returned


def test_a_duplicate_in_two_concurrent_batches_takes_effect_once(dynamodb_client: Any) -> None:
    returned_in_some_order = 0
    for seed in SEEDS:
        effects, events, returned = _run_with_seed(seed, dynamodb_client)
        assert effects == Counter({e.id: 1 for e in events}), f"seed {seed}: {effects}"
        returned_in_some_order += returned
    # Some interleavings met the duplicate while the other invocation held it.
    assert returned_in_some_order > 0
