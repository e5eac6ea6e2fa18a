"""Builders for consumer tests: SQS events as Lambda delivers them, bodies as
EventBridge and SNS shape them, reads of the idempotency table and a recording
consumer function.

Plain functions, not fixtures, so unit and functional tests can both import them.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dynamodb_outbox.envelope import Envelope
from tests.factories import ACCOUNT_ID, REGION, make_envelope
from tests.support.moto_tables import IDEMPOTENCY_TABLE

STANDARD_QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:orders-consumer"
FIFO_QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:orders-consumer.fifo"
EVENT_BUS_NAME = "outbox-bus"

_sent_timestamps = itertools.count(1_700_000_000_000)


# --------------------------------------------------------------------------- bodies


def eventbridge_body(envelope: Envelope, *, detail_type: str | None = None) -> str:
    """The body an SQS target of an EventBridge rule receives: the whole event."""
    return json.dumps(
        {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": envelope.type if detail_type is None else detail_type,
            "source": envelope.source,
            "account": ACCOUNT_ID,
            "time": "2024-01-01T00:00:00Z",
            "region": REGION,
            "resources": [],
            "detail": envelope.to_dict(),
        }
    )


def sns_raw_body(envelope: Envelope) -> str:
    """SNS with raw message delivery: the message itself."""
    return envelope.to_json()


def sns_notification_body(envelope: Envelope) -> str:
    """SNS without raw delivery: a JSON notification whose Message is the envelope JSON."""
    return json.dumps(
        {
            "Type": "Notification",
            "MessageId": str(uuid.uuid4()),
            "TopicArn": f"arn:aws:sns:{REGION}:{ACCOUNT_ID}:outbox",
            "Message": envelope.to_json(),
            "Timestamp": "2024-01-01T00:00:00.000Z",
            "SignatureVersion": "1",
        }
    )


# --------------------------------------------------------------------------- SQS events


def sqs_record(
    body: str,
    message_id: str | None = None,
    *,
    queue_arn: str = STANDARD_QUEUE_ARN,
    receive_count: int = 1,
    group_id: str = "ORDER#1001",
) -> dict[str, Any]:
    """One record of a Lambda SQS event (``message_id`` defaults to a fresh UUID)."""
    attributes: dict[str, str] = {
        "ApproximateReceiveCount": str(receive_count),
        "SentTimestamp": str(next(_sent_timestamps)),
        "SenderId": "AIDAEXAMPLE",
        "ApproximateFirstReceiveTimestamp": "1700000000000",
    }
    if queue_arn.endswith(".fifo"):
        attributes["MessageGroupId"] = group_id
        attributes["MessageDeduplicationId"] = uuid.uuid4().hex
        attributes["SequenceNumber"] = str(next(_sent_timestamps))
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": f"handle-{uuid.uuid4().hex}",
        "body": body,
        "attributes": attributes,
        "messageAttributes": {},
        "md5OfBody": "0" * 32,
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": REGION,
    }


def sqs_event(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    return {"Records": [dict(record) for record in records]}


def redelivered(record: Mapping[str, Any]) -> dict[str, Any]:
    """The same message received again (same messageId, one more receive)."""
    again = dict(record)
    attributes = dict(record["attributes"])
    attributes["ApproximateReceiveCount"] = str(int(attributes["ApproximateReceiveCount"]) + 1)
    again["attributes"] = attributes
    again["receiptHandle"] = f"handle-{uuid.uuid4().hex}"
    return again


def envelopes(count: int, **overrides: Any) -> list[Envelope]:
    return [make_envelope(subject=f"ORDER#{1000 + n}", **overrides) for n in range(count)]


def failure_ids(response: Mapping[str, Any]) -> list[str]:
    return [failure["itemIdentifier"] for failure in response["batchItemFailures"]]


# --------------------------------------------------------------------------- DynamoDB


def scan_items(client: Any, table_name: str = IDEMPOTENCY_TABLE) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for page in client.get_paginator("scan").paginate(TableName=table_name, ConsistentRead=True):
        items.extend(page["Items"])
    return items


def idempotency_records(client: Any, table_name: str = IDEMPOTENCY_TABLE) -> list[dict[str, Any]]:
    """Powertools' records (keys ``idempotency#<consumer>#<hash>``), not ledger entries."""
    return [
        item
        for item in scan_items(client, table_name)
        if item["id"]["S"].startswith("idempotency#")
    ]


# --------------------------------------------------------------------------- the function


class Boom(RuntimeError):
    """What a failing consumer function raises in these tests."""


@dataclass
class Recorder:
    """A consumer function that records every call and every completed effect.

    ``fail_times[event_id] = n`` makes the first ``n`` calls for that event raise.
    ``effects`` counts completed runs per event id: the "exactly once in effect"
    the tests assert on.
    """

    fail_times: dict[str, int] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    effects: Counter[str] = field(default_factory=Counter)

    def __call__(self, envelope: Envelope) -> None:
        self.calls.append(envelope.id)
        if self.fail_times.get(envelope.id, 0) > 0:
            self.fail_times[envelope.id] -= 1
            raise Boom(f"cannot handle {envelope.id} yet")
        self.effects[envelope.id] += 1


def ids(items: Sequence[Envelope]) -> list[str]:
    return [item.id for item in items]
