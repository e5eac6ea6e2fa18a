"""Conflicts on a global table: no interleaving across two regions loses an event.

An outbox item is written once (in its region), then only: quarantined (an
UpdateItem, conditional on the item existing), released (an UpdateItem,
conditional on it being quarantined), and deleted after its event was
published (by its region's publisher or sweeper, or by another region
adopting it). Replication ships whole items and resolves concurrent writes by
last writer wins, so each replica ends on one of the states some region
wrote. Every such state is safe: deleted only after a publication; pending
with its region's shard (a sweeper publishes it); or quarantined without a
shard (kept and alarmed, released by an operator).

Each operation below runs the package's own code against the replica of its
region. Every order of the four operations is run twice: with replication cut
between the two regions until all four are done (every write conflicts), and
with replication settling after each (no conflict at all).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import boto3
import pytest

from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.local import LocalRuntime, VirtualClock
from dynamodb_outbox.local.replication import GlobalTableReplication
from dynamodb_outbox.ops._context import Context
from dynamodb_outbox.ops.release import release_item
from dynamodb_outbox.outbox_item import (
    ATTR_PENDING_SHARD,
    ATTR_STATUS,
    STATUS_PENDING,
    STATUS_QUARANTINED,
    outbox_sk,
)
from dynamodb_outbox.pending_index import DEFAULT_PENDING_INDEX
from dynamodb_outbox.publishing import OutboxCandidate, PublishDependencies, publish_outbox_items
from dynamodb_outbox.regions import RegionScope, region_of
from dynamodb_outbox.sinks import EVENTBRIDGE_RULES, EntryResult, OutboundEvent
from dynamodb_outbox.sweeper import sweep
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from dynamodb_outbox.writer import OutboxWriter
from tests.support.moto_tables import create_outbox_table

HOME, OTHER = "us-east-1", "eu-west-1"
TABLE = "orders"
OPERATIONS = ("quarantine@home", "release@home", "sweep@home", "adopt@other")


class Sink:
    """Accepts every event (counting it), or refuses every one as poison."""

    rules = EVENTBRIDGE_RULES

    def __init__(self, published: list[str], poison: bool = False) -> None:
        self.published = published
        self.poison = poison

    def send(self, events: Sequence[OutboundEvent]) -> list[EntryResult]:
        if self.poison:
            return [EntryResult("MalformedDetail", "refused") for _ in events]
        self.published.extend(event.envelope.id for event in events)
        return [EntryResult() for _ in events]


class World:
    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.sessions = {r: boto3.Session(region_name=r) for r in (HOME, OTHER)}
        self.dynamodb = {r: s.client("dynamodb") for r, s in self.sessions.items()}
        for client in self.dynamodb.values():
            create_outbox_table(client, TABLE, stream="NEW_AND_OLD_IMAGES")
        self.replication = GlobalTableReplication(
            TABLE,
            {r: (self.dynamodb[r], s.client("dynamodbstreams")) for r, s in self.sessions.items()},
            clock,
            delay_seconds=0.5,
        )
        self.runtime = LocalRuntime(clock)
        self.runtime.add(self.replication)
        self.published: list[str] = []
        self.writer = OutboxWriter(TABLE, self.dynamodb[HOME], region=HOME)

    def deps(self, region: str, poison: bool = False) -> PublishDependencies[Any]:
        return PublishDependencies(
            Sink(self.published, poison),
            TABLE,
            self.dynamodb[region],
            sleep=lambda _: None,
            table_keys=DEFAULT_TABLE_KEYS,
        )

    def item(self, region: str, key: dict[str, Any]) -> dict[str, Any] | None:
        found: dict[str, Any] | None = (
            self.dynamodb[region]
            .get_item(TableName=TABLE, Key=key, ConsistentRead=True)
            .get("Item")
        )
        return found

    def settle(self) -> None:
        self.clock.advance(1)
        self.runtime.drain()

    def sweep(self, region: str) -> None:
        sweep(
            self.deps(region),
            min_age_seconds=0,
            now=self.clock.now_datetime() + timedelta(days=1),
            region_scope=RegionScope(HOME),  # home's own sweeper, or another region adopting
        )


def _operations(
    world: World, key: dict[str, Any], written: dict[str, Any]
) -> dict[str, Callable[[], None]]:
    def quarantine() -> None:
        # The stream publisher handles the INSERT (its image, whatever the item is now)
        # and the sink refuses it: the quarantine UpdateItem, conditional on the item.
        publish_outbox_items(
            [OutboxCandidate(key=key, item=written, position=0, checkpoint="1")],
            world.deps(HOME, poison=True),
        )

    def release() -> None:
        item = world.item(HOME, key)
        if item is not None and item[ATTR_STATUS]["S"] == STATUS_QUARANTINED:
            ctx = Context(
                table=TABLE,
                region=HOME,
                dry_run=False,
                pending_index=DEFAULT_PENDING_INDEX,
                pending_shards=8,
                make_client=world.sessions[HOME].client,
                now=world.clock.now_datetime(),
                table_keys=DEFAULT_TABLE_KEYS,
            )
            release_item(ctx, item)

    return {
        "quarantine@home": quarantine,
        "release@home": release,
        "sweep@home": lambda: world.sweep(HOME),
        "adopt@other": lambda: world.sweep(OTHER),
    }


@pytest.fixture
def world(aws: None, clock: VirtualClock) -> World:
    return World(clock)


@pytest.mark.parametrize("first", OPERATIONS)
@pytest.mark.parametrize("conflicting", [True, False], ids=["cut-off", "settled"])
def test_no_interleaving_of_quarantine_release_delete_and_adoption_loses_an_event(
    world: World, conflicting: bool, first: str
) -> None:
    """The six orders starting with ``first`` (the four parameters cover all 24)."""
    orders = [
        (first, *rest) for rest in itertools.permutations(op for op in OPERATIONS if op != first)
    ]
    for number, order in enumerate(orders):
        pk = f"ORDER#{number}"
        event: Envelope = world.writer.new_event(pk, "OrderPlaced", {"n": number}, source="s")
        world.writer.write({"PK": pk, "SK": "ORDER"}, [event])
        key = {"PK": {"S": pk}, "SK": {"S": outbox_sk(event.id)}}
        written = world.item(HOME, key)
        assert written is not None
        world.settle()  # replicated to OTHER before anything else happens
        operations = _operations(world, key, written)

        if conflicting:
            world.replication.cut_off(OTHER)
        for name in order:
            operations[name]()
            world.clock.advance(1)  # each write later than the one before: LWW has an order
            if not conflicting:
                world.settle()
        world.replication.restore(OTHER)
        world.settle()

        # THEN both replicas hold the same state, and it is a safe one
        states = {region: world.item(region, key) for region in (HOME, OTHER)}
        assert states[HOME] == states[OTHER], order
        final = states[HOME]
        if final is None:
            assert event.id in world.published, f"{order}: deleted, never published"
        elif final[ATTR_STATUS]["S"] == STATUS_PENDING:
            assert region_of(final) == HOME, order
            assert final[ATTR_PENDING_SHARD]["S"].startswith(f"{HOME}#"), order
            world.sweep(HOME)  # its region's next sweep publishes it
            assert event.id in world.published, order
        else:
            assert final[ATTR_STATUS]["S"] == STATUS_QUARANTINED, order
            assert ATTR_PENDING_SHARD not in final, order  # kept, alarmed, never swept
