"""The DynamoDB tables the tests and benchmarks create on moto."""

from __future__ import annotations

from typing import Any, Literal

from dynamodb_outbox.outbox_item import ATTR_PENDING_SHARD

PENDING_INDEX = "outbox-pending"
IDEMPOTENCY_TABLE = "outbox-idempotency-test"

StreamViewType = Literal["NEW_IMAGE", "NEW_AND_OLD_IMAGES"]


def create_outbox_table(
    client: Any,
    name: str,
    *,
    stream: StreamViewType | None = "NEW_IMAGE",
) -> str | None:
    """The table as ``table.tf`` creates it: PK/SK strings, the sparse KEYS_ONLY
    pending index, a stream of ``stream`` view type (``None``: no stream).

    Returns the stream's ARN (``None`` without a stream).
    """
    description = client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "PK", "AttributeType": "S"},
            {"AttributeName": "SK", "AttributeType": "S"},
            {"AttributeName": ATTR_PENDING_SHARD, "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "PK", "KeyType": "HASH"},
            {"AttributeName": "SK", "KeyType": "RANGE"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": PENDING_INDEX,
                "KeySchema": [
                    {"AttributeName": ATTR_PENDING_SHARD, "KeyType": "HASH"},
                    {"AttributeName": "SK", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        StreamSpecification=(
            {"StreamEnabled": True, "StreamViewType": stream}
            if stream is not None
            else {"StreamEnabled": False}
        ),
    )["TableDescription"]
    arn: str | None = description.get("LatestStreamArn")
    return arn


def create_idempotency_table(client: Any, name: str = IDEMPOTENCY_TABLE) -> str:
    """The table Powertools expects: hash key ``id`` (S), TTL on ``expiration``."""
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
    )
    client.update_time_to_live(
        TableName=name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiration"},
    )
    return name
