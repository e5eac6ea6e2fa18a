"""Deletes of published items overlap the next PutEvents call, without changing what is deleted."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

from dynamodb_outbox.outbox_item import outbox_sk
from dynamodb_outbox.publisher import publish_stream_batch, read_stream_batch
from dynamodb_outbox.publishing import Publication, PublishDependencies
from dynamodb_outbox.sinks import EventBridgeSink
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from tests.factories import make_envelope, outbox_stream_record, sequence_numbers

TABLE = "orders"
WAIT_SECONDS = 5.0
#: What each call to the bus waits, as a call to AWS would (the overlap starts
#: once a call was seen waiting: publishing.OVERLAP_MIN_WAIT_SECONDS).
NETWORK_SECONDS = 0.01


class BlockingEvents:
    """Accepts every entry; from call ``wait_on_call`` on, waits until a delete has started."""

    def __init__(self, delete_started: threading.Event, wait_on_call: int) -> None:
        self.delete_started = delete_started
        self.wait_on_call = wait_on_call
        self.calls = 0
        self.saw_delete_before_call: list[bool] = []

    def put_events(self, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        time.sleep(NETWORK_SECONDS)
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


class ThreadRecordingDynamoDB:
    """Deletes everything; says which thread each BatchWriteItem came from."""

    def __init__(self) -> None:
        self.threads: list[str] = []
        self.deleted: list[str] = []

    def batch_write_item(self, **kwargs: Any) -> dict[str, Any]:
        self.threads.append(threading.current_thread().name)
        for request in kwargs["RequestItems"][TABLE]:
            self.deleted.append(request["DeleteRequest"]["Key"]["SK"]["S"])
        return {"UnprocessedItems": {}}


class AcceptingEvents:
    def __init__(self, network_seconds: float) -> None:
        self.network_seconds = network_seconds

    def put_events(self, **kwargs: Any) -> dict[str, Any]:
        time.sleep(self.network_seconds)
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "x"} for _ in kwargs["Entries"]]}


def _publish(
    count: int, dynamodb: ThreadRecordingDynamoDB, network_seconds: float = NETWORK_SECONDS
) -> None:
    seq = sequence_numbers()
    records = [outbox_stream_record(make_envelope(), "ORDER#1", next(seq)) for _ in range(count)]
    result = publish_stream_batch(
        records,
        PublishDependencies(
            sink=EventBridgeSink(AcceptingEvents(network_seconds), "bus"),
            table_name=TABLE,
            dynamodb_client=dynamodb,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )
    assert result.deleted == count


def test_deletes_left_after_the_last_call_run_in_the_callers_thread() -> None:
    # GIVEN 40 records (4 PutEvents calls): a chunk of 25 fills before the last call
    dynamodb = ThreadRecordingDynamoDB()

    # WHEN the batch is published
    _publish(40, dynamodb)

    # THEN the full chunk went to the worker while the last call went out, and the
    # 15 keys left after the last call were deleted in the caller's thread: no
    # thread hop with nothing left to overlap
    caller = threading.current_thread().name
    assert len(dynamodb.threads) == 2
    assert dynamodb.threads[0].startswith("outbox-delete")
    assert dynamodb.threads[1] == caller
    assert len(dynamodb.deleted) == 40


def test_a_batch_with_nothing_to_overlap_starts_no_worker_thread() -> None:
    # GIVEN 25 records: the only chunk fills with the last call
    dynamodb = ThreadRecordingDynamoDB()

    # WHEN the batch is published
    _publish(25, dynamodb)

    # THEN its one delete ran in the caller's thread
    assert dynamodb.threads == [threading.current_thread().name]


class CallsAnswerAtOnce(Publication):
    """Every call takes as much wall time as CPU time: it waited for nothing.

    (Fake clocks: on a busy machine a real call can be preempted, which reads as a wait.)
    """

    ticks = itertools.count()
    wall_clock = staticmethod(lambda: float(next(CallsAnswerAtOnce.ticks)))
    cpu_clock = wall_clock


def test_calls_answered_at_once_get_no_overlap() -> None:
    # GIVEN a bus that answers without waiting (in-process, as canned answers do)
    dynamodb = ThreadRecordingDynamoDB()
    seq = sequence_numbers()
    records = [outbox_stream_record(make_envelope(), "ORDER#1", next(seq)) for _ in range(100)]
    candidates, result = read_stream_batch(records, DEFAULT_TABLE_KEYS)
    deps = PublishDependencies(
        sink=EventBridgeSink(AcceptingEvents(0.0), "bus"),
        table_name=TABLE,
        dynamodb_client=dynamodb,
        table_keys=DEFAULT_TABLE_KEYS,
    )

    # WHEN the 100 records are published (10 calls, 4 chunks of deletes)
    CallsAnswerAtOnce(deps, result=result).publish(candidates)

    # THEN no worker thread ran any delete: with nothing to wait for, a second
    # thread would only take turns with this one
    assert result.deleted == 100
    assert dynamodb.threads == [threading.current_thread().name] * 4
