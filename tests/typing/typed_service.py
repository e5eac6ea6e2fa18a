"""A service typed as a team would type it, checked by ``mypy --strict`` in
tests/unit/test_typing.py: the public API, a typed boto3 client, the project's
handlers and one with Powertools' ``LambdaContext``, all driven by the local runtime."""

from __future__ import annotations

from decimal import Decimal

import boto3
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from dynamodb_outbox import (
    Condition,
    Envelope,
    OutboxConsumer,
    OutboxWriter,
    TransactionCancelled,
    WriteResult,
    is_retryable,
)
from dynamodb_outbox.consumer import PartialBatchResponse, SQSEvent
from dynamodb_outbox.local import LocalRuntime, SqsMapping, StreamMapping, VirtualClock
from dynamodb_outbox.publisher import handler as publisher_handler
from dynamodb_outbox.publishing import PublishDependencies
from dynamodb_outbox.reference_consumer import handler as reference_handler
from dynamodb_outbox.sinks import EventBridgeSink, SnsSink
from dynamodb_outbox.sweeper import sweep
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS


def place_order(writer: OutboxWriter, order_id: str, total: Decimal) -> WriteResult:
    order = {"PK": f"ORDER#{order_id}", "SK": "META", "total": total}
    event = writer.new_event(order, "OrderCreated", {"order_id": order_id, "total": total})
    return writer.write(order, event, condition=Condition.item_absent())


def pay_order(writer: OutboxWriter, order_id: str) -> str:
    event = writer.new_event(f"ORDER#{order_id}", "OrderPaid", {"order_id": order_id})
    placed = Condition("#s = :placed", {"#s": "status"}, {":placed": "PLACED"}, True)
    try:
        key = {"PK": f"ORDER#{order_id}", "SK": "META"}
        writer.update(key, "SET #s = :paid", event, values={":paid": "PAID"}, condition=placed)
    except TransactionCancelled as cancelled:
        old = cancelled.reasons[0].item
        return str(old["status"]) if old else "missing"
    except Exception as error:
        return "retry" if is_retryable(error) else "fail"
    return "PAID"


writer = OutboxWriter("orders", boto3.client("dynamodb"), source="shop.orders")
consumer = OutboxConsumer(idempotency_table="idempotency", name="billing")


@consumer.handler
def billing(event: Envelope) -> None:
    print(event.data["total"])


class OrderPaid(BaseModel):
    order_id: str


@consumer.handler(model=OrderPaid)
def shipping(event: Envelope, paid: OrderPaid) -> None:
    print(event.id, paid.order_id)


legacy_writer = OutboxWriter(
    "legacy-orders", boto3.client("dynamodb"), partition_key="pk", sort_key="sk"
)


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
    for handler in (billing, shipping, own_handler, reference_handler):
        runtime.add(SqsMapping(queue_config, handler, sqs_client=boto3.client("sqs"), clock=clock))
    return runtime


# The sinks and the sweeper take boto3's real clients (boto3-stubs' types).
events_sink = EventBridgeSink(boto3.client("events"), "orders-bus")
sns_sink = SnsSink(boto3.client("sns"), "arn:aws:sns:us-east-1:123456789012:orders")
sweeper_deps = PublishDependencies(
    events_sink, "orders", boto3.client("dynamodb"), table_keys=DEFAULT_TABLE_KEYS
)
sweep_result = sweep(sweeper_deps, max_items=10)
