"""Deletes of published items overlap the next PutEvents call, without changing what is deleted."""

from __future__ import annotations

import threading
from typing import Any

from dynamodb_outbox.outbox_item import outbox_sk
from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies
from dynamodb_outbox.sinks import EventBridgeSink
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from tests.factories import make_envelope, outbox_stream_record, sequence_numbers

TABLE = "orders"
WAIT_SECONDS = 5.0


class BlockingEvents:
    """Accepts every entry; from call ``wait_on_call`` on, waits until a delete has started."""

    def __init__(self, delete_started: threading.Event, wait_on_call: int) -> None:
        self.delete_started = delete_started
        self.wait_on_call = wait_on_call
        self.calls = 0
        self.saw_delete_before_call: list[bool] = []

    def put_events(self, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        if self.calls >= self.wait_on_call:
            self.saw_delete_before_call.append(self.delete_started.wait(WAIT_SECONDS))
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "x"} for _ in kwargs["Entries"]]}


class RecordingDynamoDB:
    def __init__(self, delete_started: threading.Event) -> None:
        self.delete_started = delete_started
        self.deleted: list[str] = []

    def batch_write_item(self, **kwargs: Any) -> dict[str, Any]:
        self.delete_started.set()
        for request in kwargs["RequestItems"][TABLE]:
            self.deleted.append(request["DeleteRequest"]["Key"]["SK"]["S"])
        return {"UnprocessedItems": {}}

    def update_item(self, **kwargs: Any) -> dict[str, Any]:  # pragma: no cover - no poison here
        raise AssertionError("nothing should be quarantined")


def test_first_chunk_of_deletes_runs_while_later_put_events_calls_go_out() -> None:
    # GIVEN 40 outbox records: 4 PutEvents calls; 25 published items fill a delete
    # chunk after the third call.
    seq = sequence_numbers()
    envelopes = [make_envelope() for _ in range(40)]
    records = [outbox_stream_record(e, "ORDER#1", next(seq)) for e in envelopes]
    delete_started = threading.Event()
    events = BlockingEvents(delete_started, wait_on_call=4)
    dynamodb = RecordingDynamoDB(delete_started)

    # WHEN the batch is published
    result = publish_stream_batch(
        records,
        PublishDependencies(
            sink=EventBridgeSink(events, "bus"),
            table_name=TABLE,
            dynamodb_client=dynamodb,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )

    # THEN the fourth call saw the first delete already under way (a sequential
    # publisher would have deleted only after it, and the wait would time out),
    # and every published item was deleted exactly once
    assert events.saw_delete_before_call == [True]
    assert result.failure_sequence_number is None
    assert sorted(dynamodb.deleted) == sorted(outbox_sk(e.id) for e in envelopes)
    assert result.deleted == 40
    assert result.delete_calls == 2
