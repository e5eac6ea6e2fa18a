"""Payload values end to end on moto: what a producer reads from DynamoDB (Decimals),
its datetimes and UUIDs, written by the writer, published by the publisher (SNS, raw
delivery: the queue holds the exact bytes sent) and read by the consumer toolkit."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from uuid import UUID

import boto3
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

from dynamodb_outbox.consumer import OutboxConsumer
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.outbox_item import ATTR_ENVELOPE, outbox_sk
from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies
from dynamodb_outbox.sinks import PUBLISH_TO_SNS, SnsSink
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from dynamodb_outbox.writer import OutboxWriter
from tests.factories import REGION, SOURCE, sequence_numbers, stream_record
from tests.functional.consumer_fixtures import sqs_event, sqs_record
from tests.functional.outbox_helpers import FIXED_NOW
from tests.support.lambda_context import FakeLambdaContext
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table

if TYPE_CHECKING:
    from tests.functional.conftest import OutboxTable, SnsTopic

# Money a float cannot hold (float() gives 12345678901234568.0) and cents that
# floats add up wrong (0.10 + 0.20 != 0.30).
TOTAL = Decimal("12345678901234567.89")
PRICES = [Decimal("0.10"), Decimal("0.20")]
PLACED_AT = datetime(2024, 5, 1, 10, 30, tzinfo=UTC)
CUSTOMER = UUID("0b7e5d3c-4f6a-4d59-9a3e-1f2b3c4d5e6f")


def test_money_read_from_dynamodb_reaches_the_consumer_with_its_exact_digits(
    outbox_table: OutboxTable, sns_topic: SnsTopic
) -> None:
    table = boto3.resource("dynamodb", region_name=REGION).Table(outbox_table.name)
    table.put_item(Item={"PK": "CART#7", "SK": "META", "total": TOTAL, "prices": PRICES})
    cart = table.get_item(Key={"PK": "CART#7", "SK": "META"})["Item"]  # Decimals, as boto3 reads
    writer = OutboxWriter(outbox_table.name, outbox_table.client, publish_to=PUBLISH_TO_SNS)
    order = {"PK": "ORDER#1", "SK": "META", "total": cart["total"]}
    data = {
        "total": cart["total"],
        "prices": cart["prices"],
        "placed_at": PLACED_AT,
        "customer": CUSTOMER,
    }
    event = writer.new_event(order, "OrderCreated", data, source=SOURCE)
    writer.write(order, event)

    item = outbox_table.get({"PK": {"S": "ORDER#1"}, "SK": {"S": outbox_sk(event.id)}})
    assert item is not None
    assert '"total":12345678901234567.89' in item[ATTR_ENVELOPE]["S"]
    result = publish_stream_batch(
        [stream_record(item, next(sequence_numbers()))],  # type: ignore[list-item]
        PublishDependencies(
            sink=SnsSink(sns_topic.client, sns_topic.arn),
            table_name=outbox_table.name,
            dynamodb_client=outbox_table.client,
            sleep=lambda _: None,
            clock=lambda: FIXED_NOW,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )
    assert (result.published, result.quarantined) == (1, 0)
    (message,) = sns_topic.received()
    assert message.body == item[ATTR_ENVELOPE]["S"]  # the committed bytes, sent as they are

    received: list[Envelope] = []
    create_idempotency_table(outbox_table.client)
    consumer = OutboxConsumer(
        persistence_store=DynamoDBPersistenceLayer(
            table_name=IDEMPOTENCY_TABLE, boto3_client=outbox_table.client
        ),
        name="billing",
        parse_float=Decimal,
    )
    handler = consumer.handler(received.append)
    response = handler(sqs_event([sqs_record(message.body)]), FakeLambdaContext())  # type: ignore[arg-type]

    assert response == {"batchItemFailures": []}
    (envelope,) = received
    expected: dict[str, Any] = {
        "total": TOTAL,
        "prices": PRICES,
        "placed_at": "2024-05-01T10:30:00+00:00",
        "customer": "0b7e5d3c-4f6a-4d59-9a3e-1f2b3c4d5e6f",
    }
    assert envelope.data == expected
    assert sum(envelope.data["prices"]) == Decimal("0.30")
    assert datetime.fromisoformat(envelope.data["placed_at"]) == PLACED_AT
