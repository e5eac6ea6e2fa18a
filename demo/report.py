"""The figures of a run, the invariants checked on them, and the report printed at the end.

Invariants (any failure makes the demo exit non-zero):

* **no event lost** — every committed order's event was processed by every
  consumer (its ledger entry exists), or is accounted for with a reason
  (quarantined in the table, or in the consumer's DLQ);
* **none without its order** — every event a consumer processed is about an
  order that exists in the table;
* **each processed once** — every ledger entry has ``times_processed == 1``;
* **nothing left pending** — no outbox item remains but the quarantined poison;
* **nothing left in flight** — the consumer queues are empty and no stream
  batch was given up on (on-failure queue empty);
* **order per subject held** (ordered path only) — every consumer handled each
  order's events in the order they were written, duplicates dropped.

Each injected fault must also have happened and been absorbed; a fault that
did not fire proves nothing, so that fails the run too.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from demo.console import Timing
from demo.faults import POISON_MESSAGE_BODY, PublisherCrash, PutEventsThrottle
from demo.metering import CallMeter, PutEventsTap
from demo.observe import EndState
from demo.workload import Order
from dynamodb_outbox.local import SqsMapping, StreamMapping
from dynamodb_outbox.outbox_item import STATUS_QUARANTINED

OK, FAIL = "ok  ", "FAIL"


@dataclass(frozen=True)
class Check:
    name: str
    held: bool
    detail: str


@dataclass(frozen=True)
class ConsumerRun:
    """What the runtime and the consumer function said about one consumer."""

    key: str
    function_name: str
    mapping: SqsMapping
    max_receive_count: int | None
    duplicate_metric: int
    processed_metric: int
    failed_metric: int


@dataclass(frozen=True)
class RunFacts:
    """Everything the report is computed from."""

    orders: Sequence[Order]
    poison_outbox_sk: str
    poison_message_id: str | None
    publisher: StreamMapping
    consumers: Sequence[ConsumerRun]
    put_events: PutEventsTap
    crash: PublisherCrash
    throttle: PutEventsThrottle
    quarantined_metric: int
    published_metric: int
    meter: CallMeter
    end: EndState
    missing: Sequence[str] = ()
    #: the ordered path (publish_to = "sns_fifo"): order per subject is checked
    ordered: bool = False
    #: bodies the bus or topic accepted and no queue or DLQ took (aws_seams)
    dropped: Sequence[str] = ()


@dataclass
class Report:
    facts: RunFacts
    #: (key, label, value, note), in print order.
    figures: list[tuple[str, str, int, str]] = field(default_factory=list)
    invariants: list[Check] = field(default_factory=list)
    faults: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(check.held for check in self.invariants + self.faults)

    def figure(self, key: str, label: str, value: int, note: str = "") -> None:
        self.figures.append((key, label, value, note))

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (``--report-json``)."""
        return {
            "ok": self.ok,
            "figures": {key: value for key, _, value, _ in self.figures},
            "faults": {c.name: {"held": c.held, "detail": c.detail} for c in self.faults},
            "invariants": {c.name: {"held": c.held, "detail": c.detail} for c in self.invariants},
            "api_calls": {
                component: dict(operations)
                for component, operations in self.facts.meter.by_component().items()
            },
        }

    # ------------------------------------------------------------------ render

    def render(self, timings: Sequence[Timing] = ()) -> str:
        lines = ["", "REPORT", ""]
        width = max(len(label) for _, label, _, _ in self.figures)
        for _, label, value, note in self.figures:
            lines.append(f"  {label.ljust(width)}  {value:6d}  {note}".rstrip())
        lines += ["", "Faults injected", ""]
        lines += [f"  [{OK if c.held else FAIL}] {c.name}: {c.detail}" for c in self.faults]
        lines += ["", "Invariants", ""]
        lines += [f"  [{OK if c.held else FAIL}] {c.name}: {c.detail}" for c in self.invariants]
        lines += ["", *self._calls_table()]
        if timings:
            lines += ["", "Timings", ""]
            lines += [f"  {t.title.ljust(40)} {t.seconds:7.1f} s" for t in timings]
            lines.append(f"  {'total'.ljust(40)} {sum(t.seconds for t in timings):7.1f} s")
        verdict = (
            "every invariant held"
            if self.ok
            else "FAILED: " + "; ".join(c.name for c in self.invariants + self.faults if not c.held)
        )
        lines += ["", f"RESULT: {verdict}", ""]
        return "\n".join(lines)

    def _calls_table(self) -> list[str]:
        events = max(1, len(self.facts.orders))
        lines = [f"AWS API calls ({events} order events)", ""]
        lines.append(f"  {'component / operation'.ljust(52)} {'calls':>7} {'per event':>10}")
        for component, operations in self.facts.meter.by_component().items():
            total = sum(operations.values())
            lines.append(f"  {component.ljust(52)} {total:7d} {total / events:10.2f}")
            for operation, count in operations.most_common():
                lines.append(f"    {operation.ljust(50)} {count:7d} {count / events:10.2f}")
        return lines


