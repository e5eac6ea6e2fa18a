"""The faults the demo injects, each one a thing that happens in production.

1. **The publisher dies between PutEvents and the delete.** A botocore hook on
   the functions' session raises :class:`SimulatedCrash` when the publisher
   sends its first ``BatchWriteItem``: its events are out, their outbox items
   are not deleted, the invocation fails. Lambda retries the batch (bisected),
   the events are published again, and the consumer must absorb the duplicates.
2. **EventBridge throttles some entries.** On the first PutEvents call the
   publisher makes after the crash, the second half of the entries is answered
   ``ThrottlingException`` (HTTP 200 with per-entry failures, as AWS does); only
   the first half is really sent. On the ordered path it is the first
   PublishBatch call instead, the second half answered ``Throttling`` in
   ``Failed``. The publisher must checkpoint at the first throttled entry and
   publish the rest on the retry.
3. **A poison outbox item**: an item whose ``envelope`` is not valid JSON, put
   with a raw ``PutItem`` (a buggy writer). It must end quarantined in the
   table, never published, without blocking the records behind it.
4. **A poison consumer message**: a body that is not an event, sent straight to
   the consumer queue. It must fail alone and, after ``maxReceiveCount``
   receives, sit in the consumer's DLQ.

The hooks sit on the session the handlers' ``boto3.client(...)`` calls use, so
the handler code runs unchanged: the faults happen "on the wire".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse, HTTPHeaders
from ulid import ULID

from demo.functions import current_function
from dynamodb_outbox.outbox_item import (
    ATTR_ENVELOPE,
    ATTR_EVENT_TYPE,
    ATTR_PENDING_SHARD,
    ATTR_PK,
    ATTR_SK,
    ATTR_STATUS,
    OUTBOX_SK_PREFIX,
    STATUS_PENDING,
    pending_shard,
)

THROTTLING_CODE = "ThrottlingException"
SNS_THROTTLING_CODE = "Throttling"
POISON_OUTBOX_PK = "ORDER#corrupted-by-a-buggy-writer"
POISON_MESSAGE_BODY = "this is not an outbox event (sent straight to the queue by the demo)"
_ENTRIES_KEY = "demo.faults.put_events.entries"


class SimulatedCrash(Exception):
    """The publisher's process died (injected): the invocation ends with an error."""


@dataclass
class PublisherCrash:
    """Fault 1: crash the publisher's first ``BatchWriteItem`` (after its PutEvents)."""

    publisher: str
    fired: bool = False

    def attach(self, session: boto3.Session) -> None:
        session.events.register("before-call.dynamodb.BatchWriteItem", self._before_delete)

    def _before_delete(self, params: Mapping[str, Any], **_: Any) -> None:
        if self.fired or current_function.get() != self.publisher:
            return
        self.fired = True
        raise SimulatedCrash(
            "publisher process died after PutEvents and before BatchWriteItem (injected by "
            "the demo)"
        )


