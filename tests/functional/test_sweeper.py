"""The sweeper against moto: what it finds, what it reads, what it publishes and deletes.

Item ages come from their ULIDs: tests write outbox items "made" at chosen
moments and run the sweep at a chosen ``now``; nothing sleeps.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from dynamodb_outbox import sweeper
from dynamodb_outbox.log_keys import key_digest
from dynamodb_outbox.outbox_item import (
    ATTR_ENVELOPE,
    ATTR_PENDING_SHARD,
    ATTR_STATUS,
    STATUS_QUARANTINED,
    outbox_item,
    outbox_sk,
    pending_shard,
)
from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies, PublishResult
from dynamodb_outbox.settings import ConfigurationError
from dynamodb_outbox.sinks import EntryResult, EventBridgeSink, OutboundEvent, Sink, SnsSink
from dynamodb_outbox.sweeper import SweepResult, sweep
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from dynamodb_outbox.writer import OutboxWriter
from tests.factories import make_envelope
from tests.functional.outbox_helpers import (
    FIXED_NOW,
    FIXED_NOW_ISO,
    PK,
    CountingDynamoDB,
    RecordingEvents,
    assert_quarantined,
    outbox_sort_keys,
    ulid_at,
    write_outbox,
)
from tests.support.aws_errors import client_error
from tests.support.lambda_context import FakeLambdaContext

if TYPE_CHECKING:
    from tests.functional.conftest import EventBus, OutboxTable, SnsTopic

NOW = FIXED_NOW
MIN_AGE = timedelta(seconds=300)
OLD = NOW - timedelta(minutes=10)
YOUNG = NOW - timedelta(minutes=1)


class HookedSink:
    """A sink that runs ``hook`` once, just before its first call goes out, and
    ``after_each`` after every call."""

    def __init__(
        self,
        inner: Sink,
        hook: Callable[[], None] | None = None,
        after_each: Callable[[], None] | None = None,
    ) -> None:
        self.inner = inner
        self.hook = hook
        self.after_each = after_each
        self.rules = inner.rules

    def send(self, events: Sequence[OutboundEvent]) -> list[EntryResult]:
        if self.hook is not None:
            hook, self.hook = self.hook, None
            hook()
        results = self.inner.send(events)
        if self.after_each is not None:
            self.after_each()
        return results


def run_sweep(
    table: OutboxTable,
    sink: Sink,
    *,
    dynamodb: Any = None,
    now: datetime = NOW,
    max_items: int = 1000,
    time_left: Callable[[], float] | None = None,
    sleeps: list[float] | None = None,
) -> SweepResult:
    return sweep(
        PublishDependencies(
            sink=sink,
            table_name=table.name,
            dynamodb_client=dynamodb or table.client,
            sleep=(sleeps if sleeps is not None else []).append,
            clock=lambda: NOW,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
        index_name="outbox-pending",
        shards=8,
        min_age_seconds=int(MIN_AGE.total_seconds()),
        max_items=max_items,
        now=now,
        time_left=time_left,
    )


def bus_sink(bus: EventBus, events: RecordingEvents | None = None) -> EventBridgeSink:
    return EventBridgeSink(events or RecordingEvents(bus.client), bus.name)


def run_stream(
    records: list[dict[str, Any]], table: OutboxTable, sink: Sink, dynamodb: Any = None
) -> PublishResult:
    return publish_stream_batch(
        records,  # type: ignore[arg-type]
        PublishDependencies(
            sink=sink,
            table_name=table.name,
            dynamodb_client=dynamodb or table.client,
            sleep=lambda _: None,
            clock=lambda: NOW,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )


def key_of(sk: str, pk: str = PK) -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": sk}}


# ---------------------------------------------------------------------- what it finds


def test_sweeper_publishes_and_deletes_pending_items_older_than_min_age_only(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN three outbox items made 10 minutes ago and two made 1 minute ago
    old = write_outbox(outbox_table, 3, made_at=OLD)
    young = write_outbox(outbox_table, 2, made_at=YOUNG)

    # WHEN the sweeper runs with a 5-minute minimum age
    result = run_sweep(outbox_table, bus_sink(event_bus))

    # THEN only the old ones are published, oldest first, and deleted
    assert event_bus.received_ids() == old.ids
    assert outbox_sort_keys(outbox_table) == {young.sk(0), young.sk(1)}
    assert (result.swept, result.pending_items, result.publish.deleted) == (3, 3, 3)
    assert result.stopped_by is None and not result.more_pending


def test_the_age_boundary_is_min_age_to_the_millisecond(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN one item made 1 ms before the boundary and one in the boundary's millisecond
    just_old = write_outbox(outbox_table, 1, made_at=NOW - MIN_AGE - timedelta(milliseconds=1))
    at_boundary = write_outbox(outbox_table, 1, made_at=NOW - MIN_AGE)

    run_sweep(outbox_table, bus_sink(event_bus))

    assert event_bus.received_ids() == just_old.ids
    assert outbox_sort_keys(outbox_table) == {at_boundary.sk(0)}


def test_sweeper_queries_each_shard_of_the_index_never_scans_and_reads_no_other_item(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN a table of 300 entity items, 5 old and 2 young pending outbox items
    for n in range(300):
        outbox_table.put({"PK": {"S": f"CUSTOMER#{n}"}, "SK": {"S": "PROFILE"}, "n": {"N": str(n)}})
    old = write_outbox(outbox_table, 5, made_at=OLD)
    write_outbox(outbox_table, 2, made_at=YOUNG)
    dynamodb = CountingDynamoDB(outbox_table.client)  # has no scan(): a Scan would raise

    result = run_sweep(outbox_table, bus_sink(event_bus), dynamodb=dynamodb)

    # THEN every Query went to the pending index, one per shard below the boundary
    assert {q["IndexName"] for q in dynamodb.queries} == {"outbox-pending"}
    bounded = [q for q in dynamodb.queries if "#sk < :boundary" in q["KeyConditionExpression"]]
    assert sorted(q["ExpressionAttributeValues"][":shard"]["S"] for q in bounded) == [
        f"{n:02d}" for n in range(8)
    ]
    assert {q["ExpressionAttributeValues"][":boundary"]["S"] for q in bounded} == {
        result.boundary_sk
    }
    # AND what it read is proportional to the pending items, not to the table
    assert dynamodb.batch_get_keys == dynamodb.batch_get_items == 5
    # AND consistent: a stale "pending" would re-send a quarantined item and delete
    # its quarantine record (docs/decisions.md, "The sweeper's read-back")
    assert [request["ConsistentRead"] for request in dynamodb.batch_get_requests] == [True]
    assert dynamodb.query_scanned <= 5 + 2  # old keys, plus at most one young key per shard
    assert dynamodb.items_read <= 12
    assert sorted(event_bus.received_ids()) == sorted(old.ids)


def test_sweeper_with_nothing_pending_reports_zero_and_publishes_nothing(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    outbox_table.put({"PK": {"S": PK}, "SK": {"S": "ORDER"}})
    events = RecordingEvents(event_bus.client)

    result = run_sweep(outbox_table, bus_sink(event_bus, events))

    assert events.calls == []
    assert (result.swept, result.pending_items, result.oldest_pending_age_seconds) == (0, 0, 0.0)


def test_oldest_pending_age_counts_young_items_too_from_the_smallest_ulid(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN only items younger than min age: 90 s and 30 s old
    oldest = write_outbox(outbox_table, 1, made_at=NOW - timedelta(seconds=90))
    write_outbox(outbox_table, 1, made_at=NOW - timedelta(seconds=30))

    result = run_sweep(outbox_table, bus_sink(event_bus))

    # THEN nothing is swept, but the age of the oldest pending item is reported
    assert result.swept == 0
    assert result.oldest_pending_age_seconds == pytest.approx(90.0, abs=0.001)
    assert result.oldest_pending_sk == oldest.sk(0)


def test_oldest_pending_age_is_the_oldest_across_shards(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN items in several shards, the oldest made 20 minutes ago
    write_outbox(outbox_table, 6, made_at=OLD)
    oldest = write_outbox(outbox_table, 1, made_at=NOW - timedelta(minutes=20))
    write_outbox(outbox_table, 3, made_at=YOUNG)

    result = run_sweep(outbox_table, bus_sink(event_bus))

    assert result.oldest_pending_sk == oldest.sk(0)
    assert result.oldest_pending_age_seconds == pytest.approx(1200.0, abs=0.001)


# -------------------------------------------------------------------- quarantined items


def test_items_quarantined_by_the_stream_publisher_leave_the_index_and_are_never_swept(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN an old item the stream publisher quarantined (its bus rejected it)
    outbox = write_outbox(outbox_table, 1, made_at=OLD)
    rejecting = RecordingEvents(event_bus.client, entry_errors={outbox.ids[0]: "MalformedDetail"})
    run_stream(outbox.records, outbox_table, bus_sink(event_bus, rejecting))
    assert_quarantined(outbox_table, outbox.sk(0), "MalformedDetail")
    quarantined = outbox_table.get(key_of(outbox.sk(0)))
    dynamodb = CountingDynamoDB(outbox_table.client)
    events = RecordingEvents(event_bus.client)

    # WHEN the sweeper runs long after
    result = run_sweep(outbox_table, bus_sink(event_bus, events), dynamodb=dynamodb, now=NOW)

    # THEN it never sees it: not read, not sent, not touched
    assert (dynamodb.batch_get_keys, dynamodb.update_calls, events.calls) == (0, 0, [])
    assert outbox_table.get(key_of(outbox.sk(0))) == quarantined
    assert result.pending_items == 0


def test_a_quarantined_item_still_carrying_a_shard_is_skipped_not_republished(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN an item marked QUARANTINED whose shard attribute was left behind
    # (an older writer, a hand edit): it is in the index
    envelope = make_envelope(id=ulid_at(OLD))
    item = outbox_item(PK, envelope) | {ATTR_STATUS: {"S": STATUS_QUARANTINED}}
    outbox_table.put(item)
    events = RecordingEvents(event_bus.client)

    result = run_sweep(outbox_table, bus_sink(event_bus, events))

    # THEN the sweeper reads it, sees it is not pending and leaves it alone
    assert events.calls == []
    assert outbox_table.get(key_of(outbox_sk(envelope.id))) == item
    assert (result.not_pending, result.swept, result.publish.deleted) == (1, 0, 0)


def test_poison_found_by_the_sweeper_is_quarantined_and_the_run_goes_on(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN an old item whose envelope is not JSON, between two good ones
    first = write_outbox(outbox_table, 1, made_at=OLD)
    envelope = make_envelope(id=ulid_at(OLD + timedelta(milliseconds=5)))
    poison = outbox_item(PK, envelope) | {ATTR_ENVELOPE: {"S": "{not json"}}
    outbox_table.put(poison)
    last = write_outbox(outbox_table, 1, made_at=OLD + timedelta(milliseconds=10))

    result = run_sweep(outbox_table, bus_sink(event_bus))

    # THEN the same rules as the stream: quarantined out of the index, others published
    assert event_bus.received_ids() == first.ids + last.ids
    assert_quarantined(outbox_table, outbox_sk(envelope.id), "not valid JSON", at=FIXED_NOW_ISO)
    assert outbox_sort_keys(outbox_table) == {outbox_sk(envelope.id)}
    assert (result.publish.quarantined, result.stopped_by) == (1, None)
    # AND a second run finds nothing left to do
    assert run_sweep(outbox_table, bus_sink(event_bus)).pending_items == 0


# ---------------------------------------------------------------------- failures


def test_an_entry_that_keeps_failing_stops_the_run_there_and_the_next_run_takes_it(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN 25 old items; the 14th is throttled every time
    outbox = write_outbox(outbox_table, 25, made_at=OLD)
    events = RecordingEvents(event_bus.client, entry_errors={outbox.ids[13]: "ThrottlingException"})

    result = run_sweep(outbox_table, bus_sink(event_bus, events))

    # THEN it is sent again with the next entries until its attempts run out,
    # and the run stops there and says where
    assert [len(call) for call in events.calls] == [10, 10, 6, 1, 1, 1]
    assert (result.stopped_by, result.failure_sk, result.more_pending) == (
        "retryable_failure",
        outbox.sk(13),
        True,
    )
    assert result.publish.retryable_failures == 5
    # AND what was published is deleted, the failed one is still pending
    assert outbox_table.pending_sort_keys() == outbox_sort_keys(outbox_table) == {outbox.sk(13)}
    # AND the next run publishes exactly what was left
    event_bus.received()
    again = run_sweep(outbox_table, bus_sink(event_bus))
    assert event_bus.received_ids() == [outbox.ids[13]]
    assert again.swept == 1 and outbox_sort_keys(outbox_table) == set()


def test_a_retryable_failure_stops_the_run_before_reading_the_next_hundred_items(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN 150 old items (two BatchGetItem chunks); the third one is throttled
    outbox = write_outbox(outbox_table, 150, made_at=OLD)
    events = RecordingEvents(event_bus.client, entry_errors={outbox.ids[2]: "ThrottlingException"})
    dynamodb = CountingDynamoDB(outbox_table.client)

    result = run_sweep(outbox_table, bus_sink(event_bus, events), dynamodb=dynamodb)

    # THEN the second hundred is never read nor sent
    assert dynamodb.batch_get_calls == 1
    # AND the throttled item rode first in the four calls after its own, with
    # nine fresh items each, until its five attempts ran out
    assert [len(call) for call in events.calls] == [10] * 5
    assert all(call[0]["Detail"] == events.calls[0][2]["Detail"] for call in events.calls[1:])
    assert result.failure_sk == outbox.sk(2)
    assert len(outbox_sort_keys(outbox_table)) == 150 - 9 * 5


def test_time_running_out_after_a_hundred_items_stops_before_reading_the_next_hundred(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN 150 old items, and the invocation nearly out of time once the first
    # hundred (ten calls) are out
    outbox = write_outbox(outbox_table, 150, made_at=OLD)
    calls = [0]

    def count_call() -> None:
        calls[0] += 1

    sink = HookedSink(bus_sink(event_bus), after_each=count_call)
    dynamodb = CountingDynamoDB(outbox_table.client)

    result = run_sweep(
        outbox_table, sink, dynamodb=dynamodb, time_left=lambda: 5.0 if calls[0] >= 10 else 60.0
    )

    assert (result.swept, result.stopped_by, result.more_pending) == (100, "time", True)
    assert dynamodb.batch_get_calls == 1
    assert sorted(event_bus.received_ids()) == sorted(outbox.ids)[:100]
    assert len(outbox_table.pending_sort_keys()) == 50


def test_a_run_that_starts_out_of_time_reads_and_publishes_nothing(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    outbox = write_outbox(outbox_table, 3, made_at=OLD)
    dynamodb = CountingDynamoDB(outbox_table.client)

    result = run_sweep(outbox_table, bus_sink(event_bus), dynamodb=dynamodb, time_left=lambda: 2.0)

    assert (result.stopped_by, result.more_pending, result.swept) == ("time", True, 0)
    assert dynamodb.batch_get_calls == 0
    assert outbox_table.pending_sort_keys() == {outbox.sk(i) for i in range(3)}


def test_a_publish_call_that_keeps_raising_stops_the_run_without_deleting_its_entries(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    outbox = write_outbox(outbox_table, 15, made_at=OLD)
    failure = client_error("InternalFailure", "PutEvents")
    events = RecordingEvents(event_bus.client, raise_on_calls=dict.fromkeys(range(1, 6), failure))

    result = run_sweep(outbox_table, bus_sink(event_bus, events))

    assert result.failure_sk == outbox.sk(10)
    assert outbox_sort_keys(outbox_table) == {outbox.sk(i) for i in range(10, 15)}


def test_unprocessed_batch_get_keys_are_retried_with_backoff(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    outbox = write_outbox(outbox_table, 4, made_at=OLD)
    dynamodb = CountingDynamoDB(outbox_table.client, unprocessed_batch_gets=2)
    sleeps: list[float] = []

    result = run_sweep(outbox_table, bus_sink(event_bus), dynamodb=dynamodb, sleeps=sleeps)

    # 4 keys → 3 handed back → 2 handed back → all read
    assert dynamodb.batch_get_calls == 3
    assert sleeps[:2] == [0.05, 0.1]
    assert sorted(event_bus.received_ids()) == sorted(outbox.ids)
    assert result.unfetched == 0


def test_keys_never_read_are_left_pending_for_the_next_run(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    outbox = write_outbox(outbox_table, 4, made_at=OLD)
    dynamodb = CountingDynamoDB(outbox_table.client, unprocessed_batch_gets=-1)

    result = run_sweep(outbox_table, bus_sink(event_bus), dynamodb=dynamodb)

    # THEN the reads are retried a bounded number of times, then given up for this run
    assert dynamodb.batch_get_calls == 1 + 5
    assert (result.fetched, result.unfetched, result.more_pending) == (0, 4, True)
    # AND nothing is published, deleted or marked: all four stay pending
    assert event_bus.received_ids() == []
    assert outbox_table.pending_sort_keys() == {outbox.sk(i) for i in range(4)}


def test_unread_keys_are_not_retried_once_the_run_is_out_of_time(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    write_outbox(outbox_table, 4, made_at=OLD)
    dynamodb = CountingDynamoDB(outbox_table.client, unprocessed_batch_gets=-1)

    def time_left() -> float:  # runs out once the first read is handed back
        return 60.0 if dynamodb.batch_get_calls == 0 else 1.0

    result = run_sweep(outbox_table, bus_sink(event_bus), dynamodb=dynamodb, time_left=time_left)

    assert dynamodb.batch_get_calls == 1, "no wait for a retry the run has no time for"
    assert result.unfetched == 4 and result.more_pending


# ------------------------------------------------------------------------ bounds


def test_max_items_takes_the_oldest_first_and_leaves_the_rest(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN 40 old items spread over the shards
    outbox = write_outbox(outbox_table, 40, made_at=OLD)
    dynamodb = CountingDynamoDB(outbox_table.client)

    result = run_sweep(outbox_table, bus_sink(event_bus), dynamodb=dynamodb, max_items=10)

    # THEN the 10 oldest (smallest ULIDs) are published, across shards
    assert sorted(event_bus.received_ids()) == sorted(outbox.ids)[:10]
    assert (result.pending_items, result.stopped_by, result.more_pending) == (10, "max_items", True)
    assert len(outbox_sort_keys(outbox_table)) == 30
    # AND the index reads stay near the budget, not the backlog
    assert dynamodb.query_items < 40


def test_a_run_stops_taking_work_when_the_lambda_is_out_of_time(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN 25 old items, and the invocation nearly out of time after the first call
    outbox = write_outbox(outbox_table, 25, made_at=OLD)
    remaining = [60.0]

    def nearly_out_of_time() -> None:
        remaining[0] = 5.0  # below the 10 s reserve kept for the deletes

    sink = HookedSink(bus_sink(event_bus), after_each=nearly_out_of_time)

    result = run_sweep(outbox_table, sink, time_left=lambda: remaining[0])

    # THEN the first call's events are published and deleted, the rest stays pending
    assert sorted(event_bus.received_ids()) == sorted(outbox.ids[:10])
    assert (result.stopped_by, result.more_pending, result.publish.deleted) == ("time", True, 10)
    assert outbox_sort_keys(outbox_table) == {outbox.sk(i) for i in range(10, 25)}


# --------------------------------------------------------- overlap with the stream


def test_sweeper_first_then_the_late_stream_record_only_duplicates_never_recreates(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN an old item the sweeper publishes and deletes
    outbox = write_outbox(outbox_table, 2, made_at=OLD)
    run_sweep(outbox_table, bus_sink(event_bus))
    assert outbox_sort_keys(outbox_table) == set()

    # WHEN the stream publisher gets their INSERT records afterwards; the bus
    # rejects the second one this time (so the publisher tries to quarantine it)
    rejecting = RecordingEvents(event_bus.client, entry_errors={outbox.ids[1]: "MalformedDetail"})
    stream = run_stream(outbox.records, outbox_table, bus_sink(event_bus, rejecting))

    # THEN the first is published again (a duplicate), the second was already out
    assert Counter(event_bus.received_ids()) == {outbox.ids[0]: 2, outbox.ids[1]: 1}
    # AND neither the delete nor the quarantine brought an item back
    assert outbox_table.sort_keys() == set()
    assert (stream.response(), stream.quarantine_item_gone) == ({"batchItemFailures": []}, 1)


def test_stream_first_then_a_sweeper_reading_a_stale_index_publishes_nothing(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN the index as the sweeper will see it (GSIs are eventually consistent)...
    outbox = write_outbox(outbox_table, 3, made_at=OLD)
    stale = _index_snapshot(outbox_table)
    # ...and the stream publisher publishing and deleting the items before the sweep
    run_stream(outbox.records, outbox_table, bus_sink(event_bus))
    assert sorted(event_bus.received_ids()) == sorted(outbox.ids)
    dynamodb = CountingDynamoDB(outbox_table.client, stale_query_items=stale)
    events = RecordingEvents(event_bus.client)

    result = run_sweep(outbox_table, bus_sink(event_bus, events), dynamodb=dynamodb)

    # THEN the sweeper re-reads the items, finds them gone and publishes nothing
    assert (result.pending_items, result.not_pending, result.swept) == (3, 3, 0)
    assert events.calls == []
    assert outbox_table.sort_keys() == set()


def test_stream_publishing_while_the_sweeper_reads_items_means_no_duplicate_no_loss(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN the stream publisher runs after the sweeper read the index, before it reads items
    outbox = write_outbox(outbox_table, 3, made_at=OLD)
    dynamodb = CountingDynamoDB(outbox_table.client)
    dynamodb.before_batch_get = lambda: run_stream(
        outbox.records, outbox_table, bus_sink(event_bus)
    )

    result = run_sweep(outbox_table, bus_sink(event_bus), dynamodb=dynamodb)

    # THEN each event went out once (by the stream) and nothing is left or recreated
    assert Counter(event_bus.received_ids()) == dict.fromkeys(outbox.ids, 1)
    assert (result.not_pending, result.swept) == (3, 0)
    assert outbox_table.sort_keys() == set()


def test_stream_publishing_between_the_sweepers_read_and_send_only_duplicates(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN the stream publisher publishes and deletes the items just before the
    # sweeper's own call goes out (the sweeper already holds the items)
    outbox = write_outbox(outbox_table, 3, made_at=OLD)
    sink = HookedSink(
        bus_sink(event_bus), lambda: run_stream(outbox.records, outbox_table, bus_sink(event_bus))
    )

    result = run_sweep(outbox_table, sink)

    # THEN every event is out twice (consumers dedupe by id), none lost or recreated
    assert Counter(event_bus.received_ids()) == dict.fromkeys(outbox.ids, 2)
    assert result.swept == 3
    assert outbox_table.sort_keys() == set()


def test_sweeper_running_during_the_stream_publishers_call_only_duplicates(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN the sweeper sweeps while the stream publisher's call is in flight, and
    # the bus then rejects the stream's copy of the second event (poison on that path)
    outbox = write_outbox(outbox_table, 2, made_at=OLD)
    rejecting = RecordingEvents(event_bus.client, entry_errors={outbox.ids[1]: "MalformedDetail"})
    stream_sink = HookedSink(
        bus_sink(event_bus, rejecting), lambda: run_sweep(outbox_table, bus_sink(event_bus))
    )

    stream = run_stream(outbox.records, outbox_table, stream_sink)

    # THEN the sweeper published both; the stream duplicated the first and its
    # quarantine of the second found the item gone instead of recreating it
    assert Counter(event_bus.received_ids()) == {outbox.ids[0]: 2, outbox.ids[1]: 1}
    assert stream.quarantine_item_gone == 1
    assert outbox_table.sort_keys() == set()


def test_stream_that_lost_its_records_is_recovered_exactly_once_by_the_sweeper(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN 20 orders written with their events through the writer, and no stream
    # processing at all (the records were trimmed after 24 hours)
    writer = OutboxWriter(outbox_table.name, outbox_table.client, source="app.orders")
    written: list[str] = []
    for n in range(10):
        entity = {"PK": f"ORDER#{n}", "SK": "ORDER", "status": "PLACED"}
        events = [writer.new_event(entity, "OrderPlaced", {"n": n}) for _ in range(2)]
        written.extend(writer.write(entity, events).event_ids)
    later = datetime.now(UTC) + MIN_AGE + timedelta(seconds=1)

    # WHEN the sweeper runs after min age, twice
    first = run_sweep(outbox_table, bus_sink(event_bus), now=later)
    second = run_sweep(outbox_table, bus_sink(event_bus), now=later)

    # THEN every event was published exactly once and no pending item is left
    assert Counter(event_bus.received_ids()) == dict.fromkeys(written, 1)
    assert (first.swept, second.swept) == (20, 0)
    assert outbox_table.pending_sort_keys() == set()
    assert outbox_table.sort_keys() == {"ORDER"}


def test_sweeper_publishes_through_sns_with_the_same_rules(
    outbox_table: OutboxTable, sns_topic: SnsTopic
) -> None:
    outbox = write_outbox(outbox_table, 12, made_at=OLD)

    result = run_sweep(outbox_table, SnsSink(sns_topic.client, sns_topic.arn))

    assert sns_topic.received_ids() == outbox.ids
    assert (result.swept, result.publish.send_calls) == (12, 2)
    assert outbox_sort_keys(outbox_table) == set()


def _index_snapshot(table: OutboxTable) -> dict[str, list[dict[str, Any]]]:
    snapshot: dict[str, list[dict[str, Any]]] = {}
    for sk in sorted(table.pending_sort_keys()):
        shard = pending_shard(sk.removeprefix("OUTBOX#"))
        snapshot.setdefault(shard, []).append(
            {"PK": {"S": PK}, "SK": {"S": sk}, ATTR_PENDING_SHARD: {"S": shard}}
        )
    return snapshot


# ------------------------------------------------------------------------ handler


@pytest.fixture
def sweeper_env(
    monkeypatch: pytest.MonkeyPatch, outbox_table: OutboxTable, event_bus: EventBus
) -> Iterator[None]:
    monkeypatch.setenv("OUTBOX_EVENT_BUS_NAME", event_bus.name)
    monkeypatch.setenv("OUTBOX_TABLE_NAME", outbox_table.name)
    for name in ("OUTBOX_PUBLISH_TO", "OUTBOX_TOPIC_ARN", "OUTBOX_PENDING_INDEX"):
        monkeypatch.delenv(name, raising=False)
    sweeper.default_runtime.cache_clear()
    sweeper.metrics.clear_metrics()
    yield
    sweeper.default_runtime.cache_clear()
    sweeper.metrics.clear_metrics()


def test_handler_sweeps_with_settings_from_the_environment_and_emits_metrics(
    outbox_table: OutboxTable,
    event_bus: EventBus,
    sweeper_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a 60 s minimum age, items 2 minutes and 10 s old
    monkeypatch.setenv("OUTBOX_SWEEPER_MIN_AGE_SECONDS", "60")
    real_now = datetime.now(UTC)
    old = write_outbox(outbox_table, 2, made_at=real_now - timedelta(minutes=2))
    young = write_outbox(outbox_table, 1, made_at=real_now - timedelta(seconds=10))

    summary = sweeper.handler({"source": "aws.scheduler"}, FakeLambdaContext())

    # THEN the old ones are out and gone, the young one stays
    assert event_bus.received_ids() == old.ids
    assert outbox_sort_keys(outbox_table) == {young.sk(0)}
    assert (summary["swept"], summary["pending_items"]) == (2, 2)
    # AND the metrics went out as EMF
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    assert len(emf) == 1
    assert (emf[0]["SweptEvents"], emf[0]["PendingItems"], emf[0]["PutEventsCalls"]) == (
        [2.0],
        [2.0],
        [1.0],
    )
    (age,) = emf[0]["OldestPendingAgeSeconds"]
    assert 119 <= age < 180
    units = {m["Name"]: m["Unit"] for m in emf[0]["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert units["OldestPendingAgeSeconds"] == "Seconds"


def test_handler_selects_sns_from_the_environment(
    outbox_table: OutboxTable,
    sweeper_env: None,
    sns_topic: SnsTopic,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OUTBOX_PUBLISH_TO", "sns")
    monkeypatch.setenv("OUTBOX_TOPIC_ARN", sns_topic.arn)
    monkeypatch.delenv("OUTBOX_EVENT_BUS_NAME")
    outbox = write_outbox(outbox_table, 2, made_at=datetime.now(UTC) - timedelta(minutes=10))

    summary = sweeper.handler({}, FakeLambdaContext())

    assert sns_topic.received_ids() == outbox.ids
    assert summary["swept"] == 2


def test_handler_with_an_invalid_setting_fails_naming_the_variable(
    outbox_table: OutboxTable, sweeper_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OUTBOX_SWEEPER_MAX_ITEMS", "lots")
    outbox = write_outbox(outbox_table, 1, made_at=OLD)

    with pytest.raises(ConfigurationError, match="OUTBOX_SWEEPER_MAX_ITEMS"):
        sweeper.handler({}, FakeLambdaContext())

    assert outbox_sort_keys(outbox_table) == {outbox.sk(0)}


def test_a_foreign_key_in_the_pending_index_is_logged_as_digests_only(
    outbox_table: OutboxTable, event_bus: EventBus, caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN an entity item that carries the shard attribute by mistake; its SK
    # sorts below the outbox's, so the sweeper's query reads it
    foreign_key = {
        "PK": {"S": "CUSTOMER#alice@example.com"},
        "SK": {"S": "EMAIL#alice@example.com"},
    }
    outbox_table.put(foreign_key | {ATTR_PENDING_SHARD: {"S": "00"}})
    powertools_logger = logging.getLogger(sweeper.logger.service)
    powertools_logger.addHandler(caplog.handler)
    try:
        result = run_sweep(outbox_table, bus_sink(event_bus))
    finally:
        powertools_logger.removeHandler(caplog.handler)

    # THEN it is skipped and logged, by digests of its key values only
    assert result.foreign_keys == 1
    logged = "\n".join(repr(vars(record)) for record in caplog.records)
    assert "non-outbox key" in logged
    assert key_digest("CUSTOMER#alice@example.com") in logged
    assert "alice@example.com" not in logged
