"""Payload values stay out of the consumer's logs unless the team opts in.

Before, a ``model=`` validation failure logged the exception text, and
Pydantic's text quotes the input: a card number and an e-mail address reached
the log line. Now the line names the exception's type, where it was raised and
the message; ``log_exception_text=True`` adds the text and the traceback.
"""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from pydantic import BaseModel

from dynamodb_outbox.consumer import OutboxConsumer
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.local import LambdaContext
from dynamodb_outbox.local.records import consumer_event
from tests.factories import make_envelope
from tests.functional.consumer_fixtures import failure_ids
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table

CARD = "4111 1111 1111 1111"
EMAIL = "ann.smith@example.com"
CONTEXT = LambdaContext("arn:aws:lambda:us-east-1:123456789012:function:billing")


class Payment(BaseModel):
    amount: Decimal
    customer_id: int


def _consumer(dynamodb_client: Any, **options: Any) -> OutboxConsumer:
    create_idempotency_table(dynamodb_client)
    return OutboxConsumer(
        persistence_store=DynamoDBPersistenceLayer(
            table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb_client
        ),
        name="billing",
        **options,
    )


def _failure_line(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    return next(r for r in caplog.records if r.getMessage().startswith("event processing failed"))


def _everything_logged(record: logging.LogRecord) -> str:
    """What a log formatter may print of the record: every attribute, and any traceback."""
    exc_text = logging.Formatter().formatException(record.exc_info) if record.exc_info else ""
    return " ".join(str(value) for value in vars(record).values()) + exc_text


def _fail_validation(consumer: OutboxConsumer) -> tuple[Any, Envelope]:
    @consumer.handler(model=Payment)
    def pay(event: Envelope, payment: Payment) -> None:
        raise AssertionError("never reached: the payload does not validate")

    bad = make_envelope(data={"amount": CARD, "customer_id": EMAIL})
    return pay(consumer_event([bad]), CONTEXT), bad


def test_a_validation_failure_logs_its_type_and_place_but_no_payload_value(
    dynamodb_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        response, bad = _fail_validation(_consumer(dynamodb_client))

    assert len(failure_ids(response)) == 1
    line = _failure_line(caplog)
    logged = _everything_logged(line)
    assert CARD not in logged and EMAIL not in logged
    assert line.event_id == bad.id  # type: ignore[attr-defined]
    assert line.exception_type == "pydantic_core._pydantic_core.ValidationError"  # type: ignore[attr-defined]
    assert "test_consumer_log_privacy" not in str(line.raised_at)  # raised in the model, named
    assert line.raised_at  # type: ignore[attr-defined]
    assert line.exc_info is None and not hasattr(line, "reason")


def test_the_exception_text_is_logged_only_when_the_consumer_opts_in(
    dynamodb_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        _fail_validation(_consumer(dynamodb_client, log_exception_text=True))

    logged = _everything_logged(_failure_line(caplog))
    assert CARD in logged and EMAIL in logged