@dataclass
class PutEventsThrottle:
    """Fault 2: on one PutEvents call, answer the second half ``ThrottlingException``."""

    publisher: str
    #: sends the entries that are not throttled; from a session without the hooks.
    events_client: Any
    after: PublisherCrash | None = None
    #: the same for PublishBatch (the ordered path); None when the stack has no topic.
    sns_client: Any = None
    fired: bool = False
    entries_in_call: int = 0
    throttled: int = 0
    throttled_ids: list[str] = field(default_factory=list)

    def attach(self, session: boto3.Session) -> None:
        session.events.register("before-parameter-build.events.PutEvents", self._remember)
        # botocore uses the first non-None answer of a before-call hook as the response.
        hook: Callable[..., Any] = self._before_call
        session.events.register("before-call.events.PutEvents", hook)
        session.events.register("before-parameter-build.sns.PublishBatch", self._remember_sns)
        sns_hook: Callable[..., Any] = self._before_sns_call
        session.events.register("before-call.sns.PublishBatch", sns_hook)

    @staticmethod
    def _remember_sns(params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        context[_ENTRIES_KEY] = (params.get("TopicArn"), list(params["PublishBatchRequestEntries"]))

    def _before_sns_call(
        self, context: dict[str, Any], **_: Any
    ) -> tuple[AWSResponse, dict[str, Any]] | None:
        topic_arn, entries = context.pop(_ENTRIES_KEY, (None, []))
        if not self._fires(entries) or self.sns_client is None:
            return None
        keep = len(entries) // 2
        sent, throttled = entries[:keep], entries[keep:]
        self.throttled_ids = [str(json.loads(entry["Message"])["id"]) for entry in throttled]
        answer = self.sns_client.publish_batch(TopicArn=topic_arn, PublishBatchRequestEntries=sent)
        self.entries_in_call = len(entries)
        self.throttled = len(throttled)
        parsed: dict[str, Any] = {
            "Successful": list(answer.get("Successful", [])),
            "Failed": list(answer.get("Failed", []))
            + [
                {
                    "Id": entry["Id"],
                    "Code": SNS_THROTTLING_CODE,
                    "Message": "Rate exceeded (injected)",
                    "SenderFault": False,
                }
                for entry in throttled
            ],
            "ResponseMetadata": {"HTTPStatusCode": 200, "HTTPHeaders": {}, "RetryAttempts": 0},
        }
        return AWSResponse("http://injected.invalid/", 200, HTTPHeaders(), None), parsed

    def _fires(self, entries: list[Any]) -> bool:
        if (
            self.fired
            or current_function.get() != self.publisher
            or (self.after is not None and not self.after.fired)
            or len(entries) < 2
        ):
            return False
        self.fired = True
        return True

    @staticmethod
    def _remember(params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        context[_ENTRIES_KEY] = list(params.get("Entries", []))

    def _before_call(
        self, context: dict[str, Any], **_: Any
    ) -> tuple[AWSResponse, dict[str, Any]] | None:
        entries: list[dict[str, Any]] = context.pop(_ENTRIES_KEY, [])
        if not self._fires(entries):
            return None
        keep = len(entries) // 2
        sent, throttled = entries[:keep], entries[keep:]
        self.throttled_ids = [_event_id(entry) for entry in throttled]
        answer = self.events_client.put_events(Entries=sent)
        self.entries_in_call = len(entries)
        self.throttled = len(throttled)
        parsed: dict[str, Any] = {
            "FailedEntryCount": int(answer.get("FailedEntryCount", 0)) + len(throttled),
            "Entries": list(answer["Entries"])
            + [
                {"ErrorCode": THROTTLING_CODE, "ErrorMessage": "Rate exceeded (injected)"}
                for _ in throttled
            ],
            "ResponseMetadata": {"HTTPStatusCode": 200, "HTTPHeaders": {}, "RetryAttempts": 0},
        }
        return AWSResponse("http://injected.invalid/", 200, HTTPHeaders(), None), parsed


def _event_id(entry: Mapping[str, Any]) -> str:
    try:
        return str(json.loads(entry["Detail"])["id"])
    except (KeyError, TypeError, ValueError):
        return "(unreadable detail)"


def write_poison_outbox_item(dynamodb: Any, table_name: str) -> dict[str, dict[str, str]]:
    """Fault 3: an outbox item whose envelope is truncated JSON; returns its key."""
    event_id = str(ULID())
    key = {ATTR_PK: {"S": POISON_OUTBOX_PK}, ATTR_SK: {"S": OUTBOX_SK_PREFIX + event_id}}
    dynamodb.put_item(
        TableName=table_name,
        Item={
            **key,
            ATTR_ENVELOPE: {"S": f'{{"id":"{event_id}","type":"OrderCreated","sour'},
            ATTR_EVENT_TYPE: {"S": "OrderCreated"},
            ATTR_STATUS: {"S": STATUS_PENDING},
            ATTR_PENDING_SHARD: {"S": pending_shard(event_id)},
        },
    )
    return key


def send_poison_message(sqs: Any, queue_url: str) -> str:
    """Fault 4: a body no consumer can parse, straight to the queue; returns its message id.

    A FIFO queue (the ordered path) needs a message group: a group of its own,
    so that no order's events wait behind it.
    """
    fifo = {}
    if queue_url.endswith(".fifo"):
        fifo = {"MessageGroupId": "poison", "MessageDeduplicationId": str(ULID())}
    message_id: str = sqs.send_message(QueueUrl=queue_url, MessageBody=POISON_MESSAGE_BODY, **fifo)[
        "MessageId"
    ]
    return message_id
