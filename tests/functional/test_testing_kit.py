"""dynamodb_outbox.testing: isolation, the stack as the module builds it, why a message failed."""

from __future__ import annotations

import json
import logging
import os
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import boto3
import pytest

from dynamodb_outbox import Envelope, OutboxConsumer, Router, publisher
from dynamodb_outbox.settings import ConfigurationError
from dynamodb_outbox.table_keys import TableKeys
from dynamodb_outbox.testing import ConsumerFailed, OutboxStack, isolated_aws
from dynamodb_outbox.testing.failures import FailureLog


def test_isolated_aws_hides_the_developers_aws_setup_and_restores_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_PROFILE", "production")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("OUTBOX_TABLE_NAME", "someone-elses")
    monkeypatch.delenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", raising=False)

    with isolated_aws():
        inside = dict(os.environ)
        tables = boto3.client("dynamodb").list_tables()["TableNames"]

    assert "AWS_PROFILE" not in inside and "AWS_ENDPOINT_URL" not in inside
    assert "OUTBOX_TABLE_NAME" not in inside
    assert inside["AWS_ACCOUNT_ID_ENDPOINT_MODE"] == "disabled"
    assert tables == []  # moto answered, not the endpoint above
    assert os.environ["AWS_PROFILE"] == "production"
    assert "AWS_ACCOUNT_ID_ENDPOINT_MODE" not in os.environ


def test_the_publishers_cached_runtime_does_not_outlive_a_test() -> None:
    with isolated_aws(), OutboxStack() as stack:
        writer = stack.writer()
        writer.write_events("ORDER#1", [writer.new_event("ORDER#1", "OrderCreated", {})])
        stack.drain()
        assert publisher.default_runtime.cache_info().currsize == 1

    assert publisher.default_runtime.cache_info().currsize == 0


ORDERS = {"source": ["app"]}  # every event the stack's writer writes


def write_order(stack: OutboxStack, order_id: str, total: Decimal) -> Envelope:
    writer = stack.writer()
    order = {"PK": f"ORDER#{order_id}", "SK": "META", "total": total}
    event = writer.new_event(order, "OrderCreated", {"order_id": order_id, "total": total})
    writer.write(order, event)
    return event


def test_a_failed_message_carries_the_exception_the_function_raised() -> None:
    with isolated_aws(), OutboxStack() as stack:
        consumer = OutboxConsumer(idempotency_table=stack.names.idempotency_table, name="billing")

        @consumer.handler
        def handler(event: Envelope) -> None:
            raise LookupError(f"no customer for {event.data['order_id']}")

        queue = stack.add_consumer("billing", handler, max_receive_count=2, event_pattern=ORDERS)
        event = write_order(stack, "7", Decimal("1.50"))
        stack.drain()

        failures = stack.failures
        assert [(f.event_id, f.event_type) for f in failures] == [(event.id, "OrderCreated")] * 2
        assert all(isinstance(f.exception, LookupError) for f in failures)
        assert str(failures[0].exception) == "no customer for 7"
        assert [e.id for e in queue.dead_letters()] == [event.id]
        with pytest.raises(ConsumerFailed, match="no customer for 7") as raised:
            stack.raise_failures()
        assert raised.value.__cause__ is failures[0].exception


def test_a_poison_body_is_reported_with_its_reason_and_no_exception() -> None:
    with isolated_aws(), OutboxStack() as stack:
        consumer = OutboxConsumer(idempotency_table=stack.names.idempotency_table, name="audit")
        queue = stack.add_consumer(
            "audit", consumer.handler(lambda event: None), event_pattern=ORDERS
        )
        stack.sqs.send_message(QueueUrl=queue.queue_url, MessageBody="not json")
        stack.drain()

        assert stack.failures[0].exception is None
        assert "not valid JSON" in stack.failures[0].reason


