"""What reaches a consumer: the SQS event's wire shapes, and the envelope a body carries."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NotRequired, TypedDict

from aws_lambda_powertools.utilities.typing import LambdaContext

from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.sender_checks import read_body
from dynamodb_outbox.stream_types import PartialBatchResponse


class SQSRecordAttributes(TypedDict):
    """System attributes of a received message (FIFO ones only on FIFO queues)."""

    ApproximateReceiveCount: str
    SentTimestamp: str
    SenderId: str
    ApproximateFirstReceiveTimestamp: str
    MessageGroupId: NotRequired[str]
    MessageDeduplicationId: NotRequired[str]
    SequenceNumber: NotRequired[str]


class SQSRecord(TypedDict):
    """One message of an SQS event; ``messageId`` is its ``itemIdentifier``."""

    messageId: str
    receiptHandle: str
    body: str
    attributes: SQSRecordAttributes
    messageAttributes: dict[str, Any]
    md5OfBody: str
    eventSource: str
    eventSourceARN: str
    awsRegion: str


class SQSEvent(TypedDict):
    """What an SQS event source mapping passes to the function."""

    Records: list[SQSRecord]


#: The Lambda handler :meth:`OutboxConsumer.handler` builds.
LambdaHandler = Callable[[SQSEvent, LambdaContext], PartialBatchResponse]


class MalformedBatch(ValueError):
    """The event cannot be answered record by record; raising retries the whole batch."""


def parse_body(body: object, *, parse_float: Callable[[str], Any] = float) -> Envelope:
    """The envelope an SQS message body carries, whoever delivered it.

    Data numbers with a fraction or an exponent are ``float`` unless
    ``parse_float`` says otherwise: ``parse_float=Decimal`` gives the exact
    digits the producer wrote (money), see :mod:`dynamodb_outbox.payload_json`.

    Three shapes reach a consumer queue:

    * EventBridge rule with an SQS target: the whole EventBridge event, whose
      ``detail`` is the envelope and ``detail-type`` its type;
    * SNS with raw message delivery: the envelope JSON itself;
    * SNS without raw delivery: ``{"Type": "Notification", "Message": "<envelope
      JSON>", ...}``. Accepted so that forgetting ``raw_message_delivery`` on a
      subscription costs nothing.

    Raises :class:`InvalidEnvelope` (with the reason) for anything else. It
    checks no sender: a consumer checks the one it was configured to expect
    (:mod:`dynamodb_outbox.sender_checks`).
    """
    return read_body(body, parse_float=parse_float).envelope


def message_group(record: Mapping[str, Any]) -> str | None:
    attributes = record.get("attributes")
    group = attributes.get("MessageGroupId") if isinstance(attributes, Mapping) else None
    return group if isinstance(group, str) and group else None


def message_ids(event: Mapping[str, Any]) -> list[str]:
    """Every record's messageId, checked BEFORE any record is processed.

    A record without a usable messageId cannot be listed in
    ``batchItemFailures``: an empty or null ``itemIdentifier`` makes Lambda fail
    the whole batch anyway, and leaving it out would report it as a success and
    delete it. So the only honest answer is to raise (whole batch retried and,
    if it keeps happening, sent to the DLQ). Checking first means nothing was
    done for a batch that is going to be retried in full.
    """
    records = event.get("Records") if isinstance(event, Mapping) else None
    if not isinstance(records, list):
        raise MalformedBatch("event has no 'Records' list: is this an SQS event?")
    ids: list[str] = []
    for position, record in enumerate(records):
        message_id = record.get("messageId") if isinstance(record, Mapping) else None
        if not isinstance(message_id, str) or not message_id:
            raise MalformedBatch(
                f"record {position} has no messageId, so it cannot be reported on its own; "
                "failing the whole batch so that it is retried rather than deleted"
            )
        ids.append(message_id)
    return ids
