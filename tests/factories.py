"""Builders for test data: envelopes and DynamoDB stream records as Lambda delivers them.

Generic on purpose: any handler fed by a DynamoDB Streams mapping can use
:func:`stream_record`; :func:`outbox_stream_record` adds the outbox item contract.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.outbox_item import outbox_item

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"
TABLE_NAME = "outbox-test"
STREAM_ARN = (
    f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/{TABLE_NAME}/stream/2024-01-01T00:00:00.000"
)
SOURCE = "app.orders"

# Real sequence numbers are decimal strings of 21+ digits that grow within a shard.
_FIRST_SEQUENCE_NUMBER = 100_000_000_000_000_000_000


def sequence_numbers(start: int = 1) -> Iterator[str]:
    """Increasing sequence numbers, as one shard hands them out."""
    for n in itertools.count(start):
        yield str(_FIRST_SEQUENCE_NUMBER + n)


def make_envelope(**overrides: Any) -> Envelope:
    fields: dict[str, Any] = {
        "type": "OrderPlaced",
        "source": SOURCE,
        "subject": "ORDER#1001",
        "data": {"order_id": "1001", "total": 42.5},
    }
    fields.update(overrides)
    return Envelope(**fields)


def stream_record(
    item: Mapping[str, Any] | None,
    seq: str | None,
    event_name: str = "INSERT",
    *,
    keys: Mapping[str, Any] | None = None,
    key_names: Sequence[str] = ("PK", "SK"),
    old_image: Mapping[str, Any] | None = None,
    view_type: str = "NEW_IMAGE",
    event_source_arn: str = STREAM_ARN,
) -> dict[str, Any]:
    """One record of a Lambda DynamoDB Streams event.

    ``item`` is the item in low-level JSON (``{"PK": {"S": ...}}``); it becomes
    ``NewImage`` when the view type carries new images and the event is not a
    REMOVE. ``keys`` defaults to ``item``'s ``key_names``. ``seq=None`` leaves
    ``SequenceNumber`` out.
    """
    item = dict(item or {})
    data: dict[str, Any] = {
        "ApproximateCreationDateTime": 1_700_000_000.0,
        "Keys": dict(keys) if keys is not None else {k: item[k] for k in key_names if k in item},
        "SizeBytes": len(json.dumps(item)),
        "StreamViewType": view_type,
    }
    if seq is not None:
        data["SequenceNumber"] = seq
    if event_name != "REMOVE" and view_type in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES"):
        data["NewImage"] = item
    if old_image is not None and view_type in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES"):
        data["OldImage"] = dict(old_image)
    return {
        "eventID": uuid.uuid4().hex,
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": data,
        "eventSourceARN": event_source_arn,
    }


def outbox_stream_record(
    envelope: Envelope, pk: str, seq: str | None, **kwargs: Any
) -> dict[str, Any]:
    """The INSERT record of the outbox item the writer commits for ``envelope``."""
    return stream_record(outbox_item(pk, envelope), seq, **kwargs)


def stream_event(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"Records": [dict(record) for record in records]}
