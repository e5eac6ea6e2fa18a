"""The publisher on an SNS FIFO topic keeps each subject's events in write order, through failures.

A subject's later event never goes out before an earlier one that failed: it
is held until that one is published (or, when the invocation runs out of
retries, left for the checkpoint), and one call never carries two events of a
subject. A poison event is quarantined and its subject moves on (a gap;
docs/decisions.md, "Ordered path: a poison event leaves a gap").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies, PublishResult
from dynamodb_outbox.sinks import SnsSink
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from tests.functional.outbox_helpers import (
    FIXED_NOW,
    Outbox,
    RecordingSns,
    assert_quarantined,
    outbox_sort_keys,
    sns_event_id,
    write_outbox,
)

if TYPE_CHECKING:
    from tests.functional.conftest import OutboxTable, SnsTopic

THROTTLED = {"Code": "Throttling", "SenderFault": False}


class FlakySns(RecordingSns):
    """RecordingSns whose ``failures`` fail only ``times[event id]`` times, then go through."""

    def __init__(self, real: Any, *, failures: dict[str, dict[str, Any]], times: dict[str, int]):
        super().__init__(real, failures=dict(failures))
        self.times = dict(times)

    def publish_batch(self, **kwargs: Any) -> dict[str, Any]:
        response = super().publish_batch(**kwargs)
        for entry in kwargs["PublishBatchRequestEntries"]:
            event_id = sns_event_id(entry)
            if event_id in self.times:
                self.times[event_id] -= 1
                if self.times[event_id] <= 0:
                    self.failures.pop(event_id, None)
        return response


def publish(
    outbox: Outbox, table: OutboxTable, sns: RecordingSns, topic: SnsTopic
) -> PublishResult:
    return publish_stream_batch(
        outbox.records,  # type: ignore[arg-type]
        PublishDependencies(
            sink=SnsSink(sns, topic.arn),
            table_name=table.name,
            dynamodb_client=table.client,
            sleep=lambda _: None,
            clock=lambda: FIXED_NOW,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )


def delivered_per_subject(topic: SnsTopic) -> dict[str, list[str]]:
    per_subject: dict[str, list[str]] = {}
    for message in topic.received():
        per_subject.setdefault(str(message.group_id), []).append(message.event_id)
    return per_subject


def written_per_subject(outbox: Outbox) -> dict[str, list[str]]:
    per_subject: dict[str, list[str]] = {}
    for envelope in outbox.envelopes:
        per_subject.setdefault(envelope.subject, []).append(envelope.id)
    return per_subject


def test_a_later_event_of_a_subject_waits_until_its_earlier_failed_one_is_published(
    outbox_table: OutboxTable, sns_fifo_topic: SnsTopic
) -> None:
    # GIVEN A1 B1 A2 B2 A3, and A1 throttled on its first send
    outbox = write_outbox(outbox_table, 5, subjects=["ORDER#A", "ORDER#B"])
    sns = FlakySns(
        sns_fifo_topic.client, failures={outbox.ids[0]: THROTTLED}, times={outbox.ids[0]: 1}
    )

    result = publish(outbox, outbox_table, sns, sns_fifo_topic)

    # THEN everything is published within the invocation, each subject in write order
    assert result.response() == {"batchItemFailures": []}
    assert delivered_per_subject(sns_fifo_topic) == written_per_subject(outbox)
    assert outbox_sort_keys(outbox_table) == set()
    # AND no call carried two events of one subject, and A2 went out only after A1 did
    for call in sns.calls:
        groups = [entry["MessageGroupId"] for entry in call]
        assert len(groups) == len(set(groups)), call
    sent = sns.sent_ids()
    first_call_with = {
        event_id: min(n for n, ids in enumerate(sent) if event_id in ids) for event_id in outbox.ids
    }
    last_call_with_a1 = max(n for n, ids in enumerate(sent) if outbox.ids[0] in ids)
    assert first_call_with[outbox.ids[2]] > last_call_with_a1


def test_events_held_behind_a_failure_that_outlasts_the_retries_are_left_for_the_checkpoint(
    outbox_table: OutboxTable, sns_fifo_topic: SnsTopic
) -> None:
    # GIVEN A1 B1 A2 B2 A3, and A1 throttled on every send
    outbox = write_outbox(outbox_table, 5, subjects=["ORDER#A", "ORDER#B"])
    sns = RecordingSns(sns_fifo_topic.client, failures={outbox.ids[0]: THROTTLED})

    result = publish(outbox, outbox_table, sns, sns_fifo_topic)

    # THEN Lambda retries from A1, and A2 and A3 were never sent
    assert result.response() == {"batchItemFailures": [{"itemIdentifier": outbox.seq(0)}]}
    sent = {event_id for ids in sns.sent_ids() for event_id in ids}
    assert outbox.ids[2] not in sent
    assert outbox.ids[4] not in sent
    # AND subject B, independent, went out and was deleted; all of A is still pending
    assert delivered_per_subject(sns_fifo_topic) == {"ORDER#B": [outbox.ids[1], outbox.ids[3]]}
    assert outbox_sort_keys(outbox_table) == {outbox.sk(0), outbox.sk(2), outbox.sk(4)}


def test_a_poison_event_is_quarantined_and_its_subject_moves_on_leaving_a_gap(
    outbox_table: OutboxTable, sns_fifo_topic: SnsTopic
) -> None:
    # GIVEN A1 A2 A3 where SNS rejects A2 as malformed (not retryable)
    outbox = write_outbox(outbox_table, 3, subjects=["ORDER#A"])
    rejected = {"Code": "InvalidParameter", "SenderFault": True}
    sns = RecordingSns(sns_fifo_topic.client, failures={outbox.ids[1]: rejected})

    result = publish(outbox, outbox_table, sns, sns_fifo_topic)

    # THEN A2 is quarantined (kept, alarmed) and A1, A3 are delivered in order
    assert result.response() == {"batchItemFailures": []}
    assert result.quarantined == 1
    assert_quarantined(outbox_table, outbox.sk(1), "InvalidParameter")
    assert delivered_per_subject(sns_fifo_topic) == {"ORDER#A": [outbox.ids[0], outbox.ids[2]]}
    assert outbox_sort_keys(outbox_table) == {outbox.sk(1)}
