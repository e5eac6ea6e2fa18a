"""``make demo REGIONS=2``: one outbox in two regions of a global table, one region lost mid-run.

Runs in this process on moto (which serves both regions, but has no global
tables: :class:`~dynamodb_outbox.local.GlobalTableReplication` replicates
between the two regions' tables with a delay, last writer wins). Each region
has its writer (stamping its region), publisher mapping (its region's filters),
bus, and a ``billing`` consumer (the consumer toolkit, idempotency table of its
own) on an SQS queue that a rule on the bus feeds, as ``examples/multi-region``
deploys them.

Phases: orders are written in both regions while both publish; the second
region is cut off (replication to and from it stops, its functions stop) after
writing more orders that only partly replicated; the first region's operator
runs ``outbox-ops adopt``; the lost region returns, replication resumes and its
publisher wakes up. The report's invariants:

* no event lost: every order's event took effect at a consumer;
* each event took effect once at each consumer (duplicates delivered are
  absorbed by idempotency, and counted);
* nothing published by a region that did not write it, except the surviving
  region adopting the lost region's events.

Exit codes: 0 every invariant held; 1 one failed.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO
from unittest import mock

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from moto import mock_aws

from demo.two_regions import (
    EAST,
    WEST,
    Region,
    make_region,
    publisher_mapping,
    replication_between,
)
from dynamodb_outbox.consumer import OutboxConsumer
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.local import (
    LocalRuntime,
    SqsMapping,
    VirtualClock,
    mapping_config,
    stream_records_follow,
    toolkit_follows,
)
from dynamodb_outbox.ops.cli import main as outbox_ops
from dynamodb_outbox.publishing import PublishDependencies
from dynamodb_outbox.regions import RegionScope
from dynamodb_outbox.sender_checks import ExpectedSender
from dynamodb_outbox.sinks import EventBridgeSink
from dynamodb_outbox.sweeper import sweep
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from tests.support.moto_tables import create_idempotency_table

REPLICATION_DELAY_SECONDS = 1.0
SURVIVOR, LOST = EAST, WEST


@dataclass
class Consumer:
    """A region's billing consumer: the toolkit on an SQS mapping, and what took effect."""

    mapping: SqsMapping
    effects: Counter[str]
    deliveries: Counter[str]


def _consumer(
    region: Region, clock: VirtualClock, expected_sender: ExpectedSender | None = None
) -> Consumer:
    sqs, events = region.client("sqs"), region.client("events")
    table = create_idempotency_table(region.dynamodb, f"billing-idempotency-{region.name}")
    url = sqs.create_queue(QueueName="billing", Attributes={"VisibilityTimeout": "180"})
    arn = sqs.get_queue_attributes(QueueUrl=url["QueueUrl"], AttributeNames=["QueueArn"])
    queue_arn = arn["Attributes"]["QueueArn"]
    events.put_rule(Name="billing", EventBusName=region.bus, EventPattern='{"source":["orders"]}')
    events.put_targets(
        Rule="billing", EventBusName=region.bus, Targets=[{"Id": "q", "Arn": queue_arn}]
    )
    toolkit = OutboxConsumer(
        persistence_store=DynamoDBPersistenceLayer(table_name=table, boto3_client=region.dynamodb),
        name="billing",
        expected_sender=expected_sender,
    )
    effects: Counter[str] = Counter()
    deliveries: Counter[str] = Counter()

    @toolkit.handler
    def handler(envelope: Envelope) -> None:
        effects[envelope.id] += 1  # the effect: runs once per event id (idempotency)

    def counting(event: dict[str, Any], context: Any) -> Any:
        for record in event["Records"]:
            deliveries[json.loads(record["body"])["detail"]["id"]] += 1
        return handler(event, context)

    mapping = SqsMapping(
        mapping_config(queue_arn, report_batch_item_failures=True, batch_size=10),
        counting,
        sqs_client=sqs,
        clock=clock,
    )
    return Consumer(mapping, effects, deliveries)


@contextmanager
def _moto(clock: VirtualClock) -> Iterator[None]:
    env = {
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "AWS_ACCESS_KEY_ID": "demo",
        "AWS_SECRET_ACCESS_KEY": "demo",
        "AWS_DEFAULT_REGION": SURVIVOR,
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "LOG_LEVEL": "WARNING",
    }
    with mock.patch.dict(os.environ, env):
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
            os.environ.pop(name, None)
        with mock_aws(), stream_records_follow(clock), toolkit_follows(clock):
            yield


def run(orders: int, out: TextIO) -> dict[str, Any]:
    """The demo; returns its report (figures and invariants)."""
    clock = VirtualClock()
    with _moto(clock):
        return _run(orders, clock, out)


