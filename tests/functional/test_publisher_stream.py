"""The stream publisher against moto: what reaches the bus, what is left in the table.

Failures are injected by thin wrappers around the real moto clients, so every
test observes real publications (the bus's SQS target) and real deletions.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError
from ulid import ULID

from dynamodb_outbox import publisher
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.log_keys import key_digest
from dynamodb_outbox.outbox_item import ATTR_ENVELOPE, outbox_item
from dynamodb_outbox.publisher import MissingSequenceNumber, publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies, PublishResult, RetryPolicy
from dynamodb_outbox.sinks import PUT_EVENTS_MAX_REQUEST_BYTES, EventBridgeSink
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from tests.factories import (
    REGION,
    make_envelope,
    outbox_stream_record,
    sequence_numbers,
    stream_event,
    stream_record,
)
from tests.functional.outbox_helpers import (
    FIXED_NOW,
    RecordingEvents,
    assert_quarantined,
    outbox_sort_keys,
    write_outbox,
)
from tests.support.aws_errors import client_error
from tests.support.lambda_context import FakeLambdaContext

if TYPE_CHECKING:
    from tests.functional.conftest import EventBus, OutboxTable

# ----------------------------------------------------------------- fault injection


class FaultyDynamoDB:
    """Forwards to moto; can leave deletes unprocessed, make calls raise, record requests."""

    def __init__(
        self,
        real: Any,
        *,
        unprocessed_calls: int = 0,
        batch_write_error: Exception | None = None,
        update_error: Exception | None = None,
    ) -> None:
        self.real = real
        self.unprocessed_calls = unprocessed_calls  # -1: forever
        self.batch_write_error = batch_write_error
        self.update_error = update_error
        self.batch_write_requests: list[list[dict[str, Any]]] = []
        self.update_calls = 0

    def batch_write_item(self, **kwargs: Any) -> dict[str, Any]:
        ((table, requests),) = kwargs["RequestItems"].items()
        self.batch_write_requests.append(list(requests))
        if self.batch_write_error is not None:
            raise self.batch_write_error
        if self.unprocessed_calls == 0:
            return dict(self.real.batch_write_item(**kwargs))
        if self.unprocessed_calls > 0:
            self.unprocessed_calls -= 1
            # Process the first request for real, hand back the rest, as DynamoDB
            # does under throttling.
            self.real.batch_write_item(RequestItems={table: requests[:1]})
            return {"UnprocessedItems": {table: requests[1:]} if requests[1:] else {}}
        return {"UnprocessedItems": {table: requests}}

    def update_item(self, **kwargs: Any) -> dict[str, Any]:
        self.update_calls += 1
        if self.update_error is not None:
            raise self.update_error
        return dict(self.real.update_item(**kwargs))


# ------------------------------------------------------------------------- helpers


@dataclass
class Run:
    result: PublishResult
    events: RecordingEvents
    #: the delete retries' waits (the worker's chunks, and the last chunk in the caller's thread)
    sleeps: list[float]
    #: the waits before a call that sends entries again
    sleeps_between_calls: list[float]


def run_publisher(
    records: Sequence[dict[str, Any]],
    table: OutboxTable,
    bus: EventBus,
    *,
    events: RecordingEvents | None = None,
    dynamodb: Any = None,
    delete_retries: int = 5,
) -> Run:
    events = events or RecordingEvents(bus.client)
    waits: list[tuple[str, float]] = []

    def sleep(seconds: float) -> None:
        # Told apart by who waits: the deletes run on the worker thread and, for
        # the last chunk, in the caller's thread.
        waits.append((sys._getframe(1).f_code.co_name, seconds))

    result = publish_stream_batch(
        records,  # type: ignore[arg-type]
        PublishDependencies(
            sink=EventBridgeSink(events, bus.name),
            table_name=table.name,
            dynamodb_client=dynamodb or table.client,
            sleep=sleep,
            clock=lambda: FIXED_NOW,
            delete_retries=delete_retries,
            # The full-jitter draw at its top, so the waits are known.
            retry=RetryPolicy(jitter=lambda: 1.0),
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )
    return Run(
        result=result,
        events=events,
        sleeps=[seconds for waiter, seconds in waits if waiter == "delete_chunk"],
        sleeps_between_calls=[seconds for waiter, seconds in waits if waiter != "delete_chunk"],
    )


@pytest.fixture
def publisher_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Powertools' logger does not propagate; hook pytest's handler onto it directly."""
    powertools_logger = logging.getLogger(publisher.logger.service)
    powertools_logger.addHandler(caplog.handler)
    try:
        yield caplog
    finally:
        powertools_logger.removeHandler(caplog.handler)


