"""Helpers shared by the runtime tests: a streamed table, queues, a recording handler."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

REGION = "eu-west-1"


@dataclass
class Table:
    """A table with a NEW_AND_OLD_IMAGES stream, and a helper that writes to it."""

    client: Any
    name: str
    stream_arn: str

    def put(self, pk: str, sk: str, **attributes: Any) -> None:
        item: dict[str, Any] = {"PK": {"S": pk}, "SK": {"S": sk}}
        for key, value in attributes.items():
            if isinstance(value, bytes):
                item[key] = {"B": value}
            elif isinstance(value, int | float):
                item[key] = {"N": str(value)}
            else:
                item[key] = {"S": str(value)}
        self.client.put_item(TableName=self.name, Item=item)

    def put_outbox(self, count: int, *, start: int = 0, pk: str = "ORDER#1") -> None:
        for n in range(start, start + count):
            self.put(pk, f"OUTBOX#{n:06d}", n=n)


@dataclass
class Queue:
    client: Any
    url: str
    arn: str

    def send(self, body: str, **kwargs: Any) -> str:
        return str(
            self.client.send_message(QueueUrl=self.url, MessageBody=body, **kwargs)["MessageId"]
        )

    def bodies(self) -> list[str]:
        """Every message body currently in the queue (received with a zero visibility timeout)."""
        found: list[str] = []
        seen: set[str] = set()
        while True:
            messages = self.client.receive_message(
                QueueUrl=self.url, MaxNumberOfMessages=10, VisibilityTimeout=0
            ).get("Messages", [])
            fresh = [m for m in messages if m["MessageId"] not in seen]
            if not fresh:
                return found
            for message in fresh:
                seen.add(message["MessageId"])
                found.append(message["Body"])

    def depth(self) -> int:
        attributes = self.client.get_queue_attributes(
            QueueUrl=self.url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )


def make_queue(sqs: Any, name: str, **attributes: Any) -> Queue:
    attrs = {key: json.dumps(v) if isinstance(v, dict) else str(v) for key, v in attributes.items()}
    url = sqs.create_queue(QueueName=name, Attributes=attrs)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return Queue(sqs, url, arn)


class Recorder:
    """A handler that records every event it gets and answers with ``respond``."""

    def __init__(self, respond: Any = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.respond = respond

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        self.events.append(event)
        if callable(self.respond):
            return self.respond(event)
        return self.respond

    @property
    def batches(self) -> list[list[str]]:
        """Per invocation, the ids of the delivered records (sequence numbers or message ids)."""
        return [[record_id(r) for r in event["Records"]] for event in self.events]

    @property
    def delivered(self) -> list[str]:
        return [item for batch in self.batches for item in batch]


def record_id(record: dict[str, Any]) -> str:
    """The id Lambda's partial batch responses use: sequence number or message id."""
    if "dynamodb" in record:
        return str(record["dynamodb"]["SequenceNumber"])
    return str(record["messageId"])


def failures(*ids: str) -> dict[str, Any]:
    """A partial batch response reporting ``ids``."""
    return {"batchItemFailures": [{"itemIdentifier": i} for i in ids]}


def sort_keys(event: dict[str, Any]) -> list[str]:
    return [r["dynamodb"]["Keys"]["SK"]["S"] for r in event["Records"]]


def stream_api_record(sequence: str, sk: str, created_at: float) -> dict[str, Any]:
    """A record as boto3's ``get_records`` returns it."""
    return {
        "eventID": f"event-{sequence}",
        "eventName": "INSERT",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": {
            "ApproximateCreationDateTime": datetime.fromtimestamp(created_at, UTC),
            "Keys": {"PK": {"S": "ORDER#1"}, "SK": {"S": sk}},
            "NewImage": {"PK": {"S": "ORDER#1"}, "SK": {"S": sk}},
            "SequenceNumber": sequence,
            "SizeBytes": 64,
            "StreamViewType": "NEW_IMAGE",
        },
    }


@dataclass
class FakeShard:
    shard_id: str
    records: list[dict[str, Any]]
    parent: str | None = None
    closed: bool = False
    trimmed: int = 0  # records[:trimmed] are gone


@dataclass
class FakeStreams:
    """A DynamoDB Streams API stand-in for what moto cannot produce: sequence numbers of
    different lengths, closed parent shards, ``TrimmedDataAccessException``."""

    shards: list[FakeShard]
    iterators: dict[str, tuple[str, int]] = field(default_factory=dict)

    def _shard(self, shard_id: str) -> FakeShard:
        return next(s for s in self.shards if s.shard_id == shard_id)

    def describe_stream(self, **kwargs: Any) -> dict[str, Any]:
        described = []
        for shard in self.shards:
            entry: dict[str, Any] = {"ShardId": shard.shard_id, "SequenceNumberRange": {}}
            if shard.parent:
                entry["ParentShardId"] = shard.parent
            described.append(entry)
        return {"StreamDescription": {"StreamArn": kwargs["StreamArn"], "Shards": described}}

    def get_shard_iterator(self, **kwargs: Any) -> dict[str, Any]:
        shard = self._shard(kwargs["ShardId"])
        kind = kwargs["ShardIteratorType"]
        if kind == "TRIM_HORIZON":
            index = shard.trimmed
        else:
            sequences = [r["dynamodb"]["SequenceNumber"] for r in shard.records]
            index = sequences.index(kwargs["SequenceNumber"])
            index += 1 if kind == "AFTER_SEQUENCE_NUMBER" else 0
            if index < shard.trimmed:
                raise ClientError(
                    {"Error": {"Code": "TrimmedDataAccessException", "Message": "trimmed"}},
                    "GetShardIterator",
                )
        token = f"it-{len(self.iterators)}"
        self.iterators[token] = (shard.shard_id, index)
        return {"ShardIterator": token}

    def get_records(self, **kwargs: Any) -> dict[str, Any]:
        shard_id, index = self.iterators[kwargs["ShardIterator"]]
        shard = self._shard(shard_id)
        page = shard.records[index : index + kwargs.get("Limit", 1000)]
        response: dict[str, Any] = {"Records": page}
        end = index + len(page)
        if not (shard.closed and end >= len(shard.records)):
            token = f"it-{len(self.iterators)}"
            self.iterators[token] = (shard_id, end)
            response["NextShardIterator"] = token
        return response
