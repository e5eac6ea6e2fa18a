"""Property-based fault injection: random fault schedules, whole pipeline, invariants.

Each hypothesis example is one deployment (fresh moto, see ``pipeline.py``) that
commits a batch of orders through :class:`OutboxWriter`, runs the publisher's
stream mapping, the bus, the consumer's SQS mapping and the sweeper on a
virtual clock, with faults drawn from the schedule, then lets the sweeper run
fault-free until nothing is pending, and checks:

1. every committed event took effect exactly once (ledger ``times_processed ==
   1``), or sits where an alarm reports it: the consumer DLQ (only events whose
   consumer was made to fail at least ``maxReceiveCount`` times) or quarantine
   (only events the bus rejected as malformed); no ledger entry is ever above 1;
2. a cancelled transaction left nothing: no outbox item, no event, no DLQ entry;
3. poison outbox items are quarantined and never reach the consumer; poison
   consumer messages all end in the DLQ;
4. after the sweeper's final run no outbox item is pending: what is left is
   quarantined (marked, out of the pending index);
5. the publisher's re-run bound (see :func:`_check_stream_bound`);
6. the runbook's redrive of the consumer DLQ on day 13 of its 14 (what it
   holds, plus a redundant copy of every event that took effect): every event
   then took effect exactly once, none twice (docs/seams.md, Windows);
7. live changes (fault kind ``live_change``, rolled per order written): an
   apply updating the mappings while orders are written and the flow runs (a
   consumer's batch size; publishing paused as the transport switch's runbook
   does, then resumed with another stream batch size) loses nothing and
   applies nothing twice (1. covers every event, those written while paused
   too), and no publisher invocation starts while publishing is paused
   (docs/live-changes.md); once resumed, the stream delivers every item
   written while paused (the mapping resumes where it stopped), not only the
   sweeper.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from ulid import ULID

from dynamodb_outbox.consumer import parse_body
from dynamodb_outbox.envelope import Envelope, InvalidEnvelope
from dynamodb_outbox.local import STREAM_RETENTION_SECONDS, toolkit_follows
from dynamodb_outbox.outbox_item import (
    ATTR_ENVELOPE,
    ATTR_PENDING_SHARD,
    ATTR_STATUS,
    OUTBOX_SK_PREFIX,
    STATUS_PENDING,
    outbox_sk,
    pending_shard,
)
from dynamodb_outbox.writer import Condition, OutboxWriter, TransactionCancelled
from tests.reliability.campaign import CAMPAIGN, MIN_EVENTS
from tests.reliability.pipeline import (
    CONSUMER,
    FAULT_KINDS,
    MAX_RECEIVE_COUNT,
    SOURCE,
    SWEEPER_MIN_AGE_SECONDS,
    TABLE,
    FaultPlan,
    Pipeline,
    pipeline,
)

FINAL_SWEEPS = 6

# Fault rates in percent: per call, per entry, or (consumer) per event.
RATES = st.sampled_from([0, 0, 2, 5, 15])
# A rejected entry parks a good event in quarantine: keep it rare.
RARE = st.sampled_from([0, 0, 2, 5])
# How many times the consumer fails an event it was chosen to fail; >= 5 sends
# a message to the DLQ (maxReceiveCount 5).
CONSUMER_FAILURES = st.sampled_from([1, 2, 4, MAX_RECEIVE_COUNT, MAX_RECEIVE_COUNT + 2])


@dataclass(frozen=True)
class Schedule:
    orders: int
    events_per_order: int
    trimmed_orders: int
    cancelled: int
    poison_items: int
    poison_messages: int
    sweeper_overlaps: bool
    stream_batch_size: int
    rates: dict[str, int]
    consumer_failures: int
    rnd: random.Random


@st.composite
def schedules(draw: st.DrawFn) -> Schedule:
    # 45 to 52 events per schedule, in transactions of 1 to 3 events: the campaign's
    # size is then known from max_examples alone (see MIN_EVENTS).
    events_per_order = draw(st.integers(1, 3))
    orders = draw(st.integers(44 // events_per_order + 1, 52 // events_per_order))
    return Schedule(
        orders=orders,
        events_per_order=events_per_order,
        trimmed_orders=draw(st.one_of(st.just(0), st.integers(1, orders // 2))),
        cancelled=draw(st.integers(0, 3)),
        poison_items=draw(st.integers(0, 3)),
        poison_messages=draw(st.integers(0, 3)),
        sweeper_overlaps=draw(st.booleans()),
        # 100 is the module's default; smaller batches exercise checkpoints and bisection.
        stream_batch_size=draw(st.sampled_from([100, 10, 3])),
        rates={kind: draw(RARE if kind == "entry_rejected" else RATES) for kind in FAULT_KINDS},
        consumer_failures=draw(CONSUMER_FAILURES),
        rnd=draw(st.randoms(use_true_random=False)),
    )


# ------------------------------------------------------------------- inputs


def _poison_item(index: int) -> tuple[str, dict[str, dict[str, str]]]:
    """A pending outbox item whose event can never be published."""
    event_id = str(ULID())
    sk = OUTBOX_SK_PREFIX + event_id
    other = Envelope(type="OrderPlaced", source=SOURCE, subject="ORDER#X", data={})
    bodies = [
        "{not json",
        other.to_json(),  # a valid envelope whose id is not the sort key's
        json.dumps({"id": event_id, "type": "OrderPlaced"}),  # fields missing
        None,  # no envelope attribute at all
    ]
    body = bodies[index % len(bodies)]
    item = {
        "PK": {"S": f"POISON#{index}"},
        "SK": {"S": sk},
        ATTR_STATUS: {"S": STATUS_PENDING},
        ATTR_PENDING_SHARD: {"S": pending_shard(event_id)},
    }
    if body is not None:
        item[ATTR_ENVELOPE] = {"S": body}
    return sk, item


def _poison_message(index: int) -> str:
    """A consumer queue message that can never be processed."""
    wrong = Envelope(type="OrderPlaced", source=SOURCE, subject="ORDER#Y", data={})
    bodies = [
        f"poison #{index}: not JSON",
        json.dumps({"order": index, "note": "JSON, not an envelope"}),
        json.dumps({"detail-type": "SomethingElse", "detail": wrong.to_dict(), "n": index}),
        f"poison #{index} " + "x" * 200_000,  # big, and not JSON
    ]
    return bodies[index % len(bodies)]


# ------------------------------------------------------------------- one run


@dataclass
class Outcome:
    committed: dict[str, str]  # event id -> outbox sort key
    consumer_budget: dict[str, int]  # event id -> consumer failures injected
    cancelled: set[str]
    poison_sks: set[str]
    poison_bodies: list[str]
    #: event id -> the event as a consumer message body (a copy, for the redrive)
    bodies: dict[str, str] = field(default_factory=dict)


def _write(schedule: Schedule, p: Pipeline) -> Outcome:
    rnd = schedule.rnd
    writer = OutboxWriter(TABLE, p.dynamodb, source=SOURCE)
    outcome = Outcome({}, {}, set(), set(), [])

    def order(n: int) -> None:
        entity = {"PK": f"ORDER#{n}", "SK": "META", "total": n}
        envelopes = [
            writer.new_event(entity, "OrderPlaced", {"order": n, "line": line})
            for line in range(schedule.events_per_order)
        ]
        writer.write(entity, envelopes, condition=Condition.item_absent())
        for envelope in envelopes:
            outcome.committed[envelope.id] = outbox_sk(envelope.id)
            outcome.bodies[envelope.id] = envelope.to_json()
            if rnd.randrange(100) < schedule.rates.get("consumer_exception", 0):
                outcome.consumer_budget[envelope.id] = schedule.consumer_failures
                p.plan.consumer_failures[envelope.id] = schedule.consumer_failures
        # Not among the trimmed orders: their records must expire unread.
        if n >= schedule.trimmed_orders and p.plan.roll("live_change"):
            p.live_change()
            p.runtime.poll()  # the flow moves on under the new configuration

    for n in range(schedule.trimmed_orders):
        order(n)
    if schedule.trimmed_orders:
        # The stream path never sees these: their records expire before it polls.
        p.clock.advance(STREAM_RETENTION_SECONDS + 3_600)
    for n in range(schedule.trimmed_orders, schedule.orders):
        order(n)
    for _ in range(schedule.cancelled):
        # The order exists already: the create-only condition cancels the transaction.
        n = rnd.randrange(schedule.orders)
        entity = {"PK": f"ORDER#{n}", "SK": "META", "total": -1}
        envelope = writer.new_event(entity, "OrderPlaced", {"order": n, "again": True})
        with pytest.raises(TransactionCancelled) as cancelled:
            writer.write(entity, [envelope], condition=Condition.item_absent())
        assert cancelled.value.conditional_check_failed
        outcome.cancelled.add(envelope.id)
    for index in range(schedule.poison_items):
        sk, item = _poison_item(index)
        p.dynamodb.put_item(TableName=TABLE, Item=item)
        outcome.poison_sks.add(sk)
    for index in range(schedule.poison_messages):
        body = _poison_message(index)
        p.sqs.send_message(QueueUrl=p.queue_url, MessageBody=body)
        outcome.poison_bodies.append(body)
    return outcome


def _run(schedule: Schedule, p: Pipeline) -> None:
    p.resume_publishing()  # the runbook's last step, if a live change paused publishing
    if schedule.sweeper_overlaps:
        # The sweeper (min age 0: everything) races the stream publisher's first batch.
        p.runtime.poll()
        p.run_sweeper(min_age_seconds=0)
    p.drain()
    # A scheduled sweep while faults still happen.
    p.clock.advance(SWEEPER_MIN_AGE_SECONDS + 1)
    p.run_sweeper()
    p.drain()
    p.plan.enabled = False
    for _ in range(FINAL_SWEEPS):
        p.clock.advance(SWEEPER_MIN_AGE_SECONDS + 1)
        p.run_sweeper()
        p.drain()
        if not p.unquarantined_sort_keys():
            break


# ------------------------------------------------------------------- invariants


def _check_stream_bound(p: Pipeline) -> tuple[int, int]:
    """The publisher's re-run bound, from its checkpoint semantics and bisect.

    The publisher quarantines poison and reports only the FIRST retryable
    failure of a batch (one ``itemIdentifier``). With bisect, Lambda splits at
    that record and retries from it; a whole-batch failure (a crash) is halved.
    So:

    * poison never causes a re-run: an invocation in which no fault was
      injected succeeds, whatever poison its batch holds;
    * a partial response names exactly one record, and the records before it
      are never delivered again (the checkpoint is honoured);
    * hence a record is delivered at most ``1 + F + D`` times, where ``F`` is
      the number of invocations that carried it AND had a fault injected, and
      ``D`` the number of those that were the platform's duplicate deliveries
      (a duplicate is one extra delivery; if it also fails, its retry is
      another, so one invocation can account for two).

    Returns (redeliveries, most deliveries of one record).
    """
    invocations = p.publisher.invocations
    assert len(invocations) == len(p.stream_invocation_faulted)
    faulted_by_request = p.stream_invocation_faulted
    last_seen: dict[str, int] = {}
    for index, invocation in enumerate(invocations):
        for sequence in invocation.item_ids:
            last_seen[sequence] = index
    deliveries: Counter[str] = Counter()
    faulted: Counter[str] = Counter()
    for index, invocation in enumerate(invocations):
        # A timeout is a fault whatever made the time run out: with concurrent
        # lanes, another lane's waits advance the shared clock too.
        had_fault = faulted_by_request[invocation.request_id] or "timed out" in str(
            invocation.error
        )
        deliveries.update(invocation.item_ids)
        if invocation.duplicate:
            faulted.update(invocation.item_ids)
        if had_fault:
            faulted.update(invocation.item_ids)
        elif not invocation.duplicate:
            assert invocation.outcome == "success", (
                f"invocation {index} failed without an injected fault: poison or a bug "
                f"made good records re-run ({invocation.reason}, {invocation.error})"
            )
        if invocation.outcome == "partial":
            reported = invocation.response["batchItemFailures"]
            assert len(reported) == 1, f"the publisher reported {reported}, not one checkpoint"
            checkpoint = invocation.item_ids.index(reported[0]["itemIdentifier"])
            again = [s for s in invocation.item_ids[:checkpoint] if last_seen[s] > index]
            assert not again, f"records before the checkpoint were delivered again: {again}"
    for sequence, count in deliveries.items():
        assert count <= 1 + faulted[sequence], (
            f"record {sequence} delivered {count} times with {faulted[sequence]} faulted "
            "invocations: more re-runs than the checkpoint bound allows"
        )
    redeliveries = sum(deliveries.values()) - len(deliveries)
    return redeliveries, max(deliveries.values(), default=0)


#: The redrive comes on this day after the deployment started: within the 14 days
#: a standard DLQ keeps every copy (counted from its first enqueue, which came
#: after the start), and after the toolkit's former 7-day window.
REDRIVE_DAY = 13


def _redrive_on_the_dlqs_last_day(p: Pipeline, bodies: list[str]) -> dict[str, int]:
    """Move ``bodies`` back to the consumer queue on day 13, faults off; the ledger after."""
    p.plan.enabled = False
    p.clock.advance_to(p.started_at + REDRIVE_DAY * 86400)
    with toolkit_follows(p.clock):
        for body in bodies:
            p.sqs.send_message(QueueUrl=p.queue_url, MessageBody=body)
        p.consumer.drain(max_invocations=20_000)
    assert p.queue_depth(p.queue_url) == 0
    return p.ledger()


def _check(schedule: Schedule, p: Pipeline, outcome: Outcome) -> Counter[str]:
    ledger = p.ledger()
    dlq_bodies = p.take_all(p.dlq_url)
    dlq_events: Counter[str] = Counter()
    dlq_poison = 0
    for body in dlq_bodies:
        if body in outcome.poison_bodies:
            dlq_poison += 1
            continue
        try:
            dlq_events[parse_body(body).id] += 1
        except InvalidEnvelope as exc:  # pragma: no cover - a failure message
            raise AssertionError(f"unexpected DLQ message {body[:200]!r}") from exc
    quarantined = p.quarantined_sort_keys()
    good_quarantined = {event_id for event_id, sk in outcome.committed.items() if sk in quarantined}

    # 1. exactly once in effect, or alarmed
    assert all(count == 1 for count in ledger.values()), {k: v for k, v in ledger.items() if v != 1}
    bounced_copies = 0
    for event_id in dlq_events:
        assert event_id in outcome.committed, f"DLQ holds an unknown event {event_id}"
        if outcome.consumer_budget.get(event_id, 0) >= MAX_RECEIVE_COUNT:
            continue
        # A redundant copy may reach the DLQ although its event took effect:
        # a handled message that SQS delivers once more after its receives ran
        # out (at-least-once), or a duplicate returned while a concurrent
        # invocation held its event INPROGRESS. Those receives count too.
        assert ledger.get(event_id) == 1, (
            f"event {event_id} reached the DLQ without failing {MAX_RECEIVE_COUNT} times "
            "and without taking effect"
        )
        bounced_copies += 1
    assert len(good_quarantined) <= p.plan.fired["entry_rejected"]
    # Accepted by PutEvents, then refused by the queue and its DLQ: on AWS a
    # silent loss, whatever became of the outbox item.
    dropped = {parse_body(undelivered.body).id for undelivered in p.seams.dropped}
    lost = [
        event_id
        for event_id in outcome.committed
        if event_id in dropped
        or (
            ledger.get(event_id) != 1
            and event_id not in dlq_events
            and event_id not in good_quarantined
        )
    ]
    assert not lost, (
        f"{len(lost)} committed event(s) lost: {lost[:5]} "
        f"({len(dropped)} dropped between the bus and the queue)"
    )
    # 2. cancelled transactions left nothing behind
    sort_keys = {item["SK"]["S"] for item in p.outbox_items()}
    for event_id in outcome.cancelled:
        assert event_id not in ledger
        assert event_id not in dlq_events
        assert OUTBOX_SK_PREFIX + event_id not in sort_keys
    # 3. poison
    assert outcome.poison_sks <= quarantined, outcome.poison_sks - quarantined
    assert dlq_poison == len(outcome.poison_bodies)
    # 4. nothing pending after the sweeper's final run; the consumer queue is empty
    assert not p.unquarantined_sort_keys(), p.unquarantined_sort_keys()
    assert quarantined == outcome.poison_sks | {outcome.committed[e] for e in good_quarantined}
    assert p.queue_depth(p.queue_url) == 0
    # 7. no publisher invocation while a live change had paused publishing, and
    # the stream delivered what was written meanwhile once resumed: the sweeper
    # would republish it anyway, so invariant 1 alone cannot tell a mapping that
    # resumed where it stopped from one that skipped the pause's records
    assert p.invocations_while_paused == 0
    for before, written in p.resumes:
        delivered = {
            record["dynamodb"]["Keys"]["SK"]["S"]
            for invocation in p.publisher.invocations[before:]
            for record in invocation.event["Records"]
        }
        assert written <= delivered, (
            f"{len(written - delivered)} outbox item(s) written while publishing was paused "
            "never reached the publisher after the resume"
        )
    # 5. the re-run bound
    redeliveries, most = _check_stream_bound(p)
    CAMPAIGN.maximum("max deliveries of one stream record", most)
    # 6. the redrive on the DLQ's last day: what the DLQ holds, plus a redundant
    # copy of every event that took effect (any of them may have one there)
    redriven = [body for body in dlq_bodies if body not in outcome.poison_bodies]
    redriven += [outcome.bodies[event_id] for event_id, count in ledger.items() if count == 1]
    after_redrive = _redrive_on_the_dlqs_last_day(p, redriven)
    assert all(count == 1 for count in after_redrive.values()), {
        k: v for k, v in after_redrive.items() if v != 1
    }
    assert set(dlq_events) <= set(after_redrive), set(dlq_events) - set(after_redrive)

    processed = sum(1 for count in ledger.values() if count == 1)
    return Counter(
        {
            "events committed": len(outcome.committed),
            "events taken effect once (ledger == 1)": processed,
            "events in the consumer DLQ (alarmed)": len(
                {e for e in dlq_events if ledger.get(e) != 1}
            ),
            "redundant copies in the DLQ (their event took effect)": bounced_copies,
            "events quarantined by the bus (alarmed)": len(
                {e for e in good_quarantined if ledger.get(e) != 1}
            ),
            "cancelled transactions": len(outcome.cancelled),
            "poison outbox items quarantined": len(outcome.poison_sks),
            "poison consumer messages in DLQ": dlq_poison,
            "stream records trimmed before publication": p.publisher.stats.records_trimmed,
            "stream batches discarded to on-failure queue": p.publisher.stats.batches_discarded,
            "events re-published by the sweeper": sum(s.swept for s in p.sweeps),
            "stream record redeliveries": redeliveries,
            "duplicates absorbed by the consumer": p.consumer.stats.messages_deleted - processed,
            "sweeper runs crashed": p.sweeper_crashes,
            "events dropped between bus and queue": len(dropped),
            "losses": len(lost),
            "copies redriven on day 13, none applied twice": len(redriven),
            "live changes applied mid-run": sum(p.live_changes.values()),
        }
    )


def run_schedule(schedule: Schedule) -> None:
    plan = FaultPlan(rates=schedule.rates, rnd=schedule.rnd)
    with pipeline(plan, stream_batch_size=schedule.stream_batch_size) as p:
        outcome = _write(schedule, p)
        _run(schedule, p)
        p.count_platform_faults()
        figures = _check(schedule, p, outcome)
    CAMPAIGN.add(figures, plan.fired)


#: Always run, whatever hypothesis draws: every fault at once, and a publisher
#: that crashes so often that the stream mapping exhausts its 10 retries and
#: discards batches to the on-failure queue (the sweeper then recovers them).
EVERY_FAULT = Schedule(
    orders=20,
    events_per_order=2,
    trimmed_orders=5,
    cancelled=2,
    poison_items=3,
    poison_messages=3,
    sweeper_overlaps=True,
    stream_batch_size=10,
    # Quarantine writes are few (poison and rejected entries only): fail them more often.
    rates={**dict.fromkeys(FAULT_KINDS, 10), "quarantine_write_fails": 40},
    consumer_failures=MAX_RECEIVE_COUNT,
    rnd=random.Random(6),
)
CRASHING_PUBLISHER = Schedule(
    orders=12,
    events_per_order=1,
    trimmed_orders=0,
    cancelled=0,
    poison_items=1,
    poison_messages=0,
    sweeper_overlaps=False,
    stream_batch_size=3,
    rates={"publisher_crash": 95},
    consumer_failures=1,
    rnd=random.Random(6),
)


def test_fault_campaign(reliability_profile: str) -> None:
    """Random fault schedules over the whole pipeline; the invariants hold after each."""

    @settings(settings.get_profile(reliability_profile))
    @given(schedules())
    @example(EVERY_FAULT)
    @example(CRASHING_PUBLISHER)
    def campaign(schedule: Schedule) -> None:
        run_schedule(schedule)

    campaign()
    assert CAMPAIGN.figures["losses"] == 0
    assert set(CAMPAIGN.faults) == set(FAULT_KINDS), "a fault kind was never injected"
    assert CAMPAIGN.figures["stream batches discarded to on-failure queue"] > 0
    assert CAMPAIGN.figures["events committed"] >= MIN_EVENTS[reliability_profile], (
        f"the {reliability_profile!r} campaign is too small: raise max_examples"
    )


def test_consumer_name_is_the_one_deployed() -> None:
    # The ledger and idempotency keys in the campaign are scoped by this name.
    assert CONSUMER == "orders-consumer"


def test_an_event_the_queue_refuses_after_put_events_fails_the_no_loss_invariant() -> None:
    # GIVEN queues shrunk outside the module (1 KiB, the SQS minimum) and an event
    # the bus accepts but neither the queue nor its DLQ can take
    schedule = Schedule(
        orders=1,
        events_per_order=1,
        trimmed_orders=0,
        cancelled=0,
        poison_items=0,
        poison_messages=0,
        sweeper_overlaps=False,
        stream_batch_size=10,
        rates={},
        consumer_failures=0,
        rnd=random.Random(1),
    )
    with pipeline(FaultPlan(rates={}, rnd=schedule.rnd), stream_batch_size=10) as p:
        for url in (p.queue_url, p.dlq_url):
            p.sqs.set_queue_attributes(QueueUrl=url, Attributes={"MaximumMessageSize": "1024"})
        outcome = _write(schedule, p)
        writer = OutboxWriter(TABLE, p.dynamodb, source=SOURCE)
        entity = {"PK": "ORDER#big", "SK": "META"}
        big = writer.new_event(entity, "OrderPlaced", {"blob": "x" * 2048})
        writer.write(entity, big)
        outcome.committed[big.id] = outbox_sk(big.id)

        # WHEN it is published (PutEvents succeeds: the publisher is not wedged)
        _run(schedule, p)

        # THEN the seam counted the drop and the campaign's no-loss invariant fails
        assert [parse_body(u.body).id for u in p.seams.dropped] == [big.id]
        assert p.unquarantined_sort_keys() == set(), "the outbox item was deleted"
        with pytest.raises(AssertionError, match=r"1 committed event\(s\) lost.*1 dropped"):
            _check(schedule, p, outcome)