def _run(orders: int, clock: VirtualClock, out: TextIO) -> dict[str, Any]:
    regions = {name: make_region(name) for name in (EAST, WEST)}
    replication = replication_between(regions, clock, delay_seconds=REPLICATION_DELAY_SECONDS)
    publishers = {
        name: publisher_mapping(r, clock, RegionScope(name)) for name, r in regions.items()
    }
    consumers = {name: _consumer(r, clock) for name, r in regions.items()}
    written: dict[str, list[str]] = {EAST: [], WEST: []}

    def runtime(*names: str) -> LocalRuntime:
        flow = LocalRuntime(clock)
        flow.add(replication)
        for name in names:
            flow.add(publishers[name])
            flow.add(consumers[name].mapping)
        return flow

    both = runtime(EAST, WEST)
    each = max(1, orders // 4)
    out.write(f"phase 1: {each} orders in each region, both regions publishing\n")
    for _ in range(each):
        written[EAST] += regions[EAST].write_orders(1)
        written[WEST] += regions[WEST].write_orders(1)
        clock.advance(0.5)
        both.poll()
    both.drain()

    late = max(2, orders - 2 * each)
    out.write(f"phase 2: {LOST} writes {late} more orders and is lost before publishing them\n")
    written[LOST] += regions[LOST].write_orders(late - 1)
    clock.advance(REPLICATION_DELAY_SECONDS + 0.5)
    replication.poll()  # these replicate out...
    written[LOST] += regions[LOST].write_orders(1)
    replication.cut_off(LOST)  # ...the last one does not: it waits for the region's return
    survivor_only = runtime(SURVIVOR)
    survivor_only.drain()

    out.write(f"phase 3: an operator in {SURVIVOR} adopts {LOST}'s pending items\n")
    clock.advance(600)
    report_text = io.StringIO()
    code = outbox_ops(
        [
            "--table",
            "orders",
            "--json",
            "adopt",
            "--from-region",
            LOST,
            "--bus-name",
            regions[SURVIVOR].bus,
        ],
        client_factory=regions[SURVIVOR].client,
        stdout=report_text,
        stderr=io.StringIO(),
        now=clock.now_datetime,
    )
    adopted = json.loads(report_text.getvalue())["publish"]["published"] if code == 0 else -1
    survivor_only.drain()

    out.write(f"phase 4: {LOST} returns; replication resumes, its publisher wakes up\n")
    replication.restore(LOST)
    both.drain()
    clock.advance(600)
    for name, region in regions.items():  # each region's sweeper, for what is left
        sweep(
            PublishDependencies(
                EventBridgeSink(region.client("events"), region.bus),
                "orders",
                region.dynamodb,
                table_keys=DEFAULT_TABLE_KEYS,
            ),
            now=clock.now_datetime(),
            region_scope=RegionScope(name),
        )
    both.drain()

    return _report(regions, consumers, written, adopted)


def _report(
    regions: dict[str, Region],
    consumers: dict[str, Consumer],
    written: dict[str, list[str]],
    adopted: int,
) -> dict[str, Any]:
    writer_of = {event_id: name for name, ids in written.items() for event_id in ids}
    published = {name: Counter(r.drain_bus()) for name, r in regions.items()}
    foreign = {
        name: sorted(e for e in counts if writer_of[e] != name and writer_of[e] != LOST)
        for name, counts in published.items()
    }
    took_effect = set().union(*(c.effects for c in consumers.values()))
    invariants = {
        "no event lost": set(writer_of) <= took_effect,
        "each event took effect once at each consumer": all(
            n == 1 for c in consumers.values() for n in c.effects.values()
        ),
        "nothing published by a region that did not write it (but adoption)": not any(
            foreign.values()
        ),
        "no pending outbox item left": all(not r.outbox_keys() for r in regions.values()),
    }
    return {
        "orders": {name: len(ids) for name, ids in written.items()},
        "adopted by the survivor": adopted,
        "published": {name: sum(c.values()) for name, c in published.items()},
        "published by a region that did not write it": {
            name: sum(1 for e in c if writer_of[e] != name) for name, c in published.items()
        },
        "deliveries to consumers": {
            name: sum(c.deliveries.values()) for name, c in consumers.items()
        },
        # Adoption's duplicates: the survivor published them, then the returning region
        # (its stream still held them). Idempotency is per region (docs/multi-region.md).
        "events that took effect in both regions": len(
            set(consumers[EAST].effects) & set(consumers[WEST].effects)
        ),
        "duplicates absorbed by idempotency": {
            name: sum(c.deliveries.values()) - sum(c.effects.values())
            for name, c in consumers.items()
        },
        "invariants": invariants,
    }


def main(orders: int, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    report = run(orders, out)
    out.write(json.dumps(report, indent=2) + "\n")
    held = all(report["invariants"].values())
    out.write("every invariant held\n" if held else "AN INVARIANT FAILED\n")
    return 0 if held else 1
