"""The publishers under throttling: random entry throttling and a storm, on moto.

Each run publishes the same 1,000 events through ours and through the seed
article's publisher as written (:mod:`benchmarks.seed_publisher`), with
``PutEvents`` entries throttled by :class:`ThrottlingEvents` (a seeded draw per
entry, or every entry during a storm). Lambda's stream retries are played by
:func:`drive`: after a partial failure it invokes again from the reported
record, after a full failure (a raise, or an identifier Lambda cannot place,
read by the local runtime's own rules) with the whole batch, up to the
mapping's 10 retries (bisect is not modelled). Time is virtual: each call
takes 20 ms, our publisher's backoff sleeps advance the clock, and each
invocation has the module's default 60 s timeout.

Counted per event id: accepted by the bus (more than once is a duplicate),
and still in the table afterwards. Lost = never accepted and gone from the
table; left pending = never accepted, still in the table (the sweeper's).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks import emulator
from benchmarks.emulator import BUS_NAME, TABLE_NAME, CallCounter
from benchmarks.seed_publisher import publicar_outbox
from dynamodb_outbox.local.responses import judge_response
from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies, RetryPolicy
from dynamodb_outbox.sinks import EventBridgeSink
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from tests.support.moto_tables import create_outbox_table

EVENTS = 1_000
TIMEOUT_SECONDS = 60.0
CALL_SECONDS = 0.02
MAXIMUM_RETRY_ATTEMPTS = 10  # the module's default for the stream mapping
THROTTLED_SHARE = 0.10
STORM_SECONDS = 30.0
SEED = 20261203


@dataclass
class VirtualClock:
    now: float = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


@dataclass
class ThrottlingEvents:
    """PutEvents on moto with entries throttled by a seeded draw, or all of them in a storm."""

    real: Any
    clock: VirtualClock
    share: float = 0.0
    storm_until: float = 0.0
    rng: random.Random = field(default_factory=lambda: random.Random(SEED))
    accepted: Counter[str] = field(default_factory=Counter)
    calls: int = 0

    def put_events(self, *, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls += 1
        self.clock.now += CALL_SECONDS
        storm = self.clock.now < self.storm_until
        throttled = [storm or self.rng.random() < self.share for _ in Entries]
        passing = [entry for entry, no in zip(Entries, throttled, strict=True) if not no]
        answers = iter(self.real.put_events(Entries=passing)["Entries"] if passing else [])
        entries = []
        for entry, no in zip(Entries, throttled, strict=True):
            if no:
                entries.append(
                    {"ErrorCode": "ThrottlingException", "ErrorMessage": "Rate exceeded"}
                )
            else:
                entries.append(next(answers))
                self.accepted[json.loads(entry["Detail"])["id"]] += 1
        return {"FailedEntryCount": sum(throttled), "Entries": entries}


@dataclass
class Drive:
    invocations: int = 0
    discarded_records: int = 0


def _sequence(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["SequenceNumber"])


def drive(
    records: Sequence[dict[str, Any]], invoke: Callable[[list[dict[str, Any]]], Any]
) -> Drive:
    """Lambda's retries of one stream batch, as the local runtime reads responses."""
    done = Drive()
    remaining = list(records)
    retries = 0
    while remaining:
        done.invocations += 1
        try:
            response = invoke(remaining)
        except Exception:  # a raise is a full failure
            whole = True
            failed: tuple[str, ...] = ()
        else:
            verdict = judge_response(
                response,
                report_batch_item_failures=True,
                batch_ids=[_sequence(record) for record in remaining],
            )
            if verdict.succeeded:
                return done
            whole = verdict.whole_batch_failed
            failed = verdict.failed_ids or ()
        if retries >= MAXIMUM_RETRY_ATTEMPTS:
            done.discarded_records += len(remaining)  # to the on-failure queue
            return done
        retries += 1
        if not whole:
            positions = {_sequence(record): n for n, record in enumerate(remaining)}
            remaining = remaining[min(positions[seq] for seq in failed) :]
    return done


def _run(
    publisher: str, batch_size: int, *, share: float = 0.0, storm: float = 0.0
) -> dict[str, Any]:
    with emulator.emulator():
        setup_dynamodb, setup_events = emulator.clients()
        create_outbox_table(setup_dynamodb, TABLE_NAME)
        emulator.create_bus(setup_events)
        dynamodb, events_client = emulator.clients()
        counter = CallCounter().attach(dynamodb)
        clock = VirtualClock()
        events = ThrottlingEvents(events_client, clock, share=share, storm_until=storm)
        rng = random.Random(SEED + 1)
        batches = [emulator.outbox_batch(batch_size) for _ in range(EVENTS // batch_size)]
        for batch in batches:
            emulator.put_items(setup_dynamodb, batch.items)

        def ours(records: list[dict[str, Any]]) -> Any:
            started = clock.now
            return publish_stream_batch(
                records,  # type: ignore[arg-type]
                PublishDependencies(
                    sink=EventBridgeSink(events, BUS_NAME),
                    table_name=TABLE_NAME,
                    dynamodb_client=dynamodb,
                    sleep=clock.sleep,
                    retry=RetryPolicy(jitter=rng.random),
                    table_keys=DEFAULT_TABLE_KEYS,
                ),
                time_left=lambda: TIMEOUT_SECONDS - (clock.now - started),
            ).response()

        def seed(records: list[dict[str, Any]]) -> Any:
            return publicar_outbox(
                records,
                events_client=events,
                dynamodb_client=dynamodb,
                event_bus_name=BUS_NAME,
                source=emulator.SOURCE,
                table_name=TABLE_NAME,
            )

        invoke = ours if publisher == "ours" else seed
        drives = [drive(batch.records, invoke) for batch in batches]
        left = {
            item["SK"]["S"].split("#", 1)[1]
            for page in setup_dynamodb.get_paginator("scan").paginate(TableName=TABLE_NAME)
            for item in page["Items"]
        }
        ids = [item["SK"]["S"].split("#", 1)[1] for batch in batches for item in batch.items]
        calls = events.calls + counter.total
        duplicated = sum(1 for event_id in ids if events.accepted[event_id] > 1)
        return {
            "events": len(ids),
            "lost": sum(
                1 for event_id in ids if not events.accepted[event_id] and event_id not in left
            ),
            "left_pending": sum(
                1 for event_id in ids if not events.accepted[event_id] and event_id in left
            ),
            "duplicated": duplicated,
            "duplicated_share": duplicated / len(ids),
            "calls": calls,
            "calls_per_event": calls / len(ids),
            "invocations": sum(d.invocations for d in drives),
            "discarded_records": sum(d.discarded_records for d in drives),
            "virtual_seconds": round(clock.now, 2),
        }


#: The goals of the throttling rows (issue 13), checked by ``make bench``.
GOAL_DUPLICATED_SHARE = 0.02
GOAL_CALLS_PER_EVENT = 0.18


def under_throttling() -> dict[str, Any]:
    """Both publishers at 10% random entry throttling (batch 100 and 1,000) and in a storm."""
    rows: dict[str, Any] = {}
    for batch_size in (100, 1000):
        rows[f"random_10pct_batch_{batch_size}"] = {
            name: _run(name, batch_size, share=THROTTLED_SHARE) for name in ("ours", "seed")
        }
    rows["storm_30s_batch_100"] = {
        name: _run(name, 100, storm=STORM_SECONDS) for name in ("ours", "seed")
    }
    return rows
