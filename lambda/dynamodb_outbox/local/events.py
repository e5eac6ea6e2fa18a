"""The records and events Lambda hands to a function, built from API responses.

A stream record comes from ``dynamodbstreams.get_records`` and a queue message
from ``sqs.receive_message`` (boto3 shapes: datetimes, raw bytes, PascalCase
message attributes). Lambda delivers them as JSON: epoch-second
``ApproximateCreationDateTime``, base64 binary values, camelCase
``messageAttributes``, plus ``eventSourceARN`` and ``awsRegion``. The functions
here do that translation, and size the result the way the 6 MB invocation
payload limit counts it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TypedDict

from dynamodb_outbox._clock import iso_milliseconds

__all__ = [
    "PAYLOAD_LIMIT_BYTES",
    "PayloadMeter",
    "SqsEventRecord",
    "StreamEventRecord",
    "epoch_seconds",
    "iso_timestamp",
    "record_size",
    "sqs_record",
    "stream_record",
]

# Lambda's invocation payload limit ("6 MB", synchronous request). Read as
# 6 MiB: the larger reading gives batches at least as big as AWS's, so a
# handler tested here is not surprised by a bigger batch in AWS.
PAYLOAD_LIMIT_BYTES = 6 * 1024 * 1024

_EVENT_OVERHEAD_BYTES = len('{"Records":[]}')


class StreamRecordData(TypedDict, total=False):
    """``record["dynamodb"]`` of a Lambda DynamoDB stream record."""

    ApproximateCreationDateTime: int
    Keys: dict[str, Any]
    NewImage: dict[str, Any]
    OldImage: dict[str, Any]
    SequenceNumber: str
    SizeBytes: int
    StreamViewType: str


class StreamEventRecord(TypedDict, total=False):
    """One record of the event a DynamoDB stream mapping sends."""

    eventID: str
    eventName: str
    eventVersion: str
    eventSource: str
    awsRegion: str
    dynamodb: StreamRecordData
    eventSourceARN: str
    userIdentity: dict[str, str]


class SqsEventRecord(TypedDict, total=False):
    """One record of the event an SQS mapping sends."""

    messageId: str
    receiptHandle: str
    body: str
    attributes: dict[str, str]
    messageAttributes: dict[str, dict[str, Any]]
    md5OfBody: str
    md5OfMessageAttributes: str
    eventSource: str
    eventSourceARN: str
    awsRegion: str


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def attribute_value_to_json(value: Any) -> Any:
    """A DynamoDB ``AttributeValue`` from boto3 (raw bytes) as Lambda's JSON has it (base64)."""
    if isinstance(value, bytes | bytearray):
        return _b64(bytes(value))
    if isinstance(value, Mapping):
        return {key: attribute_value_to_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set):
        return [attribute_value_to_json(item) for item in value]
    return value


def epoch_seconds(value: Any) -> float:
    """A timestamp from an API response (datetime, or epoch number) as epoch seconds."""
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return aware.timestamp()
    return float(value)


def iso_timestamp(epoch: float) -> str:
    """``2019-11-14T00:13:49.717Z``, the timestamp format of Lambda's failure records."""
    return iso_milliseconds(datetime.fromtimestamp(epoch, UTC))


def stream_record(
    raw: Mapping[str, Any], *, event_source_arn: str, region: str
) -> StreamEventRecord:
    """The Lambda event record for one ``GetRecords`` record.

    ``ApproximateCreationDateTime`` is epoch seconds rounded down, as DynamoDB
    Streams documents it; ``awsRegion`` is the stream's region (moto always says
    us-east-1).
    """
    source = raw["dynamodb"]
    data: StreamRecordData = {}
    if "ApproximateCreationDateTime" in source:
        data["ApproximateCreationDateTime"] = int(
            epoch_seconds(source["ApproximateCreationDateTime"])
        )
    for key in ("Keys", "NewImage", "OldImage"):
        if key in source:
            data[key] = attribute_value_to_json(source[key])
    data["SequenceNumber"] = str(source["SequenceNumber"])
    if "SizeBytes" in source:
        data["SizeBytes"] = int(source["SizeBytes"])
    if "StreamViewType" in source:
        data["StreamViewType"] = str(source["StreamViewType"])
    record: StreamEventRecord = {
        "eventID": str(raw["eventID"]),
        "eventName": str(raw["eventName"]),
        "eventVersion": str(raw.get("eventVersion", "1.1")),
        "eventSource": "aws:dynamodb",
        "awsRegion": region,
        "dynamodb": data,
        "eventSourceARN": event_source_arn,
    }
    identity = raw.get("userIdentity")
    if identity:
        # The Streams API says PrincipalId/Type; the Lambda event says principalId/type.
        record["userIdentity"] = {
            key[:1].lower() + key[1:]: str(value) for key, value in identity.items()
        }
    return record


def _message_attribute(value: Mapping[str, Any]) -> dict[str, Any]:
    converted: dict[str, Any] = {
        "stringListValues": list(value.get("StringListValues", [])),
        "binaryListValues": [_b64(v) for v in value.get("BinaryListValues", [])],
        "dataType": value.get("DataType"),
    }
    if "StringValue" in value:
        converted["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        converted["binaryValue"] = _b64(value["BinaryValue"])
    return converted


def sqs_record(message: Mapping[str, Any], *, queue_arn: str, region: str) -> SqsEventRecord:
    """The Lambda event record for one ``ReceiveMessage`` message.

    ``message`` must have been received with all system attributes
    (``MessageSystemAttributeNames=["All"]``) and all message attributes.
    """
    record: SqsEventRecord = {
        "messageId": str(message["MessageId"]),
        "receiptHandle": str(message["ReceiptHandle"]),
        "body": str(message.get("Body", "")),
        "attributes": {key: str(value) for key, value in message.get("Attributes", {}).items()},
        "messageAttributes": {
            name: _message_attribute(value)
            for name, value in message.get("MessageAttributes", {}).items()
        },
        "md5OfBody": str(message.get("MD5OfBody", "")),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }
    if message.get("MD5OfMessageAttributes"):
        record["md5OfMessageAttributes"] = str(message["MD5OfMessageAttributes"])
    return record


def record_size(record: Mapping[str, Any]) -> int:
    """Bytes ``record`` adds to the invocation payload (compact JSON, UTF-8)."""
    return len(json.dumps(record, separators=(",", ":")).encode("utf-8"))


class PayloadMeter:
    """Counts the bytes of ``{"Records": [...]}`` as records are added, against the limit."""

    def __init__(self, limit: int = PAYLOAD_LIMIT_BYTES) -> None:
        self.limit = limit
        self.size = _EVENT_OVERHEAD_BYTES
        self.count = 0

    def fits(self, record_bytes: int) -> bool:
        """Whether one more record of ``record_bytes`` keeps the payload within the limit."""
        return self.size + record_bytes + (1 if self.count else 0) <= self.limit

    def add(self, record_bytes: int) -> None:
        self.size += record_bytes + (1 if self.count else 0)
        self.count += 1
