"""The consumer side of the per-subject sequence: a gap or a reordering is seen, once.

The tracker runs inside the toolkit's idempotency (``@consumer.handler`` around
``@tracker.checked``), on a FIFO queue's events as Lambda delivers them, with
the idempotency table in moto.
"""

from __future__ import annotations

from typing import Any

import pytest

from dynamodb_outbox.consumer import OutboxConsumer
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.sequence_check import (
    SequenceObservation,
    SequenceTracker,
    SequenceVerdict,
    sequence_key,
)
from dynamodb_outbox.settings import DEFAULT_EXPIRES_AFTER_SECONDS
from tests.factories import make_envelope
from tests.functional.consumer_fixtures import (
    FIFO_QUEUE_ARN,
    Recorder,
    failure_ids,
    redelivered,
    sns_raw_body,
    sqs_event,
    sqs_record,
)
from tests.support.lambda_context import FakeLambdaContext
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table

CONSUMER = "billing"
SUBJECT = "ORDER#1001"


@pytest.fixture
def table(dynamodb_client: Any) -> str:
    return create_idempotency_table(dynamodb_client)


def sequenced(sequence: int | None, subject: str = SUBJECT) -> Envelope:
    return make_envelope(subject=subject, sequence=sequence, data={"n": sequence})


def fifo_record(envelope: Envelope) -> dict[str, Any]:
    return sqs_record(sns_raw_body(envelope), queue_arn=FIFO_QUEUE_ARN, group_id=envelope.subject)


class Handler:
    def __init__(self, dynamodb_client: Any) -> None:
        self.observations: list[SequenceObservation] = []
        self.function = Recorder()
        self.tracker = SequenceTracker(IDEMPOTENCY_TABLE, CONSUMER, client=dynamodb_client)
        consumer = OutboxConsumer(idempotency_table=IDEMPOTENCY_TABLE, name=CONSUMER)
        self.handler = consumer.handler(
            self.tracker.checked(self.function, on_observation=self.observations.append)
        )

    def __call__(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        response: dict[str, Any] = self.handler(sqs_event(records), FakeLambdaContext())
        return response

    def verdicts(self) -> list[tuple[int | None, SequenceVerdict]]:
        return [(o.sequence, o.verdict) for o in self.observations]


def test_a_gap_and_a_late_event_are_told_apart_from_events_in_order(
    table: str, dynamodb_client: Any
) -> None:
    handle = Handler(dynamodb_client)

    # GIVEN sequences 1, 2, 4 (3 was quarantined and is released later), then 3
    response = handle([fifo_record(sequenced(n)) for n in (1, 2, 4)])
    late = handle([fifo_record(sequenced(3))])

    assert failure_ids(response) == [] and failure_ids(late) == []
    assert handle.verdicts() == [
        (1, SequenceVerdict.FIRST),
        (2, SequenceVerdict.IN_ORDER),
        (4, SequenceVerdict.GAP),
        (3, SequenceVerdict.REORDERED),
    ]
    assert list(handle.observations[2].missing) == [3]
    # AND the highest sequence stays the one that took effect last in order
    item = dynamodb_client.get_item(
        TableName=IDEMPOTENCY_TABLE, Key={"id": {"S": sequence_key(CONSUMER, SUBJECT)}}
    )["Item"]
    assert item["last_sequence"] == {"N": "4"}


def test_subjects_are_tracked_apart_and_unsequenced_events_are_left_alone(
    table: str, dynamodb_client: Any
) -> None:
    handle = Handler(dynamodb_client)

    handle(
        [
            fifo_record(sequenced(5, "ORDER#A")),
            fifo_record(sequenced(1, "ORDER#B")),
            fifo_record(sequenced(None, "ORDER#C")),
            fifo_record(sequenced(6, "ORDER#A")),
        ]
    )

    assert handle.verdicts() == [
        (5, SequenceVerdict.FIRST),
        (1, SequenceVerdict.FIRST),
        (6, SequenceVerdict.IN_ORDER),
    ]


def test_a_duplicate_delivery_is_skipped_by_idempotency_before_it_is_counted(
    table: str, dynamodb_client: Any
) -> None:
    handle = Handler(dynamodb_client)
    record = fifo_record(sequenced(1))

    handle([record])
    handle([redelivered(record)])

    assert handle.verdicts() == [(1, SequenceVerdict.FIRST)]
    assert sum(handle.function.effects.values()) == 1


def test_a_failed_function_records_no_sequence_so_its_retry_is_in_order(
    table: str, dynamodb_client: Any
) -> None:
    handle = Handler(dynamodb_client)
    first, second = sequenced(1), sequenced(2)
    handle.function.fail_times[second.id] = 1
    record = fifo_record(second)

    assert failure_ids(handle([fifo_record(first), record])) == [record["messageId"]]
    assert failure_ids(handle([redelivered(record)])) == []

    assert handle.verdicts() == [(1, SequenceVerdict.FIRST), (2, SequenceVerdict.IN_ORDER)]


def test_an_error_recording_the_sequence_never_fails_an_event_that_took_effect(
    table: str, dynamodb_client: Any
) -> None:
    class Broken:
        def update_item(self, **_: Any) -> dict[str, Any]:
            raise RuntimeError("DynamoDB is away")

    function = Recorder()
    tracker = SequenceTracker(IDEMPOTENCY_TABLE, CONSUMER, client=Broken())  # type: ignore[arg-type]
    consumer = OutboxConsumer(idempotency_table=IDEMPOTENCY_TABLE, name=CONSUMER)
    handler = consumer.handler(tracker.checked(function))

    response = handler(sqs_event([fifo_record(sequenced(1))]), FakeLambdaContext())

    assert failure_ids(response) == []
    assert sum(function.effects.values()) == 1


def test_the_tracker_keeps_a_subject_as_long_as_the_consumers_idempotency_window() -> None:
    # One source: the consumer's default window itself, not a second 7-day
    # constant that agrees today (two computed 604800s are two int objects)
    tracker = SequenceTracker(IDEMPOTENCY_TABLE, CONSUMER)
    assert tracker.keep_seconds is DEFAULT_EXPIRES_AFTER_SECONDS


def test_a_consumer_name_with_a_hash_is_refused_so_tracker_keys_never_collide() -> None:
    # "a#b" + "c" and "a" + "b#c" would both be sequence#a#b#c
    with pytest.raises(ValueError, match=r"consumer_name 'a#b' must not contain '#'"):
        SequenceTracker(IDEMPOTENCY_TABLE, "a#b")
    assert sequence_key("a", "b#c") == "sequence#a#b#c"