def test_a_handler_named_by_path_is_imported_afresh_with_the_consumers_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "kit_billing.py").write_text(
        "import os\n"
        "from dynamodb_outbox import OutboxConsumer\n"
        "consumer = OutboxConsumer(idempotency_table=os.environ['OUTBOX_IDEMPOTENCY_TABLE'])\n"
        "seen = []\n"
        "handler = consumer.handler(lambda event: seen.append(event.data['total']))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for run in range(2):
        with isolated_aws(), OutboxStack() as stack:
            stack.add_consumer("billing", "kit_billing:handler", event_pattern=ORDERS)
            module = sys.modules["kit_billing"]
            write_order(stack, str(run), Decimal("2"))
            stack.drain()

            assert module.consumer.name == "billing"  # OUTBOX_CONSUMER_NAME, the key
            assert module.seen == [2]  # a fresh module each time, against this stack


def test_the_sns_stack_with_other_key_names_delivers_by_filter_policy() -> None:
    with isolated_aws(), OutboxStack(publish_to="sns", table_keys=TableKeys("pk", "sk")) as stack:
        consumer = OutboxConsumer(idempotency_table=stack.names.idempotency_table, name="ship")
        got: list[str] = []
        stack.add_consumer(
            "ship",
            consumer.handler(lambda event: got.append(event.type)),
            filter_policy={"event_type": ["OrderPaid"]},
        )
        writer = stack.writer()
        for event_type in ("OrderCreated", "OrderPaid"):
            writer.write_events("ORDER#1", [writer.new_event("ORDER#1", event_type, {})])
        stack.drain()

        stack.raise_failures()
        assert got == ["OrderPaid"]
        # both outbox items were published, then deleted
        assert boto3.client("dynamodb").scan(TableName=stack.names.table)["Items"] == []


def test_the_consumer_queue_has_the_modules_redrive_and_visibility() -> None:
    with isolated_aws(), OutboxStack() as stack:
        consumer = OutboxConsumer(idempotency_table=stack.names.idempotency_table, name="billing")
        queue = stack.add_consumer(
            "billing", consumer.handler(lambda event: None), event_pattern=ORDERS
        )
        attributes = stack.sqs.get_queue_attributes(
            QueueUrl=queue.queue_url, AttributeNames=["All"]
        )["Attributes"]

        assert queue.queue_url.endswith("/orders-billing-consumer")
        assert attributes["VisibilityTimeout"] == "180"  # 6 x the 30 s function timeout
        assert json.loads(attributes["RedrivePolicy"])["maxReceiveCount"] == 5


def test_two_consumers_loaded_by_path_each_get_their_own_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in ("kit_one", "kit_two"):
        (tmp_path / f"{module}.py").write_text(
            "import os\n"
            "from dynamodb_outbox import OutboxConsumer\n"
            "consumer = OutboxConsumer(idempotency_table=os.environ['OUTBOX_IDEMPOTENCY_TABLE'])\n"
            "handler = consumer.handler(lambda event: None)\n"
        )
    monkeypatch.syspath_prepend(str(tmp_path))
    with isolated_aws(), OutboxStack() as stack:
        stack.add_consumer("one", "kit_one:handler", event_pattern=ORDERS)
        stack.add_consumer("two", "kit_two:handler", event_pattern=ORDERS)
        in_process = OutboxConsumer(idempotency_table=stack.names.idempotency_table, name="three")

        assert [sys.modules[m].consumer.name for m in ("kit_one", "kit_two")] == ["one", "two"]
        assert in_process.name == "three"
        assert "OUTBOX_CONSUMER_NAME" not in os.environ


def test_the_modules_reference_consumer_sees_its_environment_at_every_invocation() -> None:
    # It builds its handler on its first invocation from OUTBOX_IDEMPOTENCY_TABLE
    # and OUTBOX_CONSUMER_NAME, which Lambda gives the function for its whole life.
    with isolated_aws(), OutboxStack() as stack:
        stack.add_consumer(
            "audit", "dynamodb_outbox.reference_consumer:handler", event_pattern=ORDERS
        )
        write_order(stack, "1", Decimal("3"))
        stack.drain()

        stack.raise_failures()
        items = stack.dynamodb.scan(TableName=stack.names.idempotency_table)["Items"]
        prefixes = sorted(item["id"]["S"].split("#")[0] + "#audit" for item in items)
        assert prefixes == ["idempotency#audit", "ledger#audit"]
        assert all(item["id"]["S"].split("#")[1] == "audit" for item in items)
        assert "OUTBOX_CONSUMER_NAME" not in os.environ  # restored after each invocation


def test_an_invocation_that_fails_as_a_whole_is_a_failure_with_its_exception() -> None:
    with isolated_aws(), OutboxStack() as stack:

        def handler(event: Any, context: Any) -> Any:
            raise RuntimeError("the function could not start")

        stack.add_consumer("billing", handler, max_receive_count=1, event_pattern=ORDERS)
        event = write_order(stack, "1", Decimal("3"))
        stack.drain()

        (failure,) = stack.failures
        assert (failure.consumer, failure.event_id) == ("billing", event.id)
        assert failure.invocation_error == "RuntimeError: the function could not start"
        assert isinstance(failure.exception, RuntimeError)
        with pytest.raises(ConsumerFailed, match="could not start") as raised:
            stack.raise_failures()
        assert raised.value.__cause__ is failure.exception


def test_a_timed_out_invocation_is_a_failure_even_though_its_retry_is_skipped() -> None:
    # The local runtime cannot stop Python code at its deadline: the function
    # finishes (its idempotency record COMPLETED), then Lambda's verdict is
    # "Task timed out" and the message comes back, to be skipped as done.
    with isolated_aws(), OutboxStack() as stack:
        consumer = OutboxConsumer(idempotency_table=stack.names.idempotency_table, name="billing")
        calls: list[str] = []

        @consumer.handler
        def handler(event: Envelope) -> None:
            calls.append(event.id)
            stack.clock.advance(31)  # past the 30 s function timeout

        stack.add_consumer("billing", handler, event_pattern=ORDERS)
        write_order(stack, "1", Decimal("3"))
        stack.drain()

        assert len(calls) == 1
        assert [f.invocation_error for f in stack.failures] == [
            "Task timed out after 30.00 seconds"
        ]
        with pytest.raises(ConsumerFailed, match="Task timed out"):
            stack.raise_failures()


def test_a_failure_whose_log_line_is_hidden_is_still_reported() -> None:
    with isolated_aws(), OutboxStack() as stack:
        consumer = OutboxConsumer(idempotency_table=stack.names.idempotency_table, name="billing")

        @consumer.handler
        def handler(event: Envelope) -> None:
            raise ValueError("boom")

        stack.add_consumer("billing", handler, max_receive_count=1, event_pattern=ORDERS)
        event = write_order(stack, "1", Decimal("3"))
        logging.disable(logging.CRITICAL)
        try:
            stack.drain()
        finally:
            logging.disable(logging.NOTSET)

        (failure,) = stack.failures
        assert failure.event_id == event.id
        assert "no ERROR log record seen" in failure.reason
        with pytest.raises(ConsumerFailed):
            stack.raise_failures()


def test_isolated_aws_clears_the_shells_log_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOG_LEVEL", "CRITICAL")
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "CRITICAL")
    with isolated_aws(), OutboxStack() as stack:
        assert "LOG_LEVEL" not in os.environ and "POWERTOOLS_LOG_LEVEL" not in os.environ
        consumer = OutboxConsumer(idempotency_table=stack.names.idempotency_table, name="billing")

        @consumer.handler
        def handler(event: Envelope) -> None:
            raise ValueError("boom")

        stack.add_consumer("billing", handler, max_receive_count=1, event_pattern=ORDERS)
        write_order(stack, "1", Decimal("3"))
        stack.drain()

        assert [type(f.exception) for f in stack.failures] == [ValueError]
    assert os.environ["LOG_LEVEL"] == "CRITICAL"


