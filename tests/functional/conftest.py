"""Shared fixtures for functional tests: moto in-process, an outbox table and a bus.

What the bus received is read from an SQS queue that a catch-all rule targets:
moto delivers PutEvents to SQS targets, so an event that was never sent is
never in the queue.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.factories import ACCOUNT_ID, REGION, SOURCE, TABLE_NAME
from tests.support.moto_tables import PENDING_INDEX, create_outbox_table

BUS_NAME = "outbox-test-bus"


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and a fixed region; nothing can reach a real account."""
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_REGION", REGION)
    # Without it, botocore builds account-based endpoints and moto's stream calls 404.
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    monkeypatch.setenv("MOTO_ACCOUNT_ID", ACCOUNT_ID)


@pytest.fixture
def aws(aws_env: None) -> Iterator[None]:
    with mock_aws():
        yield


@dataclass
class OutboxTable:
    """The table, with the reads the tests need to observe the publisher's effects."""

    client: Any
    name: str

    def put(self, item: dict[str, Any]) -> None:
        self.client.put_item(TableName=self.name, Item=item)

    def get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self.client.get_item(
            TableName=self.name, Key=key, ConsistentRead=True
        ).get("Item")
        return item

    def sort_keys(self) -> set[str]:
        return {item["SK"]["S"] for item in self._scan()}

    def pending_sort_keys(self) -> set[str]:
        """Sort keys in the sparse pending index (items carrying outbox_pending_shard)."""
        return {item["SK"]["S"] for item in self._scan(IndexName=PENDING_INDEX)}

    def _scan(self, **kwargs: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for page in self.client.get_paginator("scan").paginate(TableName=self.name, **kwargs):
            items.extend(page["Items"])
        return items


@pytest.fixture
def dynamodb_client(aws: None) -> Any:
    return boto3.client("dynamodb", region_name=REGION)


@pytest.fixture
def outbox_table(dynamodb_client: Any) -> OutboxTable:
    create_outbox_table(dynamodb_client, TABLE_NAME)
    return OutboxTable(client=dynamodb_client, name=TABLE_NAME)


@dataclass
class EventBus:
    """A bus whose rule forwards every event of the test source to a queue."""

    client: Any
    name: str
    arn: str
    sqs: Any
    queue_url: str

    def received(self) -> list[dict[str, Any]]:
        """Drain the queue: the events the bus delivered, as EventBridge shapes them."""
        events: list[dict[str, Any]] = []
        while True:
            messages = self.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
            ).get("Messages", [])
            if not messages:
                return events
            for message in messages:
                events.append(json.loads(message["Body"]))
                self.sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )

    def received_ids(self) -> list[str]:
        return [event["detail"]["id"] for event in self.received()]


@pytest.fixture
def events_client(aws: None) -> Any:
    return boto3.client("events", region_name=REGION)


@pytest.fixture
def event_bus(events_client: Any) -> EventBus:
    sqs = boto3.client("sqs", region_name=REGION)
    queue_url = sqs.create_queue(QueueName="published")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    bus_arn = events_client.create_event_bus(Name=BUS_NAME)["EventBusArn"]
    events_client.put_rule(
        Name="all-test-events",
        EventBusName=BUS_NAME,
        EventPattern=json.dumps({"source": [SOURCE]}),
    )
    events_client.put_targets(
        Rule="all-test-events",
        EventBusName=BUS_NAME,
        Targets=[{"Id": "published", "Arn": queue_arn}],
    )
    return EventBus(client=events_client, name=BUS_NAME, arn=bus_arn, sqs=sqs, queue_url=queue_url)


# ------------------------------------------------------------------------------ SNS

TOPIC_NAME = "outbox-test-topic"


@dataclass
class SnsMessage:
    """One message as a raw-delivery SQS subscriber got it."""

    body: str
    attributes: dict[str, str]
    group_id: str | None
    deduplication_id: str | None

    @property
    def event_id(self) -> str:
        event_id: str = json.loads(self.body)["id"]
        return event_id


@dataclass
class SnsTopic:
    """A topic with an SQS queue subscribed with RawMessageDelivery (body = the message)."""

    client: Any
    arn: str
    sqs: Any
    queue_url: str

    def received(self) -> list[SnsMessage]:
        """Drain the queue: every message the topic delivered, in queue order."""
        messages: list[SnsMessage] = []
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=0,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
            ).get("Messages", [])
            if not batch:
                return messages
            for message in batch:
                system = message.get("Attributes", {})
                messages.append(
                    SnsMessage(
                        body=message["Body"],
                        attributes={
                            name: value["StringValue"]
                            for name, value in message.get("MessageAttributes", {}).items()
                        },
                        group_id=system.get("MessageGroupId"),
                        deduplication_id=system.get("MessageDeduplicationId"),
                    )
                )
                self.sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )

    def received_ids(self) -> list[str]:
        return [message.event_id for message in self.received()]


def make_sns_topic(*, fifo: bool = False) -> SnsTopic:
    """Inside ``mock_aws``: a topic (FIFO: ``.fifo``, no content-based dedup) and its queue."""
    sns = boto3.client("sns", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    suffix = ".fifo" if fifo else ""
    topic_attributes = {"FifoTopic": "true"} if fifo else {}
    topic_arn = sns.create_topic(Name=TOPIC_NAME + suffix, Attributes=topic_attributes)["TopicArn"]
    queue_attributes = {"FifoQueue": "true"} if fifo else {}
    queue_url = sqs.create_queue(QueueName="sns-published" + suffix, Attributes=queue_attributes)[
        "QueueUrl"
    ]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    sns.subscribe(
        TopicArn=topic_arn,
        Protocol="sqs",
        Endpoint=queue_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    return SnsTopic(client=sns, arn=topic_arn, sqs=sqs, queue_url=queue_url)


@pytest.fixture
def sns_topic(aws: None) -> SnsTopic:
    return make_sns_topic()


@pytest.fixture
def sns_fifo_topic(aws: None) -> SnsTopic:
    return make_sns_topic(fifo=True)
