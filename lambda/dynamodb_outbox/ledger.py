"""A ledger of what a consumer processed, to prove each event took effect once.

The reference consumer's only effect is one ledger item per (consumer, event)
in the idempotency table, key ``id = "ledger#<consumer name>#<event id>"``,
updated with ``ADD times_processed :1``. The ADD is atomic, so the counter
records every run of the function, including the ones idempotency is meant to
prevent: ``times_processed == 1`` on every entry is the observable proof that
duplicates were skipped, which tests and the demo check.

Ledger items share the table with Powertools' idempotency records
(``idempotency#<consumer>#<hash>``); the prefixes keep them apart. They carry
``expiration`` too, so the table's TTL removes them with the records they
vouch for instead of letting them pile up forever.

This module imports only the standard library (no Powertools), so a demo or a
test can read the ledger without the consumer's dependencies.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal, Protocol, TypedDict

from dynamodb_outbox._clock import iso_milliseconds
from dynamodb_outbox.envelope import Envelope

# The public face (docs/python.md, "The public API"); the reference consumer
# uses the writing side.
__all__ = ["LedgerDynamoDBClient", "LedgerEntry", "read_ledger"]

LEDGER_KEY_PREFIX: Final = "ledger#"
KEY_ATTR: Final = "id"
EXPIRY_ATTR: Final = "expiration"

# Every attribute goes through a name placeholder: DynamoDB's reserved word
# list is long, and a name that collides with it fails only at run time.
_RECORD_UPDATE: Final = (
    "ADD #times_processed :one "
    "SET #consumer = :consumer, #event_id = :event_id, #event_type = :event_type, "
    "#subject = :subject, #first = if_not_exists(#first, :now), #last = :now, "
    "#expiration = :expiration"
)
_RECORD_NAMES: Final = {
    "#times_processed": "times_processed",
    "#consumer": "consumer",
    "#event_id": "event_id",
    "#event_type": "event_type",
    "#subject": "subject",
    "#first": "first_processed_at",
    "#last": "last_processed_at",
    "#expiration": EXPIRY_ATTR,
}


class LedgerDynamoDBClient(Protocol):
    """The part of the boto3 DynamoDB client the ledger uses."""

    # Keyword parameters, not **kwargs: boto3-stubs' typed client must satisfy it.
    def update_item(
        self,
        *,
        TableName: str,
        Key: Mapping[str, Any],
        UpdateExpression: str,
        ExpressionAttributeNames: Mapping[str, str],
        ExpressionAttributeValues: Mapping[str, Any],
        ReturnValues: Literal["UPDATED_NEW"],
    ) -> Mapping[str, Any]: ...

    def scan(
        self,
        *,
        TableName: str,
        ConsistentRead: bool,
        FilterExpression: str,
        ExpressionAttributeNames: Mapping[str, str],
        ExpressionAttributeValues: Mapping[str, Any],
        ExclusiveStartKey: Mapping[str, Any] = ...,
    ) -> Mapping[str, Any]: ...


class LedgerEntry(TypedDict):
    """One event as a consumer recorded it."""

    event_id: str
    event_type: str
    subject: str
    times_processed: int
    first_processed_at: str
    last_processed_at: str


def ledger_key(consumer_name: str, event_id: str) -> str:
    """``ledger#<consumer name>#<event id>``."""
    return f"{LEDGER_KEY_PREFIX}{consumer_name}#{event_id}"


def record_processed(
    client: LedgerDynamoDBClient,
    table_name: str,
    consumer_name: str,
    envelope: Envelope,
    *,
    expires_after_seconds: int,
    now: datetime | None = None,
) -> int:
    """Count one run of ``consumer_name`` on ``envelope``; return the new count.

    One ``UpdateItem``: atomic, so concurrent runs cannot hide each other, and
    ``first_processed_at`` keeps the first run's time (``if_not_exists``).
    """
    moment = now or datetime.now(UTC)
    response = client.update_item(
        TableName=table_name,
        Key={KEY_ATTR: {"S": ledger_key(consumer_name, envelope.id)}},
        UpdateExpression=_RECORD_UPDATE,
        ExpressionAttributeNames=_RECORD_NAMES,
        ExpressionAttributeValues={
            ":one": {"N": "1"},
            ":consumer": {"S": consumer_name},
            ":event_id": {"S": envelope.id},
            ":event_type": {"S": envelope.type},
            ":subject": {"S": envelope.subject},
            ":now": {"S": iso_milliseconds(moment)},
            ":expiration": {
                "N": str(int((moment + timedelta(seconds=expires_after_seconds)).timestamp()))
            },
        },
        ReturnValues="UPDATED_NEW",
    )
    return int(response["Attributes"]["times_processed"]["N"])


def read_ledger(
    client: LedgerDynamoDBClient, table_name: str, consumer_name: str
) -> list[LedgerEntry]:
    """Every ledger entry of ``consumer_name``, oldest event first (ULIDs sort by time).

    A strongly consistent Scan: the ledger is for tests and demos, where the
    table is small and reading one's own writes matters more than cost. The
    ``consumer`` equality keeps consumer ``a`` from seeing ``a-b``'s entries
    even though both keys start with ``ledger#a``.
    """
    entries: list[LedgerEntry] = []
    request: dict[str, Any] = {
        "TableName": table_name,
        "ConsistentRead": True,
        "FilterExpression": "begins_with(#id, :prefix) AND #consumer = :consumer",
        "ExpressionAttributeNames": {"#id": KEY_ATTR, "#consumer": "consumer"},
        "ExpressionAttributeValues": {
            ":prefix": {"S": ledger_key(consumer_name, "")},
            ":consumer": {"S": consumer_name},
        },
    }
    while True:
        page = client.scan(**request)
        for item in page.get("Items", []):
            entries.append(
                {
                    "event_id": item["event_id"]["S"],
                    "event_type": item["event_type"]["S"],
                    "subject": item["subject"]["S"],
                    "times_processed": int(item["times_processed"]["N"]),
                    "first_processed_at": item["first_processed_at"]["S"],
                    "last_processed_at": item["last_processed_at"]["S"],
                }
            )
        last_key = page.get("LastEvaluatedKey")
        if not last_key:
            break
        request["ExclusiveStartKey"] = last_key
    return sorted(entries, key=lambda entry: entry["event_id"])
