"""The seed article's publisher, as written: the benchmarks' baseline (not shipped code).

``publicarOutbox`` from the pattern write-up in ``shared/seeds``, translated
line for line: for each stream record, skip all but ``INSERT``; unmarshall the
new image; skip items whose ``SK`` is not ``OUTBOX#``; one ``PutEvents`` with
one entry, then ``DeleteItem`` of the outbox item; an exception adds the
record's ``eventID`` to ``batchItemFailures`` and the loop goes on. The event
is not parsed: the seed sends its stored event as ``Detail`` and its type as
``DetailType``, with a fixed bus and ``Source`` (here the outbox item's
``envelope`` string and ``event_type`` attribute, and the caller's bus and
source). It never reads ``FailedEntryCount``: an entry PutEvents refused
(throttled) is deleted as if it had been published, which the throttling table
shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

_unmarshall = TypeDeserializer().deserialize


def publicar_outbox(
    records: Sequence[Mapping[str, Any]],
    *,
    events_client: Any,
    dynamodb_client: Any,
    event_bus_name: str,
    source: str,
    table_name: str,
) -> dict[str, list[dict[str, str]]]:
    fallidos: list[dict[str, str]] = []
    for r in records:
        if r.get("eventName") != "INSERT":
            continue
        image = r["dynamodb"]["NewImage"]
        item = {name: _unmarshall(value) for name, value in image.items()}
        if not str(item.get("SK", "")).startswith("OUTBOX#"):
            continue
        try:
            events_client.put_events(
                Entries=[
                    {
                        "EventBusName": event_bus_name,
                        "Source": source,
                        "DetailType": item["event_type"],
                        "Detail": item["envelope"],
                    }
                ]
            )
            dynamodb_client.delete_item(
                TableName=table_name, Key={"PK": image["PK"], "SK": image["SK"]}
            )
        except Exception:  # the seed's bare catch
            fallidos.append({"itemIdentifier": r["eventID"]})
    return {"batchItemFailures": fallidos}


def published(records: Sequence[Mapping[str, Any]], response: Mapping[str, Any]) -> int:
    """Outbox inserts the seed reports as done (it reports only failures)."""
    inserts = sum(
        1
        for r in records
        if r.get("eventName") == "INSERT"
        and r["dynamodb"]["NewImage"].get("SK", {}).get("S", "").startswith("OUTBOX#")
    )
    return inserts - len(response["batchItemFailures"])