# ---------------------------------------------------------------------- building


def build_report(facts: RunFacts) -> Report:
    report = Report(facts)
    _figures(report)
    _fault_checks(report)
    _invariants(report)
    return report


def _figures(report: Report) -> None:
    f = report.facts
    put = f.put_events
    publisher = f.publisher
    quarantined = [i for i in f.end.outbox_items if i.status == STATUS_QUARANTINED]
    crashed = sum(1 for i in publisher.invocations if i.error is not None)
    partial = sum(1 for i in publisher.invocations if i.outcome == "partial")
    api = "PublishBatch" if f.ordered else "PutEvents"
    events = sum(len(order.event_ids) for order in f.orders)
    report.figure(
        "orders_written",
        "orders written",
        len(f.orders),
        "entity + OrderCreated, then OrderConfirmed: two transactions each"
        if f.ordered
        else "entity + OrderCreated event, one transaction each",
    )
    report.figure(
        "outbox_items_written",
        "outbox items written",
        events + 1,
        "incl. 1 poison item (raw PutItem)",
    )
    report.figure(
        "publisher_invocations",
        "publisher invocations",
        len(publisher.invocations),
        f"{crashed} crashed, {partial} checkpointed; {publisher.stats.bisections} bisections, "
        f"{publisher.stats.retries} retries",
    )
    report.figure(
        "events_published",
        "events published",
        put.accepted,
        f"{api} entries accepted (PublishedEvents metric: {f.published_metric}; a crashed "
        "invocation emits none)",
    )
    report.figure("events_published_distinct", "  distinct events", put.distinct)
    report.figure(
        "events_republished",
        "  published again",
        put.accepted - put.distinct,
        "duplicates the consumers must absorb",
    )
    refused = ", ".join(f"{code}" for code in sorted(put.refused)) or ""
    report.figure(
        "put_events_refused", f"{api} entries refused", sum(put.refused.values()), refused
    )
    for consumer, state in zip(f.consumers, f.end.consumers, strict=True):
        stats = consumer.mapping.stats
        tag = f" [{consumer.key}]"
        cross_check = stats.messages_deleted - len(state.ledger)
        report.figure(
            f"delivered.{consumer.key}",
            f"delivered to the consumer{tag}",
            stats.messages_delivered,
            f"messages in {stats.invocations} invocations: {stats.messages_deleted} done, "
            f"{stats.messages_failed} failed and returned to the queue "
            f"(FailedEvents metric: {consumer.failed_metric})",
        )
        report.figure(
            f"processed.{consumer.key}",
            "  processed",
            len(state.ledger),
            f"ledger entries of {state.consumer_name} "
            f"(ProcessedEvents metric: {consumer.processed_metric})",
        )
        report.figure(
            f"duplicates_absorbed.{consumer.key}",
            "  duplicates absorbed",
            consumer.duplicate_metric,
            f"by idempotency (DuplicateEvents metric; done - processed = {cross_check})",
        )
        report.figure(
            f"consumer_dlq.{consumer.key}",
            "  in the consumer DLQ",
            state.dlq_depth,
            _dlq_note(state.dlq),
        )
    reasons = sorted({textwrap.shorten(item.reason or "", 64) for item in quarantined})
    report.figure(
        "quarantined",
        "quarantined outbox items",
        len(quarantined),
        "; ".join(reasons) + f" (QuarantinedEvents metric: {f.quarantined_metric})",
    )
    report.figure(
        "on_failure_queue",
        "publisher on-failure queue",
        f.end.on_failure_depth,
        "stream batches given up on",
    )