# --------------------------------------------------------------------- happy paths


def test_full_success_publishes_committed_bytes_in_order_deletes_and_reports_no_failure(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN three committed outbox items next to their entity
    outbox_table.put({"PK": {"S": "ORDER#1001"}, "SK": {"S": "ORDER"}})
    outbox = write_outbox(outbox_table, 3)

    # WHEN their INSERT records are published
    run = run_publisher(outbox.records, outbox_table, event_bus)

    # THEN the bus got them in stream order, with the stored JSON as Detail, byte for byte
    assert run.result.response() == {"batchItemFailures": []}
    assert event_bus.received_ids() == outbox.ids
    (call,) = run.events.calls
    for entry, record, envelope in zip(call, outbox.records, outbox.envelopes, strict=True):
        assert entry["Detail"] == record["dynamodb"]["NewImage"][ATTR_ENVELOPE]["S"]
        assert entry["Source"] == envelope.source
        assert entry["DetailType"] == envelope.type
        assert entry["Time"] == datetime.fromisoformat(envelope.time)
        assert entry["EventBusName"] == event_bus.name
        assert "Resources" not in entry
    # AND the outbox items are gone, the entity is not
    assert outbox_sort_keys(outbox_table) == set()
    assert outbox_table.sort_keys() == {"ORDER"}
    assert (run.result.published, run.result.deleted, run.result.send_calls) == (3, 3, 1)


def test_detail_is_sent_exactly_as_committed_even_when_not_canonical_json(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN an envelope stored with spacing and key order the library would not produce
    envelope = make_envelope()
    stored = json.dumps(dict(reversed(list(envelope.to_dict().items()))), indent=1)
    item = outbox_item("ORDER#1", envelope) | {ATTR_ENVELOPE: {"S": stored}}
    outbox_table.put(item)

    run = run_publisher([stream_record(item, "1")], outbox_table, event_bus)

    assert run.events.calls[0][0]["Detail"] == stored
    assert event_bus.received_ids() == [envelope.id]


def test_batching_by_count_sends_25_records_as_10_10_5(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    outbox = write_outbox(outbox_table, 25)

    run = run_publisher(outbox.records, outbox_table, event_bus)

    assert [len(call) for call in run.events.calls] == [10, 10, 5]
    assert [i for call in run.events.sent_ids() for i in call] == outbox.ids
    assert sorted(event_bus.received_ids()) == sorted(outbox.ids)
    assert outbox_sort_keys(outbox_table) == set()
    assert run.result.send_calls == 3


def test_batching_by_bytes_keeps_every_request_under_256_kb(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN five events of about 100 KB: three would be over 256 KB
    outbox = write_outbox(outbox_table, 5, data_bytes=100_000)

    run = run_publisher(outbox.records, outbox_table, event_bus)

    assert [len(call) for call in run.events.calls] == [2, 2, 1]
    assert all(size <= PUT_EVENTS_MAX_REQUEST_BYTES for size in run.events.request_sizes())
    assert sorted(event_bus.received_ids()) == sorted(outbox.ids)
    assert outbox_sort_keys(outbox_table) == set()


def test_event_over_the_request_limit_is_quarantined_never_sent_and_others_published(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    seqs = sequence_numbers()
    before = write_outbox(outbox_table, 1, seqs=seqs)
    huge = write_outbox(outbox_table, 1, seqs=seqs, data_bytes=PUT_EVENTS_MAX_REQUEST_BYTES)
    after = write_outbox(outbox_table, 1, seqs=seqs)

    run = run_publisher(before.records + huge.records + after.records, outbox_table, event_bus)

    assert run.result.response() == {"batchItemFailures": []}
    assert huge.ids[0] not in [i for call in run.events.sent_ids() for i in call]
    assert event_bus.received_ids() == before.ids + after.ids
    assert_quarantined(outbox_table, huge.sk(0), "too large")
    assert outbox_sort_keys(outbox_table) == {huge.sk(0)}
    assert run.result.quarantined == 1


def test_records_that_are_not_outbox_inserts_are_skipped_untouched(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN an entity insert, and a MODIFY and a REMOVE of an outbox item
    entity = {"PK": {"S": "ORDER#1"}, "SK": {"S": "ORDER"}, "status": {"S": "NEW"}}
    outbox_table.put(entity)
    envelope = make_envelope()
    item = outbox_item("ORDER#1", envelope)
    outbox_table.put(item)
    records = [
        stream_record(entity, "1"),
        stream_record(item, "2", event_name="MODIFY"),
        stream_record(item, "3", event_name="REMOVE"),
    ]

    run = run_publisher(records, outbox_table, event_bus)

    # THEN nothing is sent, deleted or quarantined, and the batch succeeds
    assert run.result.response() == {"batchItemFailures": []}
    assert run.events.calls == []
    assert event_bus.received() == []
    assert outbox_table.get({"PK": item["PK"], "SK": item["SK"]}) == item
    assert outbox_table.get({"PK": entity["PK"], "SK": entity["SK"]}) == entity
    assert (run.result.skipped, run.result.quarantine_calls) == (3, 0)


# --------------------------------------------------------------- retryable failures


def test_throttled_entry_is_sent_again_first_in_the_next_call_and_nothing_is_resent(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN 25 records; the 14th (second call, 4th entry) is throttled once
    outbox = write_outbox(outbox_table, 25)
    events = RecordingEvents(
        event_bus.client,
        entry_errors={outbox.ids[13]: "ThrottlingException"},
        error_times={outbox.ids[13]: 1},
    )

    run = run_publisher(outbox.records, outbox_table, event_bus, events=events)

    # THEN it rides first in the next call, with the last five: no call of its own
    assert run.result.response() == {"batchItemFailures": []}
    assert events.sent_ids() == [
        outbox.ids[:10],
        outbox.ids[10:20],
        [outbox.ids[13], *outbox.ids[20:25]],
    ]
    # AND every event went out exactly once and every item is deleted
    assert sorted(event_bus.received_ids()) == sorted(outbox.ids)
    assert outbox_sort_keys(outbox_table) == set()
    assert (run.result.retryable_failures, run.result.retried_calls) == (1, 1)
    assert len(run.sleeps_between_calls) == 1


def test_entry_that_keeps_failing_checkpoints_at_it_once_its_attempts_run_out(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN 25 records; the 14th is throttled every time (no time budget: 5 attempts)
    outbox = write_outbox(outbox_table, 25)
    events = RecordingEvents(event_bus.client, entry_errors={outbox.ids[13]: "ThrottlingException"})

    run = run_publisher(outbox.records, outbox_table, event_bus, events=events)

    # THEN Lambda is told to resume at that record, after five attempts
    assert run.result.response() == {"batchItemFailures": [{"itemIdentifier": outbox.seq(13)}]}
    assert [len(call) for call in events.calls] == [10, 10, 6, 1, 1, 1]
    # AND everything else went out once and is deleted; the failed one stays pending
    assert sorted(event_bus.received_ids()) == sorted(outbox.ids[:13] + outbox.ids[14:])
    assert outbox_sort_keys(outbox_table) == {outbox.sk(13)}
    assert outbox_table.pending_sort_keys() == {outbox.sk(13)}
    assert run.result.retryable_failures == 5
    assert run.result.quarantined == 0
    # AND the waits grew: full jitter under 50, 100, 200, 400 ms
    assert [round(wait, 3) for wait in run.sleeps_between_calls] == [0.05, 0.1, 0.2, 0.4]


def test_unknown_put_events_error_code_is_retried_not_quarantined(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    outbox = write_outbox(outbox_table, 3)
    events = RecordingEvents(event_bus.client, entry_errors={outbox.ids[1]: "BrandNewError"})

    run = run_publisher(outbox.records, outbox_table, event_bus, events=events)

    assert run.result.response() == {"batchItemFailures": [{"itemIdentifier": outbox.seq(1)}]}
    item = outbox_table.get({"PK": {"S": "ORDER#1001"}, "SK": {"S": outbox.sk(1)}})
    assert item is not None and item["outbox_status"] == {"S": "PENDING"}
    assert run.result.quarantine_calls == 0


@pytest.mark.parametrize(
    "error",
    [
        client_error("ThrottlingException", "PutEvents"),
        EndpointConnectionError(endpoint_url="https://events.us-east-1.amazonaws.com"),
    ],
    ids=["client-error", "connection-error"],
)
def test_a_call_that_raises_is_sent_again_whole_and_deleted_only_once_through(
    outbox_table: OutboxTable, event_bus: EventBus, error: Exception
) -> None:
    # GIVEN 15 records; the second call (records 10..14) raises once
    outbox = write_outbox(outbox_table, 15)
    events = RecordingEvents(event_bus.client, raise_on_calls={1: error})

    run = run_publisher(outbox.records, outbox_table, event_bus, events=events)

    assert run.result.response() == {"batchItemFailures": []}
    assert events.sent_ids() == [outbox.ids[:10], outbox.ids[10:], outbox.ids[10:]]
    assert sorted(event_bus.received_ids()) == sorted(outbox.ids)
    assert outbox_sort_keys(outbox_table) == set()


def test_calls_that_keep_raising_checkpoint_at_their_first_record_and_delete_nothing_of_it(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    outbox = write_outbox(outbox_table, 4)
    failure = client_error("InternalFailure", "PutEvents")
    events = RecordingEvents(event_bus.client, raise_on_calls=dict.fromkeys(range(5), failure))

    run = run_publisher(outbox.records, outbox_table, event_bus, events=events)

    # Whether any entry of a failed call got through is unknown: none is deleted.
    assert run.result.response() == {"batchItemFailures": [{"itemIdentifier": outbox.seq(0)}]}
    assert len(events.calls) == 5
    assert outbox_sort_keys(outbox_table) == {outbox.sk(i) for i in range(4)}
    assert run.result.delete_calls == 0


def test_record_without_sequence_number_fails_the_whole_batch_instead_of_a_null_identifier(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN the record to retry from carries no SequenceNumber
    outbox = write_outbox(outbox_table, 3)
    del outbox.records[1]["dynamodb"]["SequenceNumber"]
    events = RecordingEvents(event_bus.client, entry_errors={outbox.ids[1]: "InternalFailure"})

    # WHEN it fails retryably THEN the batch fails as a whole (an exception), never
    # a response whose identifier is empty or null
    with pytest.raises(MissingSequenceNumber) as raised:
        run_publisher(outbox.records, outbox_table, event_bus, events=events)

    # AND what was published before it is still deleted
    assert raised.value.result.failure_position == 1
    assert outbox.sk(0) not in outbox_sort_keys(outbox_table)
    assert outbox.sk(1) in outbox_sort_keys(outbox_table)


# ---------------------------------------------------------------------- poison


def _poison_bad_json(item: dict[str, Any], envelope: Envelope) -> dict[str, Any]:
    return item | {ATTR_ENVELOPE: {"S": "{not json"}}


def _poison_missing_fields(item: dict[str, Any], envelope: Envelope) -> dict[str, Any]:
    data = envelope.to_dict()
    del data["data"]
    return item | {ATTR_ENVELOPE: {"S": json.dumps(data)}}


def _poison_id_not_sort_key(item: dict[str, Any], envelope: Envelope) -> dict[str, Any]:
    return item | {"SK": {"S": f"OUTBOX#{ULID()}"}}


def _poison_no_envelope_attribute(item: dict[str, Any], envelope: Envelope) -> dict[str, Any]:
    return {name: value for name, value in item.items() if name != ATTR_ENVELOPE}


def _poison_bad_time(item: dict[str, Any], envelope: Envelope) -> dict[str, Any]:
    return item | {ATTR_ENVELOPE: {"S": json.dumps(envelope.to_dict() | {"time": "yesterday"})}}


@pytest.mark.parametrize(
    ("spoil", "view_type", "reason_part"),
    [
        (_poison_bad_json, "NEW_IMAGE", "not valid JSON"),
        (_poison_missing_fields, "NEW_IMAGE", "missing field(s): data"),
        (_poison_id_not_sort_key, "NEW_IMAGE", "does not match sort key"),
        (_poison_no_envelope_attribute, "NEW_IMAGE", "no string attribute 'envelope'"),
        (_poison_bad_time, "NEW_IMAGE", "RFC 3339"),
        (lambda item, envelope: item, "KEYS_ONLY", "no NewImage"),
    ],
    ids=["bad-json", "missing-fields", "id-not-sk", "no-envelope", "bad-time", "no-new-image"],
)
def test_poison_record_is_quarantined_out_of_the_pending_index_and_the_batch_goes_on(
    outbox_table: OutboxTable,
    event_bus: EventBus,
    spoil: Callable[[dict[str, Any], Envelope], dict[str, Any]],
    view_type: str,
    reason_part: str,
) -> None:
    # GIVEN a good record, a poison one, another good one
    seqs = sequence_numbers()
    first = write_outbox(outbox_table, 1, seqs=seqs)
    envelope = make_envelope()
    poison_item = spoil(outbox_item("ORDER#1001", envelope), envelope)
    outbox_table.put(poison_item)
    poison = stream_record(poison_item, next(seqs), view_type=view_type)
    last = write_outbox(outbox_table, 1, seqs=seqs)

    run = run_publisher([*first.records, poison, *last.records], outbox_table, event_bus)

    # THEN the batch does not fail, the good ones are published and deleted
    assert run.result.response() == {"batchItemFailures": []}
    assert event_bus.received_ids() == first.ids + last.ids
    # AND the poison item is kept, marked, out of the pending index, never sent
    poison_sk = poison_item["SK"]["S"]
    assert_quarantined(outbox_table, poison_sk, reason_part)
    assert outbox_sort_keys(outbox_table) == {poison_sk}
    assert len(run.events.calls) == 1 and len(run.events.calls[0]) == 2
    assert run.result.quarantined == 1


def test_entry_rejected_as_malformed_by_put_events_is_quarantined(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    outbox = write_outbox(outbox_table, 3)
    events = RecordingEvents(event_bus.client, entry_errors={outbox.ids[1]: "MalformedDetail"})

    run = run_publisher(outbox.records, outbox_table, event_bus, events=events)

    assert run.result.response() == {"batchItemFailures": []}
    assert_quarantined(outbox_table, outbox.sk(1), "MalformedDetail")
    assert outbox_sort_keys(outbox_table) == {outbox.sk(1)}
    assert sorted(event_bus.received_ids()) == sorted([outbox.ids[0], outbox.ids[2]])


def test_quarantine_never_recreates_an_item_that_is_already_gone(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN a poison record whose item was since published and deleted (by the sweeper)
    envelope = make_envelope()
    item = _poison_bad_json(outbox_item("ORDER#1001", envelope), envelope)
    record = stream_record(item, "1")  # never written: the item is gone

    run = run_publisher([record], outbox_table, event_bus)

    assert run.result.response() == {"batchItemFailures": []}
    assert outbox_table.get({"PK": item["PK"], "SK": item["SK"]}) is None
    assert (run.result.quarantined, run.result.quarantine_item_gone) == (0, 1)


def test_quarantine_write_failing_checkpoints_at_the_poison_record(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN good, poison, good in one chunk, and the quarantine write is throttled
    seqs = sequence_numbers()
    first = write_outbox(outbox_table, 1, seqs=seqs)
    envelope = make_envelope()
    poison_item = _poison_bad_json(outbox_item("ORDER#1001", envelope), envelope)
    outbox_table.put(poison_item)
    poison = stream_record(poison_item, next(seqs))
    last = write_outbox(outbox_table, 1, seqs=seqs)
    dynamodb = FaultyDynamoDB(
        outbox_table.client,
        update_error=client_error("ProvisionedThroughputExceededException", "UpdateItem"),
    )

    run = run_publisher(
        [*first.records, poison, *last.records], outbox_table, event_bus, dynamodb=dynamodb
    )

    # THEN Lambda resumes at the poison record (skipping it would lose the marker)
    assert run.result.response() == {
        "batchItemFailures": [{"itemIdentifier": poison["dynamodb"]["SequenceNumber"]}]
    }
    # AND the record before it is published and deleted, the one after is not sent
    assert event_bus.received_ids() == first.ids
    assert outbox_sort_keys(outbox_table) == {poison_item["SK"]["S"], last.sk(0)}
    item = outbox_table.get({"PK": poison_item["PK"], "SK": poison_item["SK"]})
    assert item is not None and item["outbox_status"] == {"S": "PENDING"}


def test_record_without_keys_is_logged_and_skipped_without_blocking_the_shard(
    outbox_table: OutboxTable,
    event_bus: EventBus,
    publisher_logs: pytest.LogCaptureFixture,
) -> None:
    seqs = sequence_numbers()
    broken = stream_record({}, next(seqs), keys={})
    del broken["dynamodb"]["Keys"]
    good = write_outbox(outbox_table, 1, seqs=seqs)

    run = run_publisher([broken, *good.records], outbox_table, event_bus)

    assert run.result.response() == {"batchItemFailures": []}
    assert event_bus.received_ids() == good.ids
    assert run.result.unreadable == 1
    assert any("unreadable stream record" in r.getMessage() for r in publisher_logs.records)


# --------------------------------------------------------------------- deletions


def test_unprocessed_deletes_are_retried_with_backoff_until_they_succeed(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    outbox = write_outbox(outbox_table, 4)
    dynamodb = FaultyDynamoDB(outbox_table.client, unprocessed_calls=2)

    run = run_publisher(outbox.records, outbox_table, event_bus, dynamodb=dynamodb)

    assert run.result.response() == {"batchItemFailures": []}
    assert outbox_sort_keys(outbox_table) == set()
    # 4 → 3 left → 2 left → all done: each retry only resends what was unprocessed
    assert [len(request) for request in dynamodb.batch_write_requests] == [4, 3, 2]
    assert run.sleeps == [0.05, 0.1]
    assert (run.result.deleted, run.result.delete_leftovers) == (4, 0)


@pytest.mark.parametrize(
    "dynamodb_factory",
    [
        lambda real: FaultyDynamoDB(real, unprocessed_calls=-1),
        lambda real: FaultyDynamoDB(
            real, batch_write_error=client_error("InternalServerError", "BatchWriteItem")
        ),
    ],
    ids=["always-unprocessed", "always-raising"],
)
def test_deletes_that_never_succeed_do_not_fail_the_batch(
    outbox_table: OutboxTable,
    event_bus: EventBus,
    publisher_logs: pytest.LogCaptureFixture,
    dynamodb_factory: Callable[[Any], FaultyDynamoDB],
) -> None:
    # GIVEN published events whose outbox items cannot be deleted
    outbox = write_outbox(outbox_table, 3)
    dynamodb = dynamodb_factory(outbox_table.client)

    run = run_publisher(
        outbox.records, outbox_table, event_bus, dynamodb=dynamodb, delete_retries=3
    )

    # THEN the batch succeeds: the events are out, a leftover is only a future duplicate
    assert run.result.response() == {"batchItemFailures": []}
    assert sorted(event_bus.received_ids()) == sorted(outbox.ids)
    # AND the retries are bounded, counted and logged
    assert len(dynamodb.batch_write_requests) == 1 + 3
    assert run.sleeps == [0.05, 0.1, 0.2]
    assert run.result.delete_leftovers == 3 - run.result.deleted
    assert run.result.delete_leftovers == len(outbox_sort_keys(outbox_table)) > 0
    assert any(
        r.levelno == logging.WARNING and "left undeleted" in r.getMessage()
        for r in publisher_logs.records
    )


def test_deletes_go_in_requests_of_25_without_duplicate_keys(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN 30 records, one of them delivered twice (at-least-once streams)
    outbox = write_outbox(outbox_table, 30)
    records = [*outbox.records, outbox_stream_record(outbox.envelopes[5], "ORDER#1001", "999")]
    dynamodb = FaultyDynamoDB(outbox_table.client)

    run = run_publisher(records, outbox_table, event_bus, dynamodb=dynamodb)

    assert [len(request) for request in dynamodb.batch_write_requests] == [25, 5]
    for request in dynamodb.batch_write_requests:
        keys = [json.dumps(r["DeleteRequest"]["Key"], sort_keys=True) for r in request]
        assert len(keys) == len(set(keys))
    assert outbox_sort_keys(outbox_table) == set()
    assert run.result.published == 31


# ----------------------------------------------------------------------- handler


def _lambda_records_from_moto_stream(table: OutboxTable) -> list[dict[str, Any]]:
    """Read the table's real (moto) stream and shape it as the mapping would deliver it."""
    stream_arn = table.client.describe_table(TableName=table.name)["Table"]["LatestStreamArn"]
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        for record in streams.get_records(ShardIterator=iterator)["Records"]:
            created = record["dynamodb"]["ApproximateCreationDateTime"]
            record["dynamodb"]["ApproximateCreationDateTime"] = created.timestamp()
            records.append(record | {"eventSourceARN": stream_arn})
    return records


@pytest.fixture
def publisher_env(
    monkeypatch: pytest.MonkeyPatch, outbox_table: OutboxTable, event_bus: EventBus
) -> Iterator[None]:
    monkeypatch.setenv("OUTBOX_EVENT_BUS_NAME", event_bus.arn)
    monkeypatch.setenv("OUTBOX_TABLE_NAME", outbox_table.name)
    publisher.default_runtime.cache_clear()
    publisher.metrics.clear_metrics()
    yield
    publisher.default_runtime.cache_clear()
    publisher.metrics.clear_metrics()


def test_handler_publishes_a_real_stream_batch_end_to_end(
    outbox_table: OutboxTable,
    event_bus: EventBus,
    publisher_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN an entity and two outbox items committed, read back from moto's stream
    outbox_table.put({"PK": {"S": "ORDER#1001"}, "SK": {"S": "ORDER"}})
    outbox = write_outbox(outbox_table, 2)
    records = _lambda_records_from_moto_stream(outbox_table)
    assert len(records) == 3

    # WHEN Lambda invokes the entry point with them
    response = publisher.handler(stream_event(records), FakeLambdaContext())

    # THEN the events are on the bus (named by ARN), the outbox items are gone
    assert response == {"batchItemFailures": []}
    assert event_bus.received_ids() == outbox.ids
    assert outbox_table.sort_keys() == {"ORDER"}
    # AND the invocation's metrics went out as EMF in the configured namespace
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    assert len(emf) == 1
    (directive,) = emf[0]["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "DynamoDBOutbox"
    assert (emf[0]["PublishedEvents"], emf[0]["PutEventsCalls"]) == ([2.0], [1.0])
    assert emf[0]["QuarantinedEvents"] == [0.0]


def test_handler_reports_the_checkpoint_of_a_retryable_failure(
    outbox_table: OutboxTable,
    event_bus: EventBus,
    publisher_env: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN a bus that does not exist: PutEvents itself fails
    monkeypatch.setenv("OUTBOX_EVENT_BUS_NAME", "no-such-bus")
    publisher.default_runtime.cache_clear()
    outbox = write_outbox(outbox_table, 2)

    # (with a second left, it retries for most of it, as it would near a timeout)
    response = publisher.handler(
        stream_event(outbox.records), FakeLambdaContext(remaining_millis=1_000)
    )

    assert response == {"batchItemFailures": [{"itemIdentifier": outbox.seq(0)}]}
    assert outbox_sort_keys(outbox_table) == {outbox.sk(0), outbox.sk(1)}


# --------------------------------------------------------------------- what the logs carry


PERSONAL_PK = "CUSTOMER#alice@example.com"


def _logged(logs: pytest.LogCaptureFixture) -> str:
    """Every captured record with its extra fields, as one searchable text."""
    return "\n".join(repr(vars(record)) for record in logs.records)


def test_logs_name_a_poison_item_by_its_outbox_sk_never_by_the_entity_key(
    outbox_table: OutboxTable,
    event_bus: EventBus,
    publisher_logs: pytest.LogCaptureFixture,
) -> None:
    # GIVEN a poison outbox item of an entity whose key holds an email address,
    # whose quarantine is throttled once (a warning naming the item) then succeeds
    envelope = make_envelope(subject=PERSONAL_PK)
    item = _poison_bad_json(outbox_item(PERSONAL_PK, envelope), envelope)
    outbox_table.put(item)
    dynamodb = FaultyDynamoDB(
        outbox_table.client,
        update_error=client_error("ProvisionedThroughputExceededException", "UpdateItem"),
    )

    run_publisher([stream_record(item, "1")], outbox_table, event_bus, dynamodb=dynamodb)
    run_publisher([stream_record(item, "1")], outbox_table, event_bus)

    # THEN the log lines about it name its outbox SK and a digest of its PK
    logged = _logged(publisher_logs)
    assert "quarantine failed" in logged and "event quarantined" in logged
    assert item["SK"]["S"] in logged
    assert key_digest(PERSONAL_PK) in logged
    # AND never the entity key, nor the address in it
    assert "alice@example.com" not in logged


def test_logs_of_undeleted_items_carry_no_entity_key(
    outbox_table: OutboxTable,
    event_bus: EventBus,
    publisher_logs: pytest.LogCaptureFixture,
) -> None:
    outbox = write_outbox(outbox_table, 2, pk=PERSONAL_PK)
    dynamodb = FaultyDynamoDB(
        outbox_table.client,
        batch_write_error=client_error("InternalServerError", "BatchWriteItem"),
    )

    run_publisher(outbox.records, outbox_table, event_bus, dynamodb=dynamodb, delete_retries=0)

    logged = _logged(publisher_logs)
    assert "left undeleted" in logged and outbox.sk(0) in logged
    assert "alice@example.com" not in logged
