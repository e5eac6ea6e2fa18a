"""The stream publisher on the ordered path leaves an event behind a lower pending sequence.

Stream records of two outbox items are ordered by nothing AWS documents (per
item only; a partition split, a batch the mapping gave up on, one
transaction's records interleaved). So an event whose subject has a lower
``sequence`` still pending, and not earlier in the batch, is neither sent,
deleted nor failed: it stays pending and the sweeper sends it after the lower
one (docs/decisions.md, "What "in order per subject" means on the ordered path").
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from dynamodb_outbox.envelope import Envelope, outbox_item
from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies, PublishResult
from dynamodb_outbox.sinks import EventBridgeSink, SnsSink
from dynamodb_outbox.sweeper import sweep
from tests.factories import make_envelope, outbox_stream_record, sequence_numbers
from tests.functional.outbox_helpers import FIXED_NOW, PK, RecordingEvents, ulid_at
from tests.functional.test_settle_requests_match_policy import _record_requests

if TYPE_CHECKING:
    from tests.functional.conftest import EventBus, OutboxTable, SnsTopic

OLD = FIXED_NOW - timedelta(minutes=10)


def committed(
    table: OutboxTable, event_type: str, sequence: int | None, made_at: Any = OLD
) -> Envelope:
    envelope = make_envelope(
        type=event_type, subject=PK, id=ulid_at(made_at), data={}, sequence=sequence
    )
    table.put(outbox_item(PK, envelope))
    return envelope


def records(*envelopes: Envelope) -> list[dict[str, Any]]:
    seqs = sequence_numbers()
    return [outbox_stream_record(envelope, PK, next(seqs)) for envelope in envelopes]


def publish(table: OutboxTable, topic: SnsTopic, batch: list[dict[str, Any]]) -> PublishResult:
    return publish_stream_batch(
        batch,  # type: ignore[arg-type]
        PublishDependencies(
            sink=SnsSink(topic.client, topic.arn),
            table_name=table.name,
            dynamodb_client=table.client,
            sleep=lambda _: None,
            clock=lambda: FIXED_NOW,
        ),
    )


def delivered_types(topic: SnsTopic) -> list[str]:
    return [json.loads(message.body)["type"] for message in topic.received()]


def test_an_event_whose_lower_sequence_was_left_behind_waits_for_the_sweeper(
    outbox_table: OutboxTable, sns_fifo_topic: SnsTopic
) -> None:
    # GIVEN OrderCreated (1) pending: its stream batch was given up on; then
    # OrderPaid (2) comes down the stream
    created = committed(outbox_table, "OrderCreated", 1)
    paid = committed(outbox_table, "OrderPaid", 2, OLD + timedelta(seconds=1))

    result = publish(outbox_table, sns_fifo_topic, records(paid))

    # THEN OrderPaid is not sent, not failed, and stays pending
    assert delivered_types(sns_fifo_topic) == []
    assert result.response() == {"batchItemFailures": []}
    assert (result.deferred, result.published) == (1, 0)
    assert outbox_table.pending_sort_keys() == {created.outbox_sk, paid.outbox_sk}

    # AND the sweeper sends both, in sequence order
    sweep(
        PublishDependencies(
            SnsSink(sns_fifo_topic.client, sns_fifo_topic.arn),
            outbox_table.name,
            outbox_table.client,
            sleep=lambda _: None,
        ),
        index_name="outbox-pending",
        now=FIXED_NOW,
    )
    assert delivered_types(sns_fifo_topic) == ["OrderCreated", "OrderPaid"]


def test_records_of_one_subject_out_of_sequence_in_a_batch_send_the_lower_one_only(
    outbox_table: OutboxTable, sns_fifo_topic: SnsTopic
) -> None:
    # One transaction's records may come in any order: 2 before 1
    created = committed(outbox_table, "OrderCreated", 1)
    paid = committed(outbox_table, "OrderPaid", 2)

    result = publish(outbox_table, sns_fifo_topic, records(paid, created))

    assert delivered_types(sns_fifo_topic) == ["OrderCreated"]
    assert result.deferred == 1
    assert outbox_table.pending_sort_keys() == {paid.outbox_sk}


def test_a_subjects_events_in_sequence_order_go_out_together_for_one_query(
    outbox_table: OutboxTable, sns_fifo_topic: SnsTopic
) -> None:
    created = committed(outbox_table, "OrderCreated", 1)
    paid = committed(outbox_table, "OrderPaid", 2)
    queries = _record_requests(outbox_table.client, "Query")

    result = publish(outbox_table, sns_fifo_topic, records(created, paid))

    assert delivered_types(sns_fifo_topic) == ["OrderCreated", "OrderPaid"]
    assert (result.deferred, result.published) == (0, 2)
    assert len(queries) == 1


def test_unsequenced_events_and_unordered_sinks_read_nothing_more(
    outbox_table: OutboxTable, sns_fifo_topic: SnsTopic, event_bus: EventBus
) -> None:
    plain = committed(outbox_table, "OrderCreated", None)
    queries = _record_requests(outbox_table.client, "Query")

    assert publish(outbox_table, sns_fifo_topic, records(plain)).published == 1
    sequenced = committed(outbox_table, "OrderPaid", 2)
    committed(outbox_table, "OrderCreated", 1)
    result = publish_stream_batch(
        records(sequenced),  # type: ignore[arg-type]
        PublishDependencies(
            sink=EventBridgeSink(RecordingEvents(event_bus.client), event_bus.name),
            table_name=outbox_table.name,
            dynamodb_client=outbox_table.client,
            sleep=lambda _: None,
        ),
    )

    assert (result.published, result.deferred) == (1, 0)  # EventBridge keeps no order
    assert queries == []