def _dlq_note(messages: Sequence[object]) -> str:
    poison = sum(1 for m in messages if getattr(m, "body", None) == POISON_MESSAGE_BODY)
    return f"{poison} of them the poison message" if messages else ""


def _fault_checks(report: Report) -> None:
    f = report.facts
    put = f.put_events
    duplicates_published = put.accepted - put.distinct
    absorbed = sum(c.duplicate_metric for c in f.consumers)
    report.faults.append(
        Check(
            f"1. publisher dies after {'PublishBatch' if f.ordered else 'PutEvents'}, before "
            "the delete",
            f.crash.fired and duplicates_published > 0 and (absorbed > 0 or not f.consumers),
            (
                f"crashed once; the batch was retried: {duplicates_published} events "
                f"published twice, {absorbed} duplicates absorbed by consumer idempotency"
            )
            if f.crash.fired
            else "did not fire",
        )
    )
    accepted = set(put.accepted_ids)
    never_published = [i for i in f.throttle.throttled_ids if i not in accepted]
    report.faults.append(
        Check(
            f"2. {'PublishBatch' if f.ordered else 'PutEvents'} entries throttled",
            f.throttle.fired and not never_published,
            (
                f"{f.throttle.throttled} of {f.throttle.entries_in_call} entries of one call "
                "answered as throttled; the publisher retried just those (backoff, within "
                "the invocation's time, checkpointing only what still failed) and "
                + (
                    "all of them were published on the retry"
                    if not never_published
                    else f"{len(never_published)} were never published"
                )
            )
            if f.throttle.fired
            else "did not fire",
        )
    )
    poison = [i for i in f.end.outbox_items if i.sk == f.poison_outbox_sk]
    quarantined = bool(poison) and poison[0].status == STATUS_QUARANTINED
    poison_id = f.poison_outbox_sk.removeprefix("OUTBOX#")
    report.faults.append(
        Check(
            "3. poison outbox item (envelope is not valid JSON)",
            quarantined and poison_id not in set(put.accepted_ids),
            f"quarantined in the table, never published ({poison[0].reason})"
            if quarantined
            else f"not quarantined: {poison[0] if poison else 'item gone'}",
        )
    )
    for consumer, state in zip(f.consumers, f.end.consumers, strict=True):
        in_dlq = [
            m
            for m in state.dlq
            if m.body == POISON_MESSAGE_BODY and f.poison_message_id in (None, m.message_id)
        ]
        expected = consumer.max_receive_count
        report.faults.append(
            Check(
                f"4. poison consumer message [{consumer.key}]",
                len(in_dlq) == 1
                and state.dlq_depth == 1
                and (expected is None or in_dlq[0].receive_count == expected),
                f"failed alone, moved to the DLQ after {in_dlq[0].receive_count} receives "
                f"(maxReceiveCount {expected}); the DLQ holds nothing else"
                if in_dlq and state.dlq_depth == 1
                else f"in the DLQ with {state.dlq_depth - 1} other message(s)"
                if in_dlq
                else "not in the DLQ",
            )
        )
    if not f.consumers:
        report.faults.append(Check("4. poison consumer message", False, "no consumer deployed"))


