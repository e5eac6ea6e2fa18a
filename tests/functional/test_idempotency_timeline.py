"""One event over virtual days: every copy of it takes effect once, whatever day it comes.

A copy of an event can reach a consumer long after the event first took effect:
a redundant copy parked in the consumer's DLQ (a concurrent duplicate that
failed as "in progress" until maxReceiveCount, say) and redriven by the runbook
days later, or a replay from the bus's archive. The consumer toolkit
(Powertools idempotency on DynamoDB, here moto) must still know the event then.

The window is the one the module derives (modules/windows, evaluated by
Terraform itself) for the module's default settings; the toolkit's and
Powertools' clocks are moved over the days instead of waiting for them.
Before the window was derived from every place a copy can come from, it was
7 days and the copies redriven on days 8 and 13 took effect again.
"""

from __future__ import annotations

import json

import boto3
import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

from dynamodb_outbox.consumer import OutboxConsumer
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.local.clock import VirtualClock
from dynamodb_outbox.local.toolkit_clock import toolkit_follows
from dynamodb_outbox.replays import REPLAY_NAME_FIELD
from tests.factories import REGION, make_envelope
from tests.functional.consumer_fixtures import eventbridge_body, sqs_event, sqs_record
from tests.functional.outbox_helpers import ulid_at
from tests.support.lambda_context import FakeLambdaContext
from tests.support.module_windows import default_window
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table

DAY = 86400
CONSUMER = "consumer"

#: Days (after the event first took effect) on which a copy arrives, and how.
TIMELINE = [
    (1, "redriven from the DLQ"),
    (6, "redriven from the DLQ"),
    (6, "replayed from the archive"),
    (8, "redriven from the DLQ"),
    (13, "redriven from the DLQ"),
]


@pytest.fixture
def module_window() -> int:
    return default_window()


def replayed_body(envelope: Envelope) -> str:
    body = json.loads(eventbridge_body(envelope))
    body[REPLAY_NAME_FIELD] = "replay.audit.0123456789abcdef"
    return json.dumps(body)


def run_timeline(window: int, aws: None) -> dict[str, list[int]]:
    """Deliver the event on day 0 and its copies on the timeline's days; the days it took effect."""
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    create_idempotency_table(dynamodb)
    clock = VirtualClock()
    event = make_envelope(id=ulid_at(clock.now_datetime()))
    consumer = OutboxConsumer(
        persistence_store=DynamoDBPersistenceLayer(
            table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb
        ),
        name=CONSUMER,
        expires_after_seconds=window,
    )
    effects: dict[str, list[int]] = {}
    start = clock.now()

    @consumer.handler
    def handler(envelope: Envelope) -> None:
        effects.setdefault(envelope.id, []).append(round((clock.now() - start) / DAY))

    with toolkit_follows(clock):
        first = handler(sqs_event([sqs_record(eventbridge_body(event))]), FakeLambdaContext())
        assert first == {"batchItemFailures": []}
        for day, how in TIMELINE:
            clock.advance_to(start + day * DAY)
            body = replayed_body(event) if "replayed" in how else eventbridge_body(event)
            response = handler(sqs_event([sqs_record(body)]), FakeLambdaContext())
            assert response == {"batchItemFailures": []}, (day, how)
    return effects


def test_an_event_takes_effect_once_though_copies_come_on_days_1_6_8_and_13(
    module_window: int, aws: None
) -> None:
    effects = run_timeline(module_window, aws)

    assert list(effects.values()) == [[0]], (
        f"with a {module_window / DAY:g}-day window the event took effect on days "
        f"{next(iter(effects.values()))}; copies came on {TIMELINE}"
    )


def test_the_toolkit_keeps_the_window_the_module_puts_in_its_environment(
    monkeypatch: pytest.MonkeyPatch, aws: None
) -> None:
    """A caller's own function given the `consumers` output's `environment` needs no code."""
    monkeypatch.setenv("OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS", str(20 * DAY))
    dynamodb = boto3.client("dynamodb", region_name=REGION)

    consumer = OutboxConsumer(
        persistence_store=DynamoDBPersistenceLayer(
            table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb
        ),
        name=CONSUMER,
    )

    assert consumer.expires_after_seconds == 20 * DAY
