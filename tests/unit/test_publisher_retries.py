"""Retryable failures are retried inside the invocation, within its time budget.

A throttle used to checkpoint at the first failed entry, so the stream re-sent
everything after it, entries already accepted and deleted included: under a
throttle the bus got more load. Now failed entries ride first in the next call,
with backoff, for as long as the invocation's remaining time allows (minus a
margin for the deletes); only what still fails then is checkpointed.

Time here is virtual: ``sleep`` advances the clock and ``time_left`` reads it.
"""

from __future__ import annotations

import json
from typing import Any

from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies, PublishResult, RetryPolicy
from dynamodb_outbox.sinks import EventBridgeSink
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from tests.factories import make_envelope, outbox_stream_record, sequence_numbers

TIMEOUT_SECONDS = 60.0
#: the full-jitter draw at its top: waits are 50 ms, 100 ms, ... up to the cap
TOP_OF_JITTER = RetryPolicy(jitter=lambda: 1.0)


class VirtualTime:
    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += seconds

    def time_left(self) -> float:
        return TIMEOUT_SECONDS - self.now


class StormyEvents:
    """PutEvents that throttles every entry until ``storm_ends`` (virtual seconds)."""

    def __init__(self, clock: VirtualTime, storm_ends: float) -> None:
        self.clock = clock
        self.storm_ends = storm_ends
        self.calls: list[list[str]] = []
        self.accepted: list[str] = []

    def put_events(self, *, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        ids = [json.loads(entry["Detail"])["id"] for entry in Entries]
        self.calls.append(ids)
        self.clock.now += 0.02  # each call takes 20 ms
        if self.clock.now < self.storm_ends:
            answer = {"ErrorCode": "ThrottlingException", "ErrorMessage": "storm"}
            return {"FailedEntryCount": len(ids), "Entries": [answer for _ in ids]}
        self.accepted.extend(ids)
        return {"FailedEntryCount": 0, "Entries": [{"EventId": i} for i in ids]}


class Table:
    """Deletes succeed, or (``stuck``) are never processed."""

    def __init__(self, clock: VirtualTime, *, stuck: bool = False) -> None:
        self.clock = clock
        self.stuck = stuck
        self.deleted: list[str] = []

    def update_item(self, **kwargs: Any) -> dict[str, Any]:
        raise AssertionError("nothing here is poison")

    def batch_write_item(self, **kwargs: Any) -> dict[str, Any]:
        self.clock.now += 0.02
        (requests,) = kwargs["RequestItems"].values()
        if self.stuck:
            return {"UnprocessedItems": kwargs["RequestItems"]}
        self.deleted.extend(r["DeleteRequest"]["Key"]["SK"]["S"] for r in requests)
        return {"UnprocessedItems": {}}


def _records(count: int) -> tuple[list[str], list[dict[str, Any]]]:
    seqs = sequence_numbers()
    envelopes = [make_envelope() for _ in range(count)]
    return [e.id for e in envelopes], [
        outbox_stream_record(e, "ORDER#1", next(seqs)) for e in envelopes
    ]


def _publish(
    records: list[dict[str, Any]],
    events: StormyEvents,
    table: Table,
    clock: VirtualTime,
    *,
    budget: bool = True,
) -> PublishResult:
    """Publish on virtual time; with ``budget``, the invocation's time left is the clock's."""
    return publish_stream_batch(
        records,  # type: ignore[arg-type]
        PublishDependencies(
            sink=EventBridgeSink(events, "bus"),
            table_name="t",
            dynamodb_client=table,  # type: ignore[arg-type]
            sleep=clock.sleep,
            retry=TOP_OF_JITTER,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
        time_left=clock.time_left if budget else None,
    )


def test_a_storm_shorter_than_the_budget_is_waited_out_inside_the_invocation() -> None:
    # GIVEN every entry throttled for the first 30 s of a 60 s invocation
    clock = VirtualTime()
    ids, records = _records(25)
    events, table = StormyEvents(clock, storm_ends=30.0), Table(clock)

    result = _publish(records, events, table, clock)

    # THEN nothing is checkpointed: the shard moves on as soon as the storm ends
    assert result.response() == {"batchItemFailures": []}
    assert sorted(events.accepted) == sorted(ids), "each event accepted exactly once"
    assert len(table.deleted) == 25
    # AND the waits backed off to the cap (2 s), not hammering the bus
    assert 30.0 <= clock.now < TIMEOUT_SECONDS
    assert len(events.calls) < 30


def test_a_storm_longer_than_the_budget_checkpoints_before_the_timeout() -> None:
    # GIVEN a storm that outlasts the invocation
    clock = VirtualTime()
    _, records = _records(5)
    events, table = StormyEvents(clock, storm_ends=1_000.0), Table(clock)

    result = _publish(records, events, table, clock)

    # THEN Lambda resumes at the first record, and the invocation ended in time,
    # with the margin (5 s) left for the deletes
    assert result.response() == {
        "batchItemFailures": [{"itemIdentifier": records[0]["dynamodb"]["SequenceNumber"]}]
    }
    assert events.accepted == [] and table.deleted == []
    assert clock.now <= TIMEOUT_SECONDS - 5.0
    assert clock.now > TIMEOUT_SECONDS - 5.0 - 2.0 - 0.1, "the budget was used, not wasted"


def test_without_a_budget_each_entry_gets_five_attempts() -> None:
    clock = VirtualTime()
    _, records = _records(3)
    events, table = StormyEvents(clock, storm_ends=1_000.0), Table(clock)

    result = _publish(records, events, table, clock, budget=False)

    assert len(events.calls) == 5
    assert result.failure_position == 0


def test_a_short_timeout_keeps_a_fifth_of_it_as_margin_and_still_retries() -> None:
    # GIVEN a 3 s invocation (the margin would otherwise be the whole of it)
    clock = VirtualTime()
    clock.now = TIMEOUT_SECONDS - 3.0
    ids, records = _records(5)
    events, table = StormyEvents(clock, storm_ends=clock.now + 0.5), Table(clock)

    result = _publish(records, events, table, clock)

    assert result.response() == {"batchItemFailures": []}
    assert sorted(events.accepted) == sorted(ids)
    assert clock.time_left() > 0


def test_deletes_that_never_succeed_stop_before_the_timeout_and_are_counted() -> None:
    # GIVEN 1 s left and a table whose deletes are never processed
    clock = VirtualTime()
    clock.now = TIMEOUT_SECONDS - 1.0
    _, records = _records(3)
    events, table = StormyEvents(clock, storm_ends=0.0), Table(clock, stuck=True)

    result = _publish(records, events, table, clock)

    # THEN the batch succeeds (the events are out), the items are left to the
    # sweeper (a duplicate later, never a loss) and counted, all within the budget
    assert result.response() == {"batchItemFailures": []}
    assert result.delete_leftovers == 3
    assert clock.time_left() > 0
