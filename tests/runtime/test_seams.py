"""aws_seams: moto delivers from a rule or a subscription to a queue after the call, as AWS does.

A queue that refuses the message fails the delivery, not PutEvents or Publish;
the message goes to the target's (subscription's) DLQ if it fits there, and is
dropped otherwise, and the ledger records either.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from dynamodb_outbox.local import SeamLedger, aws_seams
from dynamodb_outbox.sizes import QUEUE_MAX_MESSAGE_BYTES

REGION = "eu-west-1"
SMALL = 1024  # SQS's smallest MaximumMessageSize
LARGE = QUEUE_MAX_MESSAGE_BYTES  # the module's queues


@pytest.fixture
def seams(monkeypatch: pytest.MonkeyPatch) -> Iterator[SeamLedger]:
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws(), aws_seams() as ledger:
        yield ledger


def _queue(name: str, size: int) -> tuple[str, str]:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName=name, Attributes={"MaximumMessageSize": str(size)})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return url, arn


def _messages(url: str) -> list[dict[str, Any]]:
    sqs = boto3.client("sqs", region_name=REGION)
    return sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    ).get("Messages", [])


def _put(detail_bytes: int, dlq_size: int) -> tuple[dict[str, Any], str, str]:
    queue_url, queue_arn = _queue("consumer", SMALL)
    dlq_url, dlq_arn = _queue("consumer-dlq", dlq_size)
    events = boto3.client("events", region_name=REGION)
    events.put_rule(Name="all", EventPattern='{"source":["shop"]}')
    events.put_targets(
        Rule="all", Targets=[{"Id": "q", "Arn": queue_arn, "DeadLetterConfig": {"Arn": dlq_arn}}]
    )
    answer = events.put_events(
        Entries=[
            {
                "Source": "shop",
                "DetailType": "T",
                "Detail": json.dumps({"blob": "x" * detail_bytes}),
            }
        ]
    )
    return answer, queue_url, dlq_url


def test_rule_target_gets_the_whole_event_as_compact_json(seams: SeamLedger) -> None:
    answer, queue_url, _dlq_url = _put(10, LARGE)

    (message,) = _messages(queue_url)
    event = json.loads(message["Body"])
    assert answer["FailedEntryCount"] == 0
    assert set(event) == {
        "version", "id", "detail-type", "source", "account", "time", "region", "resources",
        "detail",
    }  # fmt: skip
    assert message["Body"] == json.dumps(event, separators=(",", ":"))
    assert seams.dead_lettered == [] and seams.dropped == []


def test_queue_refusal_fails_delivery_not_put_events_and_dead_letters_what_fits(
    seams: SeamLedger,
) -> None:
    answer, queue_url, dlq_url = _put(2048, LARGE)

    assert answer["FailedEntryCount"] == 0, "PutEvents succeeded: the bus had the event"
    assert _messages(queue_url) == []
    (dead,) = _messages(dlq_url)
    assert json.loads(dead["Body"])["detail"] == {"blob": "x" * 2048}
    assert {"ERROR_CODE", "ERROR_MESSAGE", "RULE_ARN", "TARGET_ARN"} <= set(
        dead["MessageAttributes"]
    )
    assert len(seams.dead_lettered) == 1 and seams.dropped == []


def test_refused_by_queue_and_dlq_the_event_is_dropped_and_counted(seams: SeamLedger) -> None:
    answer, queue_url, dlq_url = _put(2048, SMALL)

    assert answer["FailedEntryCount"] == 0
    assert _messages(queue_url) == [] and _messages(dlq_url) == []
    (dropped,) = seams.dropped
    assert dropped.queue_arn.endswith(":consumer") and dropped.dead_letter_queue_arn
    assert "shorter than 1024 bytes" in dropped.reason


@pytest.mark.parametrize("raw", [True, False])
def test_subscription_refusal_fails_delivery_not_publish(seams: SeamLedger, raw: bool) -> None:
    queue_url, queue_arn = _queue("consumer", SMALL)
    dlq_url, dlq_arn = _queue("consumer-dlq", LARGE)
    sns = boto3.client("sns", region_name=REGION)
    topic = sns.create_topic(Name="orders")["TopicArn"]
    sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=queue_arn,
        Attributes={
            "RawMessageDelivery": str(raw).lower(),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn}),
        },
    )

    sns.publish(TopicArn=topic, Message="x" * 2048)

    assert _messages(queue_url) == []
    (dead,) = _messages(dlq_url)
    assert ("x" * 2048) in dead["Body"]
    assert len(seams.dead_lettered) == 1 and seams.dropped == []


def test_sqs_counts_utf8_bytes_and_attributes(seams: SeamLedger) -> None:
    url, _arn = _queue("q", SMALL)
    sqs = boto3.client("sqs", region_name=REGION)
    sqs.send_message(QueueUrl=url, MessageBody="é" * 512)  # 1,024 bytes: fits
    with pytest.raises(sqs.exceptions.ClientError, match="shorter than 1024"):
        sqs.send_message(QueueUrl=url, MessageBody="é" * 512 + "x")
    with pytest.raises(sqs.exceptions.ClientError, match="shorter than 1024"):
        sqs.send_message(
            QueueUrl=url,
            MessageBody="x" * 1000,
            MessageAttributes={"a": {"DataType": "String", "StringValue": "y" * 20}},
        )
