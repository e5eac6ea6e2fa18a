"""The baseline: the shape of the common outbox sample, one record per call.

For each stream record: ``PutEvents`` with one entry, then ``DeleteItem`` of
the outbox item. It honours the same contract as ours where it costs no extra
call (only outbox INSERTs, stop at the first failed entry and report it as the
checkpoint), so the difference measured is the batching, not missing features.
It is a benchmark reference, not shipped code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dynamodb_outbox.envelope import OUTBOX_SK_PREFIX, Envelope


@dataclass
class BaselineResult:
    published: int = 0
    put_events_calls: int = 0
    delete_calls: int = 0
    failure_sequence_number: str | None = None

    def response(self) -> dict[str, list[dict[str, str]]]:
        if self.failure_sequence_number is None:
            return {"batchItemFailures": []}
        return {"batchItemFailures": [{"itemIdentifier": self.failure_sequence_number}]}


def publish_one_by_one(
    records: Sequence[Mapping[str, Any]],
    *,
    events_client: Any,
    dynamodb_client: Any,
    event_bus_name: str,
    table_name: str,
) -> BaselineResult:
    """Publish each outbox INSERT with its own PutEvents, then delete it with DeleteItem."""
    result = BaselineResult()
    for record in records:
        stream = record.get("dynamodb") or {}
        keys = stream.get("Keys") or {}
        if record.get("eventName") != "INSERT" or not keys.get("SK", {}).get("S", "").startswith(
            OUTBOX_SK_PREFIX
        ):
            continue
        body = stream["NewImage"]["envelope"]["S"]
        envelope = Envelope.from_json(body)
        result.put_events_calls += 1
        response = events_client.put_events(
            Entries=[
                {
                    "Time": datetime.fromisoformat(envelope.time),
                    "Source": envelope.source,
                    "DetailType": envelope.type,
                    "Detail": body,
                    "EventBusName": event_bus_name,
                }
            ]
        )
        if response.get("FailedEntryCount"):
            result.failure_sequence_number = stream.get("SequenceNumber")
            break
        result.published += 1
        result.delete_calls += 1
        dynamodb_client.delete_item(TableName=table_name, Key={"PK": keys["PK"], "SK": keys["SK"]})
    return result
