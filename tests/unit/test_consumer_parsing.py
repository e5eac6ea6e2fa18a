"""The consumer toolkit without AWS: body shapes, the messageId rule, naming.

Idempotency, partial batch responses and FIFO behaviour run against moto in
tests/functional/test_consumer.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dynamodb_outbox.consumer import (
    MalformedBatch,
    OutboxConsumer,
    parse_body,
    process_sqs_batch,
)
from dynamodb_outbox.consumer._idempotency import idempotency_key_prefix
from dynamodb_outbox.envelope import InvalidEnvelope
from dynamodb_outbox.sizes import is_fifo
from tests.factories import make_envelope
from tests.functional.consumer_fixtures import (
    FIFO_QUEUE_ARN,
    STANDARD_QUEUE_ARN,
    eventbridge_body,
    sns_notification_body,
    sns_raw_body,
    sqs_event,
    sqs_record,
)


class UntouchableStore:
    """A persistence layer that fails the test if the consumer touches it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the persistence store was used ({name}) before the batch was valid")


def never_called(envelope: Any) -> None:
    raise AssertionError("the consumer function ran for a batch that should have been refused")


# --------------------------------------------------------------------------- bodies


@pytest.mark.parametrize(
    "shape",
    [eventbridge_body, sns_raw_body, sns_notification_body],
    ids=["EventBridge target", "SNS raw delivery", "SNS notification"],
)
def test_parse_body_returns_the_envelope_whichever_service_delivered_it(shape: Any) -> None:
    event = make_envelope(
        traceparent="00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01", correlation_id="c-1"
    )
    assert parse_body(shape(event)) == event


def test_parse_body_accepts_bytes() -> None:
    event = make_envelope()
    assert parse_body(sns_raw_body(event).encode()) == event


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (None, "must be a string"),
        ("", "not valid JSON"),
        ("{oops", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('"text"', "must be a JSON object"),
        (json.dumps({"id": "x"}), "missing field"),
        (json.dumps({"Type": "Notification", "Message": {"id": 1}}), "'Message' must be a string"),
        (json.dumps({"Type": "Notification", "Message": "not json"}), "not valid JSON"),
        (json.dumps({"detail-type": "OrderPlaced", "detail": "text"}), "must be a JSON object"),
    ],
    ids=[
        "no body",
        "empty",
        "broken JSON",
        "array",
        "string",
        "incomplete envelope",
        "SNS Message not a string",
        "SNS Message not JSON",
        "EventBridge detail not an object",
    ],
)
def test_parse_body_rejects_what_is_not_an_envelope_with_the_reason(body: Any, reason: str) -> None:
    with pytest.raises(InvalidEnvelope, match=reason):
        parse_body(body)


def test_eventbridge_detail_type_that_contradicts_the_envelope_type_is_rejected() -> None:
    # GIVEN an EventBridge event routed as "OrderShipped" but carrying an OrderPlaced envelope
    body = eventbridge_body(make_envelope(type="OrderPlaced"), detail_type="OrderShipped")

    # THEN it is not processed as if it were either (rules route on detail-type)
    with pytest.raises(InvalidEnvelope, match="does not match"):
        parse_body(body)


def test_fifo_queues_are_recognised_by_their_arn_suffix() -> None:
    assert is_fifo(FIFO_QUEUE_ARN)
    assert not is_fifo(STANDARD_QUEUE_ARN)
    assert not is_fifo(None)


# --------------------------------------------------------------------------- the messageId rule


@pytest.mark.parametrize(
    "event",
    [
        {"Records": [{"body": "{}"}]},
        {"Records": [{"messageId": "", "body": "{}"}]},
        {"Records": [{"messageId": None, "body": "{}"}]},
        {"Records": ["not a record"]},
        {"records": []},
        {},
    ],
    ids=[
        "no messageId",
        "empty",
        "null",
        "record not an object",
        "no Records key",
        "empty event",
    ],
)
def test_batch_that_cannot_be_reported_record_by_record_raises_before_any_work(
    event: dict[str, Any],
) -> None:
    # GIVEN an event whose records cannot all be named in batchItemFailures
    # WHEN it is processed
    # THEN it raises (Lambda retries the whole batch) and neither the store nor
    # the function was touched
    with pytest.raises(MalformedBatch):
        process_sqs_batch(
            event,  # type: ignore[arg-type]
            never_called,
            persistence_store=UntouchableStore(),  # type: ignore[arg-type]
            consumer_name="c",
        )


def test_valid_records_after_an_unreportable_one_are_not_processed_either() -> None:
    event = sqs_event([sqs_record(eventbridge_body(make_envelope())), {"body": "{}"}])
    with pytest.raises(MalformedBatch, match="record 1"):
        process_sqs_batch(
            event,  # type: ignore[arg-type]
            never_called,
            persistence_store=UntouchableStore(),  # type: ignore[arg-type]
            consumer_name="c",
        )


# --------------------------------------------------------------------------- naming


def test_idempotency_keys_are_prefixed_by_the_consumer_name() -> None:
    assert idempotency_key_prefix("billing") == "idempotency#billing"


@pytest.mark.parametrize("name", ["", "a#b"])
def test_consumer_name_that_could_collide_with_another_prefix_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="consumer name"):
        idempotency_key_prefix(name)


def test_consumer_name_comes_from_the_argument_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "fn-name")
    store: Any = UntouchableStore()
    assert OutboxConsumer(persistence_store=store, name="explicit").name == "explicit"
    assert OutboxConsumer(persistence_store=store).name == "fn-name"
    monkeypatch.setenv("OUTBOX_CONSUMER_NAME", "from-env")
    assert OutboxConsumer(persistence_store=store).name == "from-env"


def test_a_name_in_code_that_differs_from_the_environments_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The module sets OUTBOX_CONSUMER_NAME to the consumer's key and grants the
    # function idempotency#<key>#* only: another name would be denied on AWS.
    from dynamodb_outbox.settings import ConfigurationError

    monkeypatch.setenv("OUTBOX_CONSUMER_NAME", "billing")
    store: Any = UntouchableStore()
    with pytest.raises(
        ConfigurationError, match="'biling' in code but OUTBOX_CONSUMER_NAME='billing'"
    ):
        OutboxConsumer(persistence_store=store, name="biling")
    assert OutboxConsumer(persistence_store=store, name="billing").name == "billing"
    assert OutboxConsumer(persistence_store=store).name == "billing"


def test_consumer_without_any_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    monkeypatch.delenv("OUTBOX_CONSUMER_NAME", raising=False)
    with pytest.raises(ValueError, match="needs a name"):
        OutboxConsumer(persistence_store=UntouchableStore())  # type: ignore[arg-type]


def test_consumer_needs_exactly_one_of_table_or_store() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        OutboxConsumer(name="c")
    with pytest.raises(ValueError, match="exactly one"):
        OutboxConsumer("table", persistence_store=UntouchableStore(), name="c")  # type: ignore[arg-type]