def test_closing_a_stack_puts_back_the_environment_it_set() -> None:
    with isolated_aws():
        os.environ["OUTBOX_TABLE_NAME"] = "before"
        with OutboxStack():
            assert os.environ["OUTBOX_TABLE_NAME"] == "orders"
            assert "OUTBOX_CONSUMER_EVENT_BUS_ARN" in os.environ

        assert os.environ["OUTBOX_TABLE_NAME"] == "before"
        assert "OUTBOX_CONSUMER_EVENT_BUS_ARN" not in os.environ


def test_two_stacks_do_not_collect_each_others_failures() -> None:
    with isolated_aws(), OutboxStack("first") as first, OutboxStack("second") as second:
        for stack, key in ((first, "one"), (second, "two")):
            consumer = OutboxConsumer(idempotency_table=stack.names.idempotency_table, name=key)

            @consumer.handler
            def handler(event: Envelope) -> None:
                raise ValueError("boom")

            stack.add_consumer(key, handler, max_receive_count=1, event_pattern=ORDERS)
        write_order(first, "1", Decimal("3"))
        first.drain()
        second.drain()

        assert [f.consumer for f in first.failures] == ["one"]
        assert second.failures == []


def test_dead_letters_reads_every_message_and_returns_a_poison_body_raw() -> None:
    with isolated_aws(), OutboxStack() as stack:
        queue = stack.add_consumer("billing", lambda event, context: None, event_pattern=ORDERS)
        envelopes = [write_order(stack, str(n), Decimal(n)) for n in range(12)]
        for envelope in envelopes:  # as the queue's redrive would
            stack.sqs.send_message(QueueUrl=queue.dlq_url, MessageBody=envelope.to_json())
        stack.sqs.send_message(QueueUrl=queue.dlq_url, MessageBody="not json")

        letters = queue.dead_letters()

        assert sorted(str(getattr(letter, "id", letter)) for letter in letters) == sorted(
            [e.id for e in envelopes] + ["not json"]
        )
        assert len(queue.dead_letters()) == 13  # read, not consumed
        with pytest.raises(AssertionError, match="not json"):
            queue.dead_events()


