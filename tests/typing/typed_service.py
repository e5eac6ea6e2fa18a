"""A service typed as a team would type it, checked by ``mypy --strict`` in
tests/unit/test_typing.py: the public API, a typed boto3 client, the project's
handlers and one with Powertools' ``LambdaContext``, all driven by the local runtime."""

from __future__ import annotations

from decimal import Decimal

import boto3
from aws_lambda_powertools.utilities.typing import LambdaContext

from dynamodb_outbox import Condition, Envelope, OutboxConsumer, OutboxWriter, WriteResult
from dynamodb_outbox.consumer import PartialBatchResponse, SQSEvent
from dynamodb_outbox.local import LocalRuntime, SqsMapping, StreamMapping, VirtualClock
from dynamodb_outbox.publisher import handler as publisher_handler
from dynamodb_outbox.reference_consumer import handler as reference_handler


def place_order(writer: OutboxWriter, order_id: str, total: Decimal) -> WriteResult:
    order = {"PK": f"ORDER#{order_id}", "SK": "META", "total": total}
    event = writer.new_event(order, "OrderCreated", {"order_id": order_id, "total": total})
    return writer.write(order, event, condition=Condition.item_absent())


writer = OutboxWriter("orders", boto3.client("dynamodb"), source="shop.orders")
consumer = OutboxConsumer(idempotency_table="idempotency", name="billing")


@consumer.handler
def billing(event: Envelope) -> None:
    print(event.payload["total"])


def own_handler(event: SQSEvent, context: LambdaContext) -> PartialBatchResponse:
    return billing(event, context)


def wire(stream_config: dict[str, object], queue_config: dict[str, object]) -> LocalRuntime:
    clock = VirtualClock()
    runtime = LocalRuntime(clock)
    runtime.add(
        StreamMapping(
            stream_config,
            publisher_handler,
            streams_client=boto3.client("dynamodbstreams"),
            clock=clock,
        )
    )
    for handler in (billing, own_handler, reference_handler):
        runtime.add(SqsMapping(queue_config, handler, sqs_client=boto3.client("sqs"), clock=clock))
    return runtime