def _invariants(report: Report) -> None:
    f = report.facts
    end = f.end
    if f.missing:
        report.invariants.append(Check("deployment complete", False, "; ".join(f.missing)))
    quarantined = {i.event_id: i for i in end.outbox_items if i.status == STATUS_QUARANTINED}
    lost: list[str] = []
    accounted: list[str] = []
    for consumer in end.consumers:
        processed = {entry["event_id"] for entry in consumer.ledger}
        in_dlq = {m.event_id for m in consumer.dlq}
        for order in f.orders:
            for event_id in order.event_ids:
                if event_id in processed:
                    continue
                if event_id in quarantined:
                    accounted.append(f"{order.pk}: quarantined ({quarantined[event_id].reason})")
                elif event_id in in_dlq:
                    accounted.append(f"{order.pk}: in the DLQ of {consumer.key}")
                else:
                    lost.append(f"{order.pk} ({event_id}) by {consumer.key}")
    if not end.consumers:
        lost.append("no consumer deployed: delivery could not be checked")
    if f.dropped:  # accepted by PutEvents/Publish, refused by the queue and its DLQ
        lost.append(f"{len(f.dropped)} dropped between the bus or topic and a queue")
    report.invariants.append(
        Check(
            "no event lost",
            not lost,
            f"all {sum(len(o.event_ids) for o in f.orders)} order events processed"
            f"{_accounted(accounted)}"
            if not lost
            else f"{len(lost)} lost: {', '.join(lost[:5])}",
        )
    )
    orphans = [
        entry["subject"]
        for consumer in end.consumers
        for entry in consumer.ledger
        if entry["subject"] not in end.entity_pks
    ]
    processed_total = sum(len(c.ledger) for c in end.consumers)
    report.invariants.append(
        Check(
            "none without its order",
            not orphans and bool(end.consumers),
            "no consumer deployed"
            if not end.consumers
            else f"each of the {processed_total} processed events is about an existing order"
            if not orphans
            else f"{len(orphans)} events without their order: {', '.join(orphans[:5])}",
        )
    )
    repeated = [
        f"{entry['event_id']} x{entry['times_processed']}"
        for consumer in end.consumers
        for entry in consumer.ledger
        if entry["times_processed"] != 1
    ]
    report.invariants.append(
        Check(
            "each processed once",
            not repeated and bool(end.consumers),
            "no consumer deployed"
            if not end.consumers
            else "times_processed == 1 on every ledger entry"
            if not repeated
            else f"{len(repeated)} processed more than once: {', '.join(repeated[:5])}",
        )
    )
    leftovers = [i for i in end.outbox_items if i.sk != f.poison_outbox_sk]
    poison_left = [i for i in end.outbox_items if i.sk == f.poison_outbox_sk]
    report.invariants.append(
        Check(
            "nothing left pending",
            not leftovers and all(i.status == STATUS_QUARANTINED for i in poison_left),
            "no outbox item left but the quarantined poison"
            if not leftovers
            else f"{len(leftovers)} outbox items left: "
            + ", ".join(f"{i.pk}/{i.sk} ({i.status})" for i in leftovers[:5]),
        )
    )
    in_queues = {c.key: c.queue_depth for c in end.consumers if c.queue_depth}
    report.invariants.append(
        Check(
            "nothing left in flight",
            not in_queues and end.on_failure_depth == 0,
            "consumer queues empty, no stream batch given up on"
            if not in_queues and end.on_failure_depth == 0
            else f"consumer queues {in_queues}, on-failure queue {end.on_failure_depth}",
        )
    )

    if f.ordered:
        report.invariants.append(_order_per_subject(f))


def handled_in_order(mapping: SqsMapping) -> list[tuple[str, str]]:
    """(subject, event id) of every message the consumer handled, in handling order.

    Read from the runtime's invocations: a message counts once its invocation
    answered without listing it (a whole-batch failure handled nothing).
    """
    handled: list[tuple[str, str]] = []
    for invocation in mapping.invocations:
        if invocation.outcome == "failure":
            continue
        failed = set(invocation.failed_ids)
        for record in invocation.event["Records"]:
            if record["messageId"] in failed:
                continue
            try:
                envelope = json.loads(record["body"])
                handled.append((str(envelope["subject"]), str(envelope["id"])))
            except (KeyError, TypeError, ValueError):
                continue  # not an event (the poison message)
    return handled


def _order_per_subject(f: RunFacts) -> Check:
    expected = {order.pk: list(order.event_ids) for order in f.orders}
    broken: list[str] = []
    for consumer in f.consumers:
        seen: dict[str, list[str]] = {}
        known: set[str] = set()
        for subject, event_id in handled_in_order(consumer.mapping):
            if event_id not in known:
                known.add(event_id)
                seen.setdefault(subject, []).append(event_id)
        broken += [
            f"{pk} at {consumer.key}"
            for pk, ids in expected.items()
            if [i for i in seen.get(pk, []) if i in ids] != [i for i in ids if i in known]
        ]
    subjects = len(expected)
    return Check(
        "order per subject held",
        not broken and bool(f.consumers),
        "no consumer deployed"
        if not f.consumers
        else f"each consumer handled the events of each of the {subjects} orders in write order "
        "(duplicates dropped)"
        if not broken
        else f"{len(broken)} out of order: {', '.join(broken[:5])}",
    )


def _accounted(accounted: Sequence[str]) -> str:
    return f"; {len(accounted)} accounted for: {', '.join(accounted[:3])}" if accounted else ""
