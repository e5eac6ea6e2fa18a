"""Every consumer-toolkit log line about a record carries its correlation id and producer trace.

Records come from the public factory ``dynamodb_outbox.local.records``, so these
tests also pin the shapes it builds against the consumer that reads them.
"""

from __future__ import annotations

import io
import json
import logging
import uuid
from typing import Any

import pytest
from aws_lambda_powertools import Logger

from dynamodb_outbox.consumer import OutboxConsumer
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.local import LambdaContext
from dynamodb_outbox.local.records import (
    consumer_event,
    eventbridge_body,
    sqs_event,
    sqs_record,
)
from tests.factories import make_envelope
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table

CONTEXT = LambdaContext("arn:aws:lambda:us-east-1:123456789012:function:billing")
TRACE_OK = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
TRACE_BAD = "00-6759e988bd862e3fe1be46a994272794-63995c3f42cd8ad8-00"


def json_lines(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines() if line.startswith("{")]


@pytest.fixture
def logged(dynamodb_client: Any) -> tuple[OutboxConsumer, io.StringIO]:
    create_idempotency_table(dynamodb_client)
    buffer = io.StringIO()
    # A service name of its own: Powertools configures a Logger name once per process.
    logger = Logger(
        service=f"billing-{uuid.uuid4().hex}",
        logger_handler=logging.StreamHandler(buffer),
        level="INFO",
    )
    consumer = OutboxConsumer(IDEMPOTENCY_TABLE, name="billing", logger=logger)
    return consumer, buffer


def test_each_line_about_a_record_carries_that_records_ids_and_none_after_it(
    logged: tuple[OutboxConsumer, io.StringIO],
) -> None:
    # GIVEN a consumer whose function logs through consumer.logger and fails one event
    consumer, buffer = logged
    ok = make_envelope(correlation_id="req-ok", traceparent=TRACE_OK)
    bad = make_envelope(correlation_id="req-bad", traceparent=TRACE_BAD)

    @consumer.handler
    def handler(event: Envelope) -> None:
        consumer.logger.info("charging", extra={"seen": event.id})
        if event.id == bad.id:
            raise RuntimeError("card declined")

    # WHEN a batch holds both, then the ok one again (a duplicate), then a poison message
    handler(consumer_event([ok, bad]), CONTEXT)  # type: ignore[arg-type]
    handler(consumer_event([ok]), CONTEXT)  # type: ignore[arg-type]
    handler(sqs_event([sqs_record("not an event")]), CONTEXT)  # type: ignore[arg-type]
    consumer.logger.info("after the batches")

    # THEN the function's lines, the failure and the duplicate carry their record's ids
    lines = json_lines(buffer)
    # (the producer's trace id in X-Ray's form, as Powertools logs its own xray_trace_id)
    by_id = {
        ok.id: ("req-ok", "1-5759e988-bd862e3fe1be46a994272793", TRACE_OK),
        bad.id: ("req-bad", "1-6759e988-bd862e3fe1be46a994272794", TRACE_BAD),
    }
    about_a_record = [line for line in lines if line.get("seen") or line.get("event_id")]
    messages = sorted(line["message"] for line in about_a_record)
    assert messages == sorted(
        [
            "charging",
            "charging",
            "event processing failed; returning it to the queue",
            "duplicate event skipped: already processed",
        ]
    )
    for line in about_a_record:
        event_id = line.get("seen") or line["event_id"]
        keys = (line.get("correlation_id"), line.get("trace_id"), line.get("traceparent"))
        assert keys == by_id[event_id], line
    # AND the poison line and anything after the records carry neither
    others = [line for line in lines if line not in about_a_record]
    assert {line["message"] for line in others} >= {"after the batches"}
    assert all(not {"correlation_id", "trace_id", "traceparent"} & set(line) for line in others)


def test_an_event_without_ids_logs_no_stale_ids_of_the_previous_record(
    logged: tuple[OutboxConsumer, io.StringIO],
) -> None:
    consumer, buffer = logged
    first = make_envelope(correlation_id="req-1", traceparent=TRACE_OK)
    second = make_envelope()

    @consumer.handler
    def handler(event: Envelope) -> None:
        consumer.logger.info("handling", extra={"seen": event.id})

    handler(sqs_event([sqs_record(eventbridge_body(e)) for e in (first, second)]), CONTEXT)  # type: ignore[arg-type]
    handling = {line["seen"]: line for line in json_lines(buffer) if line["message"] == "handling"}
    assert handling[first.id]["correlation_id"] == "req-1"
    assert "correlation_id" not in handling[second.id]
    assert handling[first.id]["trace_id"] == "1-5759e988-bd862e3fe1be46a994272793"
    assert "trace_id" not in handling[second.id]
    assert "traceparent" not in handling[second.id]


def test_sns_raw_bodies_and_fifo_records_from_the_factory_are_read_by_the_consumer(
    logged: tuple[OutboxConsumer, io.StringIO],
) -> None:
    consumer, _ = logged
    seen: list[str] = []

    @consumer.handler
    def handler(event: Envelope) -> None:
        seen.append(event.id)

    first, second = make_envelope(), make_envelope()
    assert handler(consumer_event([first], via="sns"), CONTEXT) == {"batchItemFailures": []}  # type: ignore[arg-type]
    fifo = "arn:aws:sqs:us-east-1:123456789012:billing.fifo"
    poison = sqs_record("{}", queue_arn=fifo)
    after = sqs_record(eventbridge_body(second), queue_arn=fifo)
    response = handler(sqs_event([poison, after]), CONTEXT)  # type: ignore[arg-type]
    # FIFO: the first failure and everything after it come back
    assert response == {
        "batchItemFailures": [
            {"itemIdentifier": poison["messageId"]},
            {"itemIdentifier": after["messageId"]},
        ]
    }
    assert seen == [first.id]


def test_a_logger_that_cannot_hold_keys_does_not_fail_the_record(dynamodb_client: Any) -> None:
    # GIVEN a consumer whose Logger is an orphaned child (Powertools refuses keys on it)
    create_idempotency_table(dynamodb_client)
    orphan = Logger(service=f"orphan-{uuid.uuid4().hex}", child=True)
    consumer = OutboxConsumer(IDEMPOTENCY_TABLE, name="billing", logger=orphan)
    seen: list[str] = []

    @consumer.handler
    def handler(event: Envelope) -> None:
        seen.append(event.id)

    # WHEN/THEN the event is processed all the same
    event = make_envelope(correlation_id="req-9")
    assert handler(consumer_event([event]), CONTEXT) == {"batchItemFailures": []}  # type: ignore[arg-type]
    assert seen == [event.id]
