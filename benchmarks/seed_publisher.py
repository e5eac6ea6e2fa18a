"""The seed article's publisher, as written (benchmark reference, not shipped code).

``publicarOutbox`` from the pattern write-up in ``shared/seeds``, translated
line for line: for each outbox INSERT, one ``PutEvents`` with one entry, then
``DeleteItem`` of the outbox item; an exception adds the record's ``eventID``
to ``batchItemFailures`` and the loop goes on. It never reads
``FailedEntryCount``: an entry PutEvents refused (throttled) is deleted as if it
had been published. Kept apart from :mod:`benchmarks.baseline_publisher`
(which honours our contract) so that the throttling table shows what the
pattern as people copy it does under pressure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dynamodb_outbox.envelope import OUTBOX_SK_PREFIX, Envelope


def publicar_outbox(
    records: Sequence[Mapping[str, Any]],
    *,
    events_client: Any,
    dynamodb_client: Any,
    event_bus_name: str,
    table_name: str,
) -> dict[str, list[dict[str, str]]]:
    fallidos: list[dict[str, str]] = []
    for record in records:
        if record.get("eventName") != "INSERT":
            continue
        item = record["dynamodb"]["NewImage"]
        if not item.get("SK", {}).get("S", "").startswith(OUTBOX_SK_PREFIX):
            continue
        try:
            evento = Envelope.from_json(item["envelope"]["S"])
            events_client.put_events(
                Entries=[
                    {
                        "EventBusName": event_bus_name,
                        "Source": evento.source,
                        "DetailType": evento.type,
                        "Detail": item["envelope"]["S"],
                    }
                ]
            )
            dynamodb_client.delete_item(
                TableName=table_name, Key={"PK": item["PK"], "SK": item["SK"]}
            )
        except Exception:  # the seed's bare catch
            fallidos.append({"itemIdentifier": record["eventID"]})
    return {"batchItemFailures": fallidos}
