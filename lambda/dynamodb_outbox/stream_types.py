"""Wire shapes of the DynamoDB Streams events Lambda delivers, and of the replies
Lambda reads from the stream publisher and the SQS consumer alike; and the one
reader of a string attribute in DynamoDB's low-level JSON (:func:`string_attribute`).

Field names are AWS's own, so a reader can hold them against the AWS reference.
They describe what AWS promises; the publisher still checks every field it
reads, because one malformed record must be quarantined or skipped, never crash
the batch and block its shard.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

#: A low-level DynamoDB attribute value, e.g. ``{"S": "ORDER#1"}`` or ``{"N": "3"}``.
AttributeValue = dict[str, Any]

#: An item or key in DynamoDB's low-level (typed) JSON.
AttributeMap = dict[str, AttributeValue]

StreamViewType = Literal["KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"]
EventName = Literal["INSERT", "MODIFY", "REMOVE"]

__all__ = [
    "AttributeMap",
    "AttributeValue",
    "BatchItemFailure",
    "DynamoDBStreamEvent",
    "DynamoDBStreamRecord",
    "EventName",
    "PartialBatchResponse",
    "StreamRecordData",
    "StreamViewType",
    "UserIdentity",
    "lookup",
    "string_attribute",
]


def lookup(mapping: object, name: str) -> object:
    """``mapping[name]`` when ``mapping`` is a mapping holding it, else None."""
    # A dict first: an isinstance check against the Mapping ABC costs several
    # times as much, and the publisher makes a dozen lookups per record.
    if type(mapping) is dict or isinstance(mapping, Mapping):
        return mapping.get(name)
    return None


def string_attribute(item: object, name: str) -> str | None:
    """The string (``S``) value of attribute ``name`` of a low-level item, key or image.

    None when ``item`` is no mapping, lacks the attribute, or holds it as another type.
    """
    value = lookup(lookup(item, name), "S")
    return value if isinstance(value, str) else None


class StreamRecordData(TypedDict, total=False):
    """The ``dynamodb`` member of a record (DynamoDB Streams ``StreamRecord``)."""

    ApproximateCreationDateTime: float
    Keys: AttributeMap
    NewImage: AttributeMap
    OldImage: AttributeMap
    SequenceNumber: str
    SizeBytes: int
    StreamViewType: StreamViewType


class UserIdentity(TypedDict, total=False):
    """On TTL deletions: ``{"type": "Service", "principalId": "dynamodb.amazonaws.com"}``."""

    type: str
    principalId: str


class DynamoDBStreamRecord(TypedDict, total=False):
    """One record of a Lambda DynamoDB Streams event."""

    eventID: str
    eventName: EventName
    eventVersion: str
    eventSource: str
    awsRegion: str
    dynamodb: StreamRecordData
    eventSourceARN: str
    userIdentity: UserIdentity


class DynamoDBStreamEvent(TypedDict):
    """What a DynamoDB Streams event source mapping passes to the function."""

    Records: list[DynamoDBStreamRecord]


class BatchItemFailure(TypedDict):
    """The record Lambda retries: never empty.

    For streams ``itemIdentifier`` is the record's ``dynamodb.SequenceNumber``
    (Lambda resumes there); for SQS, the message's ``messageId``.
    """

    itemIdentifier: str


class PartialBatchResponse(TypedDict):
    """Read by Lambda only when the mapping sets ``ReportBatchItemFailures``."""

    batchItemFailures: list[BatchItemFailure]