@pytest.mark.parametrize(("publish_to", "days"), [("eventbridge", 20), ("sns", 42)])
def test_a_consumer_keeps_event_ids_for_the_window_the_module_derives(
    publish_to: Literal["eventbridge", "sns"],
    days: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "kit_window.py").write_text(
        "import os\n"
        "from dynamodb_outbox import OutboxConsumer\n"
        "consumer = OutboxConsumer(idempotency_table=os.environ['OUTBOX_IDEMPOTENCY_TABLE'])\n"
        "handler = consumer.handler(lambda event: None)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    routing: dict[str, Any] = (
        {"event_pattern": {"source": ["app"]}}
        if publish_to == "eventbridge"
        else {"filter_policy": {"source": ["app"]}}
    )
    with isolated_aws(), OutboxStack(publish_to=publish_to) as stack:
        stack.add_consumer("billing", "kit_window:handler", **routing)

        assert sys.modules["kit_window"].consumer.expires_after_seconds == days * 86_400


@pytest.mark.parametrize(
    ("publish_to", "settings", "message"),
    [
        (
            "eventbridge",
            {},
            'With publish_to = "eventbridge" every consumer needs an event_pattern',
        ),
        (
            "eventbridge",
            {"filter_policy": ORDERS},
            'With publish_to = "eventbridge" every consumer needs an event_pattern',
        ),
        ("sns", {"event_pattern": ORDERS}, 'With publish_to = "sns" every consumer needs a filter'),
        (
            "sns",
            {"event_pattern": ORDERS, "filter_policy": ORDERS},
            "Set either event_pattern .* not both. Both set on: billing.",
        ),
        (
            "eventbridge",
            {"event_pattern": ORDERS, "visibility_timeout_seconds": 179},
            r"at least 6 x its function_timeout_seconds .* Too small for: billing \(179 < 6 x 30\)",
        ),
    ],
    ids=["no-pattern", "policy-on-eventbridge", "pattern-on-sns", "both", "visibility"],
)
def test_the_kit_refuses_a_consumer_the_module_refuses_at_plan(
    publish_to: Literal["eventbridge", "sns"], settings: dict[str, Any], message: str
) -> None:
    with isolated_aws(), OutboxStack(publish_to=publish_to) as stack:
        with pytest.raises(ValueError, match=message):
            stack.add_consumer("billing", lambda event, context: None, **settings)
        assert stack.consumers == {}


def test_the_kit_refuses_a_handler_named_other_than_its_key() -> None:
    with isolated_aws(), OutboxStack() as stack:
        consumer = OutboxConsumer(idempotency_table=stack.names.idempotency_table, name="billing")

        with pytest.raises(
            ConfigurationError, match="named 'billing' in code but OUTBOX_CONSUMER_NAME='invoices'"
        ):
            stack.add_consumer(
                "invoices", consumer.handler(lambda event: None), event_pattern=ORDERS
            )
        stack.add_consumer("billing", consumer.handler(lambda event: None), event_pattern=ORDERS)


def test_a_payload_the_model_refuses_is_reported_without_its_values(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    from pydantic import BaseModel, ValidationError

    class Payment(BaseModel):
        order_id: str
        card_number: int

    secret = "4111-1111-1111-1111"
    with isolated_aws(), OutboxStack() as stack:
        consumer = OutboxConsumer(idempotency_table=stack.names.idempotency_table, name="billing")
        router = Router()
        router.on("OrderPaid", model=Payment)(lambda event, payment: None)
        stack.add_consumer("billing", consumer.handler(router), event_pattern=ORDERS)
        writer = stack.writer()
        paid = writer.new_event("ORDER#1", "OrderPaid", {"order_id": "1", "card_number": secret})
        writer.write_events("ORDER#1", [paid])
        stack.drain()

        failure = stack.failures[0]
        with pytest.raises(ConsumerFailed) as raised:
            stack.raise_failures()
    printed = capsys.readouterr()
    assert "card_number" in failure.reason and "int_parsing" in failure.reason
    assert isinstance(failure.exception, ValidationError)
    assert raised.value.__cause__ is failure.exception
    # stderr is left out: when a stale handler of an earlier test fails
    # ("--- Logging error ---"), Python prints the exception being handled.
    shown = (failure.reason, str(failure.exception), str(raised.value), caplog.text, printed.out)
    for text in shown:
        assert secret not in text


def test_a_consumer_logging_to_a_logger_that_does_not_propagate_still_reports_why() -> None:
    own = logging.getLogger("kit-test-own-logger")
    own.propagate = False
    own.addHandler(logging.NullHandler())
    with isolated_aws(), OutboxStack() as stack:
        consumer = OutboxConsumer(
            idempotency_table=stack.names.idempotency_table, name="billing", logger=own
        )

        @consumer.handler
        def handler(event: Envelope) -> None:
            raise ValueError("boom")

        stack.add_consumer("billing", handler, max_receive_count=1, event_pattern=ORDERS)
        write_order(stack, "1", Decimal("3"))
        stack.drain()

        assert [type(f.exception) for f in stack.failures] == [ValueError]
    assert not any(isinstance(h, FailureLog) for h in own.handlers)  # removed at close
