"""Consumers across regions: one consumer receives every region's events, each taking effect once.

As multi_region_forwarding.tf deploys it: each region's bus has a rule taking
the events put there (its own region) whose target is the other region's outbox
bus (cross-Region bus targets); the consuming region's consumer accepts the
forwarding region (OUTBOX_CONSUMER_FORWARDED_FROM_REGIONS). moto serves both
regions, forwarding as EventBridge does (dynamodb_outbox.local.moto_events.
forward_events_as_aws). Idempotency is the consumer's own, in its region: every
copy of an event, whichever region publishes it (its own, an adopter, the lost
region on its return), reaches that one region's queue, so one idempotency
table absorbs them all (docs/multi-region.md, "Consumers across regions").
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Iterator

import pytest

from demo.multi_region import _consumer
from demo.two_regions import (
    EAST,
    TABLE,
    WEST,
    Region,
    make_region,
    publisher_mapping,
    replication_between,
)
from dynamodb_outbox.local import LocalRuntime, VirtualClock, toolkit_follows
from dynamodb_outbox.ops.cli import main as outbox_ops
from dynamodb_outbox.regions import RegionScope
from dynamodb_outbox.sender_checks import ExpectedSender

ACCOUNT = "123456789012"  # moto's


@pytest.fixture
def regions(aws: None, clock: VirtualClock) -> Iterator[dict[str, Region]]:
    with toolkit_follows(clock):
        yield {name: make_region(name) for name in (EAST, WEST)}


def _bus_arn(region: Region) -> str:
    return str(region.client("events").describe_event_bus(Name=region.bus)["Arn"])


def _forward(sender: Region, receiver: Region) -> None:
    """multi_region_forwarding.tf's rule and target on ``sender``'s bus."""
    events = sender.client("events")
    events.put_rule(
        Name="orders-forward",
        EventBusName=sender.bus,
        EventPattern=json.dumps({"account": [ACCOUNT], "region": [sender.name]}),
    )
    events.put_targets(
        Rule="orders-forward",
        EventBusName=sender.bus,
        Targets=[
            {
                "Id": f"to-{receiver.name}",
                "Arn": _bus_arn(receiver),
                "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/{sender.name}-orders-forwarder",
            }
        ],
    )


def test_a_consumer_in_one_region_takes_every_regions_events_once_through_loss_and_return(
    regions: dict[str, Region], clock: VirtualClock
) -> None:
    east, west = regions[EAST], regions[WEST]
    replication = replication_between(regions, clock, delay_seconds=1.0)
    publishers = {
        name: publisher_mapping(r, clock, RegionScope(name)) for name, r in regions.items()
    }
    # GIVEN both buses forwarding to each other, and billing consuming in west only
    _forward(east, west)
    _forward(west, east)
    billing = _consumer(west, clock, ExpectedSender.eventbridge(_bus_arn(west), [EAST]))
    flow = LocalRuntime(clock)
    for part in (replication, *publishers.values(), billing.mapping):
        flow.add(part)

    # WHEN orders are written in both regions and everything runs
    written = {EAST: east.write_orders(5), WEST: west.write_orders(4)}
    flow.drain()

    # THEN west's consumer got every event once: its own region's and east's, forwarded;
    # none bounced back (the rule takes only events put in its own region)
    everything = written[EAST] + written[WEST]
    assert billing.deliveries == Counter(everything)
    assert billing.effects == Counter(everything)
    # (east's catch-all queue got east's events and west's forwarded ones, once each)
    assert Counter(east.drain_bus()) == Counter(everything)

    # WHEN east writes more, they replicate out, and east is lost before publishing them
    stranded = east.write_orders(3)
    clock.advance(2)
    replication.poll()
    replication.cut_off(EAST)
    # AND an operator in west adopts east's pending items
    clock.advance(600)
    out = io.StringIO()
    code = outbox_ops(
        ["--table", TABLE, "--json", "adopt", "--from-region", EAST, "--bus-name", west.bus],
        client_factory=west.client,
        stdout=out,
        stderr=io.StringIO(),
        now=clock.now_datetime,
    )
    assert code == 0, out.getvalue()
    west_only = LocalRuntime(clock).add(billing.mapping)
    west_only.drain()
    # AND east comes back: its publisher publishes them again, forwarded to west
    replication.restore(EAST)
    flow.drain()

    # THEN each stranded event reached west's consumer twice (adopted, then east's own
    # publication forwarded) and took effect once: one region's idempotency absorbs both
    assert {event_id: billing.deliveries[event_id] for event_id in stranded} == {
        event_id: 2 for event_id in stranded
    }
    assert billing.effects == Counter(everything + stranded)
    assert east.outbox_keys() == set() == west.outbox_keys()


def test_without_the_forwarding_region_configured_the_consumer_refuses_forwarded_events(
    regions: dict[str, Region], clock: VirtualClock
) -> None:
    east, west = regions[EAST], regions[WEST]
    _forward(east, west)
    billing = _consumer(west, clock, ExpectedSender.eventbridge(_bus_arn(west)))
    flow = LocalRuntime(clock)
    flow.add(publisher_mapping(east, clock, RegionScope(EAST)))
    flow.add(billing.mapping)

    written = east.write_orders(1)
    for _ in range(3):  # no DLQ here: the refused message would come back for ever
        flow.poll()
        clock.advance(1)

    # Delivered, refused (UntrustedSender: another region), never taking effect.
    assert set(billing.deliveries) == set(written)
    assert billing.effects == Counter()
