"""Helpers shared by the SNS publisher and sweeper tests: outbox writes, fault injection.

Failures are injected by thin wrappers around the real moto clients, so every
test still observes real publications and real table contents.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ulid import ULID

from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.outbox_item import ATTR_PENDING_SHARD, outbox_item, outbox_sk
from dynamodb_outbox.sinks import put_events_entry_size
from tests.factories import make_envelope, outbox_stream_record, sequence_numbers

if TYPE_CHECKING:
    from tests.functional.conftest import OutboxTable

FIXED_NOW = datetime(2026, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
FIXED_NOW_ISO = "2026-01-02T03:04:05.678Z"
PK = "ORDER#1001"


# -------------------------------------------------------------------------- writes


@dataclass
class Outbox:
    """Outbox items written to the table and their INSERT records, in write order."""

    envelopes: list[Envelope]
    records: list[dict[str, Any]]

    @property
    def ids(self) -> list[str]:
        return [envelope.id for envelope in self.envelopes]

    def sk(self, index: int) -> str:
        return outbox_sk(self.envelopes[index].id)

    def seq(self, index: int) -> str:
        sequence: str = self.records[index]["dynamodb"]["SequenceNumber"]
        return sequence

    def __add__(self, other: Outbox) -> Outbox:
        return Outbox(self.envelopes + other.envelopes, self.records + other.records)


def ulid_at(moment: datetime) -> str:
    return str(ULID.from_datetime(moment))


def write_outbox(
    table: OutboxTable,
    count: int,
    *,
    seqs: Iterator[str] | None = None,
    data_bytes: int = 0,
    pk: str = PK,
    made_at: datetime | None = None,
    subjects: list[str] | None = None,
) -> Outbox:
    """Commit ``count`` outbox items and build their INSERT records.

    ``made_at`` sets the ULID time of the first one (the next ones follow 1 ms
    apart, so ids keep growing); by default ids are made now.
    """
    seqs = seqs or sequence_numbers()
    envelopes: list[Envelope] = []
    records: list[dict[str, Any]] = []
    for n in range(count):
        data: dict[str, Any] = {"n": n}
        if data_bytes:
            data["blob"] = "x" * data_bytes
        overrides: dict[str, Any] = {"data": data}
        if made_at is not None:
            overrides["id"] = ulid_at(made_at + timedelta(milliseconds=n))
        if subjects is not None:
            overrides["subject"] = subjects[n % len(subjects)]
        envelope = make_envelope(**overrides)
        table.put(outbox_item(pk, envelope))
        envelopes.append(envelope)
        records.append(outbox_stream_record(envelope, pk, next(seqs)))
    return Outbox(envelopes, records)


def outbox_sort_keys(table: OutboxTable) -> set[str]:
    return {sk for sk in table.sort_keys() if sk.startswith("OUTBOX#")}


def assert_quarantined(
    table: OutboxTable, sk: str, reason_part: str, *, pk: str = PK, at: str = FIXED_NOW_ISO
) -> None:
    item = table.get({"PK": {"S": pk}, "SK": {"S": sk}})
    assert item is not None, "a quarantined item must stay in the table"
    assert item["outbox_status"] == {"S": "QUARANTINED"}
    assert reason_part in item["quarantine_reason"]["S"]
    assert item["quarantined_at"] == {"S": at}
    assert ATTR_PENDING_SHARD not in item
    assert sk not in table.pending_sort_keys()


# ---------------------------------------------------------------- fault injection


class RecordingSns:
    """Forwards PublishBatch to moto, except entries (by event id) or calls told to fail.

    ``failures`` maps an event id to the ``Failed`` entry fields SNS would answer
    (``Code``, ``SenderFault``...); ``omitted`` event ids are forwarded but left
    out of the answer, as if SNS had not said anything about them.
    """

    def __init__(
        self,
        real: Any,
        *,
        failures: dict[str, dict[str, Any]] | None = None,
        omitted: set[str] | None = None,
        raise_on_calls: dict[int, Exception] | None = None,
    ) -> None:
        self.real = real
        self.failures = failures or {}
        self.omitted = omitted or set()
        self.raise_on_calls = raise_on_calls or {}
        self.calls: list[list[dict[str, Any]]] = []

    def publish_batch(self, **kwargs: Any) -> dict[str, Any]:
        entries = list(kwargs["PublishBatchRequestEntries"])
        call = len(self.calls)
        self.calls.append(entries)
        if call in self.raise_on_calls:
            raise self.raise_on_calls[call]
        forwarded = [e for e in entries if sns_event_id(e) not in self.failures]
        response: dict[str, Any] = {"Successful": [], "Failed": []}
        if forwarded:
            real = self.real.publish_batch(
                TopicArn=kwargs["TopicArn"], PublishBatchRequestEntries=forwarded
            )
            response["Successful"] = [
                s for s in real.get("Successful", []) if _id_event(s["Id"]) not in self.omitted
            ]
            response["Failed"] = list(real.get("Failed", []))
        for entry in entries:
            failure = self.failures.get(sns_event_id(entry))
            if failure is not None:
                response["Failed"].append({"Id": entry["Id"], "Message": "injected"} | failure)
        return response

    def sent_ids(self) -> list[list[str]]:
        return [[sns_event_id(entry) for entry in call] for call in self.calls]


class RecordingEvents:
    """Forwards PutEvents to moto, except entries (by event id) or calls told to fail."""

    def __init__(
        self,
        real: Any,
        *,
        entry_errors: dict[str, str] | None = None,
        raise_on_calls: dict[int, Exception] | None = None,
        error_times: dict[str, int] | None = None,
    ) -> None:
        self.real = real
        self.entry_errors = entry_errors or {}
        self.raise_on_calls = raise_on_calls or {}
        #: how many times an entry of ``entry_errors`` fails before it goes through
        #: (absent: every time)
        self.error_times = dict(error_times or {})
        self.calls: list[list[dict[str, Any]]] = []

    def _fails(self, event_id: str) -> bool:
        if event_id not in self.entry_errors:
            return False
        left = self.error_times.get(event_id)
        if left is None:
            return True
        self.error_times[event_id] = left - 1
        return left > 0

    def put_events(self, **kwargs: Any) -> dict[str, Any]:
        entries = list(kwargs["Entries"])
        call = len(self.calls)
        self.calls.append(entries)
        if call in self.raise_on_calls:
            raise self.raise_on_calls[call]
        failing = {events_event_id(e) for e in entries if self._fails(events_event_id(e))}
        forwarded = [e for e in entries if events_event_id(e) not in failing]
        real_results = iter(self.real.put_events(Entries=forwarded)["Entries"] if forwarded else [])
        results: list[dict[str, Any]] = []
        for entry in entries:
            if events_event_id(entry) not in failing:
                results.append(next(real_results))
            else:
                code = self.entry_errors[events_event_id(entry)]
                results.append({"ErrorCode": code, "ErrorMessage": f"injected {code}"})
        return {"FailedEntryCount": sum("ErrorCode" in r for r in results), "Entries": results}

    def sent_ids(self) -> list[list[str]]:
        return [[events_event_id(entry) for entry in call] for call in self.calls]

    def request_sizes(self) -> list[int]:
        """Each call's request size by AWS's PutEvents entry-size formula."""
        return [
            sum(
                put_events_entry_size(
                    source=e["Source"],
                    detail_type=e["DetailType"],
                    detail=e["Detail"],
                    resources=e.get("Resources", ()),
                    has_time="Time" in e,
                )
                for e in call
            )
            for call in self.calls
        ]


def events_event_id(entry: dict[str, Any]) -> str:
    event_id: str = json.loads(entry["Detail"])["id"]
    return event_id


def sns_event_id(entry: dict[str, Any]) -> str:
    event_id: str = json.loads(entry["Message"])["id"]
    return event_id


def _id_event(entry_id: str) -> str:
    return entry_id.split("-", 1)[1]


@dataclass
class CountingDynamoDB:
    """Forwards the calls the sweeper and publisher may make; counts what comes back.

    No ``scan`` attribute: a sweeper that tried to Scan would fail loudly.
    ``before_batch_get`` runs before each BatchGetItem (to interleave another
    writer), ``stale_query_items`` replaces the index with an older snapshot.
    """

    real: Any
    queries: list[dict[str, Any]] = field(default_factory=list)
    query_items: int = 0
    query_scanned: int = 0
    batch_get_keys: int = 0
    batch_get_items: int = 0
    batch_get_calls: int = 0
    batch_get_requests: list[dict[str, Any]] = field(default_factory=list)
    unprocessed_batch_gets: int = 0  # calls that serve one key only; -1: serve none, ever
    #: sort keys DynamoDB never serves (handed back unprocessed on every call).
    never_served: set[str] = field(default_factory=set)
    before_batch_get: Any = None
    stale_query_items: dict[str, list[dict[str, Any]]] | None = None
    batch_write_requests: list[list[dict[str, Any]]] = field(default_factory=list)
    update_calls: int = 0

    def query(self, **kwargs: Any) -> dict[str, Any]:
        self.queries.append(kwargs)
        response = dict(self.real.query(**kwargs))
        if self.stale_query_items is not None and "IndexName" in kwargs:
            shard = kwargs["ExpressionAttributeValues"][":shard"]["S"]
            response = {"Items": self.stale_query_items.get(shard, []), "Count": 0}
            response["ScannedCount"] = len(response["Items"])
        self.query_items += len(response.get("Items", []))
        self.query_scanned += int(response.get("ScannedCount", 0))
        return response

    def batch_get_item(self, **kwargs: Any) -> dict[str, Any]:
        self.batch_get_calls += 1
        if self.before_batch_get is not None:
            hook, self.before_batch_get = self.before_batch_get, None
            hook()
        ((table, request),) = kwargs["RequestItems"].items()
        self.batch_get_keys += len(request["Keys"])
        self.batch_get_requests.append(request)
        if self.unprocessed_batch_gets < 0:
            # Throttled for good: nothing served, every key handed back.
            response: dict[str, Any] = {
                "Responses": {table: []},
                "UnprocessedKeys": {table: request},
            }
        elif self.unprocessed_batch_gets > 0:
            # Serve the first key, hand the rest back, as DynamoDB does when throttled.
            self.unprocessed_batch_gets -= 1
            first = {table: request | {"Keys": request["Keys"][:1]}}
            response = dict(self.real.batch_get_item(RequestItems=first))
            rest = request["Keys"][1:]
            response["UnprocessedKeys"] = {table: request | {"Keys": rest}} if rest else {}
        elif self.never_served:
            served = [key for key in request["Keys"] if key["SK"]["S"] not in self.never_served]
            withheld = [key for key in request["Keys"] if key["SK"]["S"] in self.never_served]
            response = (
                dict(self.real.batch_get_item(RequestItems={table: request | {"Keys": served}}))
                if served
                else {"Responses": {table: []}}
            )
            response["UnprocessedKeys"] = {table: request | {"Keys": withheld}} if withheld else {}
        else:
            response = dict(self.real.batch_get_item(**kwargs))
        self.batch_get_items += len(response.get("Responses", {}).get(table, []))
        return response

    def batch_write_item(self, **kwargs: Any) -> dict[str, Any]:
        ((_, requests),) = kwargs["RequestItems"].items()
        self.batch_write_requests.append(list(requests))
        return dict(self.real.batch_write_item(**kwargs))

    def update_item(self, **kwargs: Any) -> dict[str, Any]:
        self.update_calls += 1
        return dict(self.real.update_item(**kwargs))

    @property
    def items_read(self) -> int:
        """Index entries plus items returned to the sweeper: what it paid to read."""
        return self.query_items + self.batch_get_items
