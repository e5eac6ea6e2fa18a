"""The reference consumer end to end on moto: the handler the module deploys by
default, configured from its environment, recording each event in the ledger."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from aws_lambda_powertools import Logger

from dynamodb_outbox import reference_consumer
from dynamodb_outbox.consumer import OutboxConsumer
from dynamodb_outbox.ledger import ledger_key, read_ledger, record_processed
from dynamodb_outbox.log_keys import key_digest
from dynamodb_outbox.settings import ConfigurationError
from tests.factories import make_envelope
from tests.functional.consumer_fixtures import (
    FIFO_QUEUE_ARN,
    envelopes,
    eventbridge_body,
    failure_ids,
    redelivered,
    scan_items,
    sns_notification_body,
    sns_raw_body,
    sqs_event,
    sqs_record,
)
from tests.support.lambda_context import FakeLambdaContext
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table

CONSUMER = "reference"


@pytest.fixture
def deployed(dynamodb_client: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The environment Terraform gives the reference consumer, and its table."""
    create_idempotency_table(dynamodb_client)
    monkeypatch.setenv("OUTBOX_IDEMPOTENCY_TABLE", IDEMPOTENCY_TABLE)
    monkeypatch.setenv("OUTBOX_CONSUMER_NAME", CONSUMER)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "outbox-reference-consumer")
    return dynamodb_client


def invoke(records: list[dict[str, Any]]) -> Any:
    return reference_consumer.handler(sqs_event(records), FakeLambdaContext())  # type: ignore[arg-type]


def test_reference_consumer_records_each_event_once_after_duplicate_deliveries(
    deployed: Any,
) -> None:
    # GIVEN three events delivered through the three body shapes
    events = envelopes(3)
    records = [
        sqs_record(eventbridge_body(events[0])),
        sqs_record(sns_raw_body(events[1])),
        sqs_record(sns_notification_body(events[2])),
    ]

    # WHEN the batch is handled, then redelivered, then the first event arrives in a new message
    first = invoke(records)
    second = invoke([redelivered(record) for record in records])
    third = invoke([sqs_record(eventbridge_body(events[0]))])

    # THEN every delivery succeeded
    assert [failure_ids(r) for r in (first, second, third)] == [[], [], []]
    # AND the ledger holds each event exactly once, with what the consumer saw
    ledger = read_ledger(deployed, IDEMPOTENCY_TABLE, CONSUMER)
    assert [(e["event_id"], e["times_processed"]) for e in ledger] == [(e.id, 1) for e in events]
    assert [(e["event_type"], e["subject"]) for e in ledger] == [
        (e.type, e.subject) for e in events
    ]


def test_ledger_counts_every_run_so_a_double_processing_would_show(deployed: Any) -> None:
    # GIVEN the ledger write the reference consumer makes
    event = make_envelope()

    # WHEN it runs twice for one event (what idempotency exists to prevent)
    record_processed(deployed, IDEMPOTENCY_TABLE, CONSUMER, event, expires_after_seconds=60)
    record_processed(deployed, IDEMPOTENCY_TABLE, CONSUMER, event, expires_after_seconds=60)

    # THEN the ledger shows 2: "times_processed == 1" is a real check, not a constant
    (entry,) = read_ledger(deployed, IDEMPOTENCY_TABLE, CONSUMER)
    assert entry["times_processed"] == 2
    assert entry["first_processed_at"] <= entry["last_processed_at"]


def test_ledger_entry_lives_in_the_idempotency_table_under_its_documented_key(
    deployed: Any,
) -> None:
    # GIVEN an event handled by the reference consumer
    event = make_envelope()
    invoke([sqs_record(eventbridge_body(event))])

    # THEN its ledger item is keyed ledger#<consumer>#<event id> and expires with the table's TTL
    items = {item["id"]["S"]: item for item in scan_items(deployed)}
    entry = items[ledger_key(CONSUMER, event.id)]
    assert entry["times_processed"] == {"N": "1"}
    assert "expiration" in entry


def test_poison_message_fails_alone_and_leaves_no_ledger_entry(deployed: Any) -> None:
    # GIVEN a FIFO batch whose second message is poison
    events = envelopes(3)
    records = [sqs_record(eventbridge_body(e), queue_arn=FIFO_QUEUE_ARN) for e in events]
    records[1] = sqs_record("{broken", queue_arn=FIFO_QUEUE_ARN)

    # WHEN the reference consumer handles it
    response = invoke(records)

    # THEN the poison and the message after it are returned, and only the first was recorded
    assert failure_ids(response) == [records[1]["messageId"], records[2]["messageId"]]
    assert [e["event_id"] for e in read_ledger(deployed, IDEMPOTENCY_TABLE, CONSUMER)] == [
        events[0].id
    ]


def test_read_ledger_keeps_consumers_whose_names_share_a_prefix_apart(deployed: Any) -> None:
    # GIVEN consumers "reference" and "reference-audit" recording different events
    mine, theirs = make_envelope(), make_envelope()
    record_processed(deployed, IDEMPOTENCY_TABLE, CONSUMER, mine, expires_after_seconds=60)
    record_processed(
        deployed, IDEMPOTENCY_TABLE, f"{CONSUMER}-audit", theirs, expires_after_seconds=60
    )

    # WHEN one consumer's ledger is read
    # THEN it holds only that consumer's entries
    assert [e["event_id"] for e in read_ledger(deployed, IDEMPOTENCY_TABLE, CONSUMER)] == [mine.id]


def test_reference_consumer_without_its_table_fails_the_whole_batch(
    deployed: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a deployment that forgot OUTBOX_IDEMPOTENCY_TABLE
    monkeypatch.delenv("OUTBOX_IDEMPOTENCY_TABLE")

    # WHEN a batch arrives
    # THEN the handler raises (messages stay queued) instead of reporting success
    with pytest.raises(ConfigurationError, match="OUTBOX_IDEMPOTENCY_TABLE"):
        invoke([sqs_record(eventbridge_body(make_envelope()))])


@pytest.mark.parametrize("value", ["a week", "0", "-5"])
def test_reference_consumer_with_a_bad_expiry_names_the_variable(
    deployed: Any, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # GIVEN an expiry that is not a positive number of seconds
    monkeypatch.setenv("OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS", value)

    # WHEN a batch arrives
    # THEN the whole batch fails with a message naming the variable and the value
    expected = f"OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS.*{value}"
    with pytest.raises(ConfigurationError, match=expected):
        invoke([sqs_record(eventbridge_body(make_envelope()))])


def test_reference_consumer_logs_a_digest_of_the_subject_never_the_subject(
    deployed: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN an event about an entity whose key (the default subject) holds an email address
    event = make_envelope(subject="CUSTOMER#alice@example.com")
    consumer = OutboxConsumer(IDEMPOTENCY_TABLE, name=CONSUMER, logger=Logger(service="log-test"))
    handle = reference_consumer.build_handler(consumer, deployed, IDEMPOTENCY_TABLE)
    logging.getLogger("log-test").addHandler(caplog.handler)
    try:
        response = handle(sqs_event([sqs_record(eventbridge_body(event))]), FakeLambdaContext())
    finally:
        logging.getLogger("log-test").removeHandler(caplog.handler)

    assert failure_ids(response) == []
    logged = "\n".join(repr(vars(record)) for record in caplog.records)
    assert "event recorded in the ledger" in logged
    assert key_digest("CUSTOMER#alice@example.com") in logged
    assert "alice@example.com" not in logged
