"""A subject's pending sequences, as both publishing paths hold them on the ordered path.

An event written with a ``sequence`` (:meth:`OutboxWriter.new_event`) has it on
its outbox item too, with its subject (``outbox_sequence``, ``outbox_subject``):
DynamoDB Streams orders records per item only, and every event is an item of
its own, so the order among a subject's events is the sequence, not the order
the stream or the pending index hands them over (docs/decisions.md, "What "in
order per subject" means on the ordered path").

:func:`pending_sequences` reads one partition's pending sequenced events with
one consistent ``Query`` (pages followed): it returns the keys and the
attributes of :data:`QUERY_ATTRIBUTES` only, never the envelopes, and the
module's IAM grants exactly that (main.tf, ``sequence_query_attributes``;
sweeper.tf, publisher.tf). DynamoDB charges it for the full size of the items
read, though (docs/decisions.md, "What "in order per subject" means").

:func:`lower_pending` is the rule both paths apply: a sequenced event goes
only after every lower sequence of its subject still pending. Both read those
lower events by key and send them first (publisher.py, sweeper.py).

A sequenced event's subject is its partition key value (the writer refuses
anything else), so one partition's Query holds every pending event of the
subject.
"""

from __future__ import annotations

import json
from collections.abc import Container, Mapping
from typing import Any, Final, Literal, Protocol

from dynamodb_outbox.outbox_item import (
    ATTR_PENDING_SHARD,
    ATTR_SEQUENCE,
    ATTR_STATUS,
    ATTR_SUBJECT,
    OUTBOX_SK_PREFIX,
)
from dynamodb_outbox.pending_index import is_pending
from dynamodb_outbox.stream_types import string_attribute
from dynamodb_outbox.table_keys import TableKeys

__all__ = [
    "QUERY_ATTRIBUTES",
    "PendingSequences",
    "SequenceReader",
    "lower_pending",
    "partition_of",
    "pending_sequences",
    "sequence_of",
    "subject_of",
]

#: What the Query reads besides the keys (main.tf's ``sequence_query_attributes``).
QUERY_ATTRIBUTES: Final = (ATTR_SUBJECT, ATTR_SEQUENCE, ATTR_STATUS, ATTR_PENDING_SHARD)

#: subject -> its pending sequenced events as (sequence, sort key), ascending.
PendingSequences = dict[str, list[tuple[int, str]]]


class SequenceReader(Protocol):
    """The part of the boto3 DynamoDB client that reads a partition's sequences."""

    def query(
        self,
        *,
        TableName: str,
        KeyConditionExpression: str,
        ExpressionAttributeNames: Mapping[str, str],
        ExpressionAttributeValues: Mapping[str, Any],
        ProjectionExpression: str = ...,
        Select: Literal["SPECIFIC_ATTRIBUTES"] = ...,
        ConsistentRead: bool = ...,
        ExclusiveStartKey: Mapping[str, Any] = ...,
    ) -> Mapping[str, Any]: ...


def sequence_of(item: object) -> int | None:
    """The event's sequence from its outbox item's own attribute; None when it has none."""
    value = item.get(ATTR_SEQUENCE) if isinstance(item, Mapping) else None
    text = value.get("N") if isinstance(value, Mapping) else None
    if not isinstance(text, str):
        return None
    try:
        return int(text)
    except ValueError:
        return None


def subject_of(item: object) -> str | None:
    return string_attribute(item, ATTR_SUBJECT)


def partition_of(key: Mapping[str, Any], table_keys: TableKeys) -> str:
    """A key's (or an item's) partition key value as text, to group by partition."""
    return json.dumps(key.get(table_keys.partition), sort_keys=True)


def pending_sequences(
    client: SequenceReader,
    table_name: str,
    partition_value: Mapping[str, Any],
    table_keys: TableKeys,
) -> tuple[PendingSequences, int]:
    """The pending sequenced events of the partition ``partition_value``, and the calls made.

    Quarantined items are left out: a quarantined event leaves a gap by design
    and never holds its subject.
    """
    partition_name, sort_name = table_keys.names
    names = {"#pk": partition_name, "#sk": sort_name}
    names.update({f"#a{n}": name for n, name in enumerate(QUERY_ATTRIBUTES)})
    request: dict[str, Any] = {
        "TableName": table_name,
        "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :outbox)",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": {
            ":pk": partition_value,
            ":outbox": {"S": OUTBOX_SK_PREFIX},
        },
        # Select is what the roles' dynamodb:Select condition checks.
        "ProjectionExpression": ", ".join(
            ["#sk", *(f"#a{n}" for n in range(len(QUERY_ATTRIBUTES)))]
        ),
        "Select": "SPECIFIC_ATTRIBUTES",
        "ConsistentRead": True,
    }
    found: PendingSequences = {}
    calls = 0
    while True:
        calls += 1
        page = client.query(**request)
        for row in page.get("Items") or []:
            sequence, subject = sequence_of(row), subject_of(row)
            sk = string_attribute(row, sort_name)
            if sequence is not None and subject is not None and sk is not None and is_pending(row):
                found.setdefault(subject, []).append((sequence, sk))
        last = page.get("LastEvaluatedKey")
        if not last:
            break
        request["ExclusiveStartKey"] = last
    for entries in found.values():
        entries.sort()
    return found, calls


def lower_pending(
    pending: PendingSequences, subject: str, sequence: int, done: Container[str]
) -> list[str]:
    """Sort keys of ``subject``'s pending sequences below ``sequence`` not in ``done``, in order."""
    return [sk for seq, sk in pending.get(subject, []) if seq < sequence and sk not in done]
