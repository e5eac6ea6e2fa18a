"""Payload values stay out of the consumer's logs unless the team opts in.

Before, a ``model=`` validation failure logged the exception text, and
Pydantic's text quotes the input: a card number and an e-mail address reached
the log line. Now the line names the exception's type, where it was raised and
the message; ``log_exception_text=True`` adds the text and the traceback.
"""

from __future__ import annotations

import json
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


def _logged(capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> str:
    out = capsys.readouterr()
    return out.out + out.err + caplog.text


def _fail_validation(consumer: OutboxConsumer) -> tuple[Any, Envelope]:
    @consumer.handler(model=Payment)
    def pay(event: Envelope, payment: Payment) -> None:
        raise AssertionError("never reached: the payload does not validate")

    bad = make_envelope(data={"amount": CARD, "customer_id": EMAIL})
    return pay(consumer_event([bad]), CONTEXT), bad


def test_a_validation_failure_logs_its_type_and_place_but_no_payload_value(
    dynamodb_client: Any, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        response, bad = _fail_validation(_consumer(dynamodb_client))

    logged = _logged(capsys, caplog)
    assert len(failure_ids(response)) == 1
    assert CARD not in logged and EMAIL not in logged
    line = next(
        json.loads(text)
        for text in logged.splitlines()
        if text.startswith("{") and "event processing failed" in text
    )
    assert line["event_id"] == bad.id
    assert line["exception_type"] == "pydantic_core._pydantic_core.ValidationError"
    assert "raised_at" in line and "exception" not in line


def test_the_exception_text_is_logged_only_when_the_consumer_opts_in(
    dynamodb_client: Any, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        _fail_validation(_consumer(dynamodb_client, log_exception_text=True))

    logged = _logged(capsys, caplog)
    assert CARD in logged and EMAIL in logged
