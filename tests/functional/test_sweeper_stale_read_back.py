"""Breaker finding: the sweeper's eventually consistent read-back (issue 28) and quarantine.

docs/decisions.md ("The sweeper's read-back") argues a stale read can only
cost a duplicate or a skip, because "a quarantined item is planned or rejected
as poison again and its quarantine write is idempotent". That holds for poison
the publisher finds by itself (the envelope, the sizes, the sink's rules: the
same item plans the same way). It does not hold for an item quarantined on the
sink's answer (a per-entry MalformedDetail/InvalidArgument, an SNS
InvalidParameter): re-sent, the entry may go through (a transient answer, or a
live switch of ``publish_to``), and the sweeper's delete after publishing is
an unconditional ``BatchWriteItem`` delete. ``pending_index.is_pending`` says
"a quarantined item is never re-published".

Reproduction: an old item is quarantined by the stream publisher on a per-entry
MalformedDetail; the index (always eventually consistent) and an eventually
consistent ``BatchGetItem`` still answer the item as it was before the
quarantine write; the bus takes the entry this time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dynamodb_outbox.outbox_item import pending_shard
from tests.functional.outbox_helpers import (
    CountingDynamoDB,
    RecordingEvents,
    assert_quarantined,
    write_outbox,
)
from tests.functional.test_sweeper import OLD, bus_sink, key_of, run_stream, run_sweep

if TYPE_CHECKING:
    from tests.functional.conftest import EventBus, OutboxTable


@dataclass
class StaleReads(CountingDynamoDB):
    """An eventually consistent ``BatchGetItem`` answers ``stale_items`` (by sort key)."""

    stale_items: dict[str, dict[str, Any]] = field(default_factory=dict)

    def batch_get_item(self, **kwargs: Any) -> dict[str, Any]:
        response = super().batch_get_item(**kwargs)
        ((table, request),) = kwargs["RequestItems"].items()
        if request.get("ConsistentRead"):
            return response
        served = {item["SK"]["S"]: item for item in response["Responses"][table]}
        for key in request["Keys"]:
            if key["SK"]["S"] in self.stale_items:
                served[key["SK"]["S"]] = self.stale_items[key["SK"]["S"]]
        return {**response, "Responses": {table: list(served.values())}}


def test_a_stale_read_back_never_republishes_a_quarantined_item_nor_deletes_its_record(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN an old pending item, as the index and a replica still show it
    outbox = write_outbox(outbox_table, 1, made_at=OLD)
    sk, event_id = outbox.sk(0), outbox.ids[0]
    before = outbox_table.get(key_of(sk))
    assert before is not None
    shard = pending_shard(event_id)
    stale_index = {
        shard: [{"PK": before["PK"], "SK": before["SK"], "outbox_pending_shard": {"S": shard}}]
    }
    # AND the stream publisher quarantined it on the bus's answer (once)
    events = RecordingEvents(
        event_bus.client, entry_errors={event_id: "MalformedDetail"}, error_times={event_id: 1}
    )
    run_stream(outbox.records, outbox_table, bus_sink(event_bus, events))
    assert_quarantined(outbox_table, sk, "MalformedDetail")
    quarantined = outbox_table.get(key_of(sk))

    # WHEN the sweeper runs while its reads are still stale
    dynamodb = StaleReads(
        outbox_table.client, stale_query_items=stale_index, stale_items={sk: before}
    )
    run_sweep(outbox_table, bus_sink(event_bus, events), dynamodb=dynamodb)

    # THEN the quarantined event is not sent, and its quarantine record stays
    # (today: sent, and the record deleted by the sweeper's delete after publishing)
    assert (event_bus.received_ids(), outbox_table.get(key_of(sk))) == ([], quarantined)


def test_a_consistent_read_back_leaves_the_quarantined_item_alone(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # The same, read consistently (as before issue 28): the reference behaviour.
    outbox = write_outbox(outbox_table, 1, made_at=OLD)
    sk, event_id = outbox.sk(0), outbox.ids[0]
    before = outbox_table.get(key_of(sk))
    assert before is not None
    shard = pending_shard(event_id)
    stale_index = {
        shard: [{"PK": before["PK"], "SK": before["SK"], "outbox_pending_shard": {"S": shard}}]
    }
    events = RecordingEvents(
        event_bus.client, entry_errors={event_id: "MalformedDetail"}, error_times={event_id: 1}
    )
    run_stream(outbox.records, outbox_table, bus_sink(event_bus, events))
    quarantined = outbox_table.get(key_of(sk))

    # a replica that has the quarantine write: what a consistent read returns
    dynamodb = StaleReads(outbox_table.client, stale_query_items=stale_index)
    run_sweep(outbox_table, bus_sink(event_bus, events), dynamodb=dynamodb)

    assert event_bus.received_ids() == []
    assert outbox_table.get(key_of(sk)) == quarantined
