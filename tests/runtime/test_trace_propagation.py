"""One trace from writer to consumer, through the mappings the module deploys.

A producer writes in a Lambda invocation (``_X_AMZN_TRACE_ID``); the local
runtime drives the publisher from the table's stream, the bus delivers to the
consumer queue (moto), and the runtime drives the consumer from the queue. The
producer's trace must be on the PutEvents entry and on every line the consumer
logs about the event.
"""

from __future__ import annotations

import io
import json
import logging
import uuid
from typing import Any

import pytest
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from runtime_helpers import Table, make_queue

from dynamodb_outbox.consumer import OutboxConsumer
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.local import (
    LocalRuntime,
    SqsMapping,
    StreamMapping,
    VirtualClock,
    mapping_config,
)
from dynamodb_outbox.outbox_item import OUTBOX_SK_PREFIX
from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies
from dynamodb_outbox.sinks import EventBridgeSink
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from dynamodb_outbox.trace_context import ENV_LAMBDA_TRACE_HEADER
from dynamodb_outbox.writer import OutboxWriter

PRODUCER_HEADER = (
    "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a87bd80c:0"
)
PRODUCER_TRACE_ID = "1-5759e988-bd862e3fe1be46a994272793"
BUS = "orders"
IDEMPOTENCY_TABLE = "orders-idempotency"


class RecordingEvents:
    """The EventBridge client, keeping every PutEvents entry it was sent."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.entries: list[dict[str, Any]] = []

    def put_events(self, *, Entries: list[dict[str, Any]]) -> Any:
        self.entries.extend(Entries)
        return self._real.put_events(Entries=Entries)


@pytest.fixture
def consumer_queue(sqs: Any, boto_session: Any) -> Any:
    events = boto_session.client("events")
    events.create_event_bus(Name=BUS)
    queue = make_queue(sqs, "billing")
    events.put_rule(Name="billing", EventBusName=BUS, EventPattern='{"source": ["shop.orders"]}')
    events.put_targets(
        Rule="billing", EventBusName=BUS, Targets=[{"Id": "billing", "Arn": queue.arn}]
    )
    return queue


def test_the_producers_trace_reaches_putevents_and_every_consumer_log_line(
    table: Table,
    streams: Any,
    sqs: Any,
    dynamodb: Any,
    boto_session: Any,
    clock: VirtualClock,
    consumer_queue: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN a producer that writes an order and its event inside a traced Lambda invocation
    writer = OutboxWriter(table.name, dynamodb, source="shop.orders")
    monkeypatch.setenv(ENV_LAMBDA_TRACE_HEADER, PRODUCER_HEADER)
    order = {"PK": "ORDER#1", "SK": "META", "total": 42}
    event = writer.new_event(order, "OrderCreated", {"order_id": "1"}, correlation_id="req-1")
    writer.write(order, event)
    # (the publisher and the consumer run in invocations of their own)
    monkeypatch.delenv(ENV_LAMBDA_TRACE_HEADER)

    # AND the publisher and a consumer behind the module's mappings
    events = RecordingEvents(boto_session.client("events"))
    sink = EventBridgeSink(events, BUS)

    def publisher(batch: dict[str, Any], context: Any) -> Any:
        result = publish_stream_batch(
            batch["Records"],
            PublishDependencies(sink, table.name, dynamodb, table_keys=DEFAULT_TABLE_KEYS),
        )
        return result.response()

    dynamodb.create_table(
        TableName=IDEMPOTENCY_TABLE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
    )
    logs = io.StringIO()
    consumer = OutboxConsumer(
        persistence_store=DynamoDBPersistenceLayer(
            table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb
        ),
        name="billing",
        logger=Logger(
            service=f"billing-{uuid.uuid4().hex}", logger_handler=logging.StreamHandler(logs)
        ),
    )
    handled: list[Envelope] = []

    @consumer.handler
    def billing(received: Envelope) -> None:
        consumer.logger.info("charging the order")
        handled.append(received)
        if len(handled) == 1:  # the first delivery fails: the toolkit logs it, SQS redelivers
            raise RuntimeError("card service timed out")

    outbox_filter = {
        "eventName": ["INSERT"],
        "dynamodb": {"Keys": {"SK": {"S": [{"prefix": OUTBOX_SK_PREFIX}]}}},
    }
    runtime = LocalRuntime(clock)
    runtime.add(
        StreamMapping(
            mapping_config(
                table.stream_arn, filter_patterns=[outbox_filter], report_batch_item_failures=True
            ),
            publisher,
            streams_client=streams,
            clock=clock,
        )
    )
    runtime.add(
        SqsMapping(
            mapping_config(consumer_queue.arn, report_batch_item_failures=True),
            billing,  # type: ignore[arg-type]
            sqs_client=sqs,
            clock=clock,
        )
    )

    # WHEN the runtime delivers everything
    runtime.drain()

    # THEN the PutEvents entry carried the producer's trace as its X-Ray TraceHeader
    (entry,) = events.entries
    assert entry["TraceHeader"] == (f"Root={PRODUCER_TRACE_ID};Parent=53995c3f42cd8ad8;Sampled=1")
    # AND the consumer handled the event (twice: it failed once) with its trace
    assert [e.id for e in handled] == [event.id, event.id]
    assert handled[0].traceparent == "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
    # AND every line logged about it, the toolkit's and the function's, names the producer's trace
    lines = [json.loads(line) for line in logs.getvalue().splitlines()]
    about_the_event = [
        line
        for line in lines
        if line.get("message") == "charging the order" or line.get("event_id") == event.id
    ]
    assert len(about_the_event) == 3, lines  # two attempts, one failure
    assert all(line["trace_id"] == PRODUCER_TRACE_ID for line in about_the_event), lines
    assert all(line["correlation_id"] == "req-1" for line in about_the_event), lines
