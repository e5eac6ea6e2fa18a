"""Forged events refused by the consumer: each path a forger could take, on moto.

The reference consumer the module deploys (toolkit + ledger), configured from
the environment Terraform gives it (OUTBOX_CONSUMER_TRANSPORT and the bus or topic).
The ledger counts every run of the effect, so ``times_processed`` shows what a
forgery would have applied. See docs/threat-model.md for the table these rows
pin, and dynamodb_outbox.sender_checks for the checks.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dynamodb_outbox import reference_consumer
from dynamodb_outbox.consumer._processing import METRIC_FAILED, METRIC_UNTRUSTED
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.ledger import read_ledger
from dynamodb_outbox.sender_checks import (
    ANY_SENDER,
    ExpectedSender,
    UntrustedSender,
    expected_sender_from_environment,
    read_body,
)
from dynamodb_outbox.settings import (
    CONSUMER_SENDER_ENVIRONMENT,
    ENV_PARTITION_KEY,
    ENV_PUBLISH_TO,
    ENV_SORT_KEY,
    ENV_TABLE_NAME,
    ENV_TOPIC_ARN,
    ConfigurationError,
)
from dynamodb_outbox.sinks import rules_for
from dynamodb_outbox.writer import OutboxWriter
from tests.factories import ACCOUNT_ID, REGION, make_envelope
from tests.functional.consumer_fixtures import (
    eventbridge_body,
    failure_ids,
    sns_notification_body,
    sns_raw_body,
    sqs_event,
    sqs_record,
)
from tests.support.lambda_context import FakeLambdaContext
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table

CONSUMER = "audit"
BUS_ARN = f"arn:aws:events:{REGION}:{ACCOUNT_ID}:event-bus/orders"
TOPIC_ARN = f"arn:aws:sns:{REGION}:{ACCOUNT_ID}:outbox"
FOREIGN_ACCOUNT = "999999999999"
REPROCESS = f"reprocess.{CONSUMER}.0123456789abcdef"


# --------------------------------------------------------------------------- bodies


def replayed(body: str, name: str = REPROCESS) -> str:
    """``body`` with the top-level ``replay-name`` EventBridge adds to a replayed event."""
    return json.dumps({**json.loads(body), "replay-name": name})


def with_fields(body: str, **fields: str) -> str:
    data = json.loads(body)
    data.update({name.replace("_", "-"): value for name, value in fields.items()})
    return json.dumps(data)


def notification_from(envelope: Envelope, topic_arn: str) -> str:
    return json.dumps({**json.loads(sns_notification_body(envelope)), "TopicArn": topic_arn})


# --------------------------------------------------------------------------- the deployed consumer


@pytest.fixture
def deployed(dynamodb_client: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The reference consumer's table and base environment (no sender yet)."""
    create_idempotency_table(dynamodb_client)
    monkeypatch.setenv("OUTBOX_IDEMPOTENCY_TABLE", IDEMPOTENCY_TABLE)
    monkeypatch.setenv("OUTBOX_CONSUMER_NAME", CONSUMER)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "OutboxTests")
    for name in (*CONSUMER_SENDER_ENVIRONMENT, ENV_PUBLISH_TO, ENV_TOPIC_ARN):
        monkeypatch.delenv(name, raising=False)
    return dynamodb_client


@pytest.fixture
def on_bus(deployed: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """As the module deploys it with publish_to = "eventbridge"."""
    monkeypatch.setenv("OUTBOX_CONSUMER_TRANSPORT", "eventbridge")
    monkeypatch.setenv("OUTBOX_CONSUMER_EVENT_BUS_ARN", BUS_ARN)
    return deployed


@pytest.fixture
def on_topic(deployed: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """As the module deploys it with publish_to = "sns"."""
    monkeypatch.setenv("OUTBOX_CONSUMER_TRANSPORT", "sns")
    monkeypatch.setenv("OUTBOX_CONSUMER_TOPIC_ARN", TOPIC_ARN)
    return deployed


def deliver(*bodies: str) -> list[str]:
    """One invocation on ``bodies``; the message ids it failed."""
    records = [sqs_record(body, message_id=f"m{n}") for n, body in enumerate(bodies)]
    response = reference_consumer.handler(sqs_event(records), FakeLambdaContext())  # type: ignore[arg-type]
    return failure_ids(response)


def ledger(client: Any) -> dict[str, int]:
    return {
        entry["event_id"]: entry["times_processed"]
        for entry in read_ledger(client, IDEMPOTENCY_TABLE, CONSUMER)
    }


def metrics(capsys: pytest.CaptureFixture[str]) -> dict[str, float]:
    """The counts of the last EMF document the consumer printed."""
    documents = [
        json.loads(line)
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("{") and '"_aws"' in line
    ]
    return {name: documents[-1][name][0] for name in (METRIC_FAILED, METRIC_UNTRUSTED)}


# --------------------------------------------------------------------------- EventBridge path


def test_a_forged_raw_envelope_with_a_reprocess_name_is_refused_and_applies_nothing_again(
    on_bus: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's reproduction: without the check this made times_processed 2."""
    # GIVEN an event the consumer already processed from its bus
    event = make_envelope()
    assert deliver(eventbridge_body(event)) == []
    # WHEN someone sends its envelope with a top-level reprocess replay name
    failed = deliver(replayed(sns_raw_body(event)))
    # THEN the message fails alone, counted as untrusted, and nothing ran again
    assert failed == ["m0"]
    assert metrics(capsys) == {METRIC_FAILED: 1.0, METRIC_UNTRUSTED: 1.0}
    assert ledger(on_bus) == {event.id: 1}


@pytest.mark.parametrize(
    ("path", "forge"),
    [
        ("raw envelope", lambda e: sns_raw_body(e)),
        ("SNS notification", lambda e: sns_notification_body(e)),
        ("foreign account", lambda e: with_fields(eventbridge_body(e), account=FOREIGN_ACCOUNT)),
        ("foreign region", lambda e: with_fields(eventbridge_body(e), region="eu-north-1")),
        ("foreign source", lambda e: with_fields(eventbridge_body(e), source="someone.else")),
        ("no account", lambda e: json.dumps({**json.loads(eventbridge_body(e)), "account": None})),
        (
            "forged replay from a foreign account",
            lambda e: replayed(with_fields(eventbridge_body(e), account=FOREIGN_ACCOUNT)),
        ),
    ],
)
def test_the_bus_consumer_refuses_what_its_bus_cannot_have_delivered(
    on_bus: Any, capsys: pytest.CaptureFixture[str], path: str, forge: Any
) -> None:
    event = make_envelope()
    assert deliver(forge(event)) == ["m0"], path
    assert metrics(capsys)[METRIC_UNTRUSTED] == 1.0
    assert ledger(on_bus) == {}


def test_a_genuine_replay_from_the_bus_still_reprocesses_in_the_consumer_it_names(
    on_bus: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    event = make_envelope()
    assert deliver(eventbridge_body(event)) == []
    assert deliver(replayed(eventbridge_body(event))) == []
    assert ledger(on_bus) == {event.id: 2}
    assert metrics(capsys)[METRIC_UNTRUSTED] == 0.0


def test_a_bus_consumer_that_writes_to_another_outbox_on_sns_checks_its_bus_and_writes_to_sns(
    on_bus: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handler that also writes outbox events has writer_environment merged in,
    here of outbox B on SNS FIFO (with its publisher's topic, too): the names
    must not collide with what it expects to receive (outbox A's bus)."""
    # GIVEN outbox B's writer (and publisher) environment merged into the consumer's
    writer_b = {
        ENV_TABLE_NAME: "outbox-b",
        ENV_PARTITION_KEY: "PK",
        ENV_SORT_KEY: "SK",
        ENV_PUBLISH_TO: "sns_fifo",
        ENV_TOPIC_ARN: f"arn:aws:sns:{REGION}:{ACCOUNT_ID}:outbox-b.fifo",
    }
    for name, value in writer_b.items():
        monkeypatch.setenv(name, value)
    # WHEN outbox A's bus delivers an event
    event = make_envelope()
    # THEN the consumer still expects, and takes, outbox A's bus events only
    assert expected_sender_from_environment() == ExpectedSender.eventbridge(BUS_ARN)
    assert deliver(eventbridge_body(event)) == []
    assert deliver(sns_raw_body(make_envelope())) == ["m0"]
    assert ledger(on_bus) == {event.id: 1}
    # AND its writer writes to outbox B with SNS FIFO's limits
    writer = OutboxWriter.from_environment(client=on_bus)
    assert (writer.table_name, writer.sink_rules) == ("outbox-b", rules_for("sns_fifo"))


# --------------------------------------------------------------------------- SNS path


def test_the_topic_consumer_takes_raw_deliveries_and_notifications_of_its_topic(
    on_topic: Any,
) -> None:
    raw, notified = make_envelope(), make_envelope()
    assert deliver(sns_raw_body(raw), notification_from(notified, TOPIC_ARN)) == []
    assert ledger(on_topic) == {raw.id: 1, notified.id: 1}


@pytest.mark.parametrize(
    ("path", "forge"),
    [
        ("raw envelope with a replay name", lambda e: replayed(sns_raw_body(e))),
        ("EventBridge event", lambda e: eventbridge_body(e)),
        (
            "EventBridge replay",
            lambda e: replayed(eventbridge_body(e)),
        ),
        (
            "notification of another topic",
            lambda e: notification_from(e, f"arn:aws:sns:{REGION}:{FOREIGN_ACCOUNT}:outbox"),
        ),
    ],
)
def test_the_topic_consumer_refuses_what_its_topic_cannot_have_delivered(
    on_topic: Any, capsys: pytest.CaptureFixture[str], path: str, forge: Any
) -> None:
    # GIVEN the event was processed once through the topic
    event = make_envelope()
    assert deliver(sns_raw_body(event)) == []
    # WHEN a forged delivery of it arrives
    assert deliver(forge(event)) == ["m0"], path
    # THEN it is refused and applied no second time
    assert metrics(capsys)[METRIC_UNTRUSTED] == 1.0
    assert ledger(on_topic) == {event.id: 1}


# --------------------------------------------------------------------------- not configured


def test_an_unconfigured_consumer_never_reprocesses_on_a_replay_name(
    deployed: Any,
) -> None:
    event = make_envelope()
    assert deliver(eventbridge_body(event)) == []
    assert deliver(replayed(eventbridge_body(event))) == []  # deduplicated, not rerun
    assert deliver(replayed(sns_raw_body(event))) == ["m0"]  # no replay outside EventBridge
    assert ledger(deployed) == {event.id: 1}


# --------------------------------------------------------------------------- configuration


def test_the_expected_sender_comes_from_the_module_environment() -> None:
    assert expected_sender_from_environment({}) is ANY_SENDER
    bus = expected_sender_from_environment(
        {"OUTBOX_CONSUMER_TRANSPORT": "eventbridge", "OUTBOX_CONSUMER_EVENT_BUS_ARN": BUS_ARN}
    )
    assert (bus.transport, bus.account, bus.region) == ("eventbridge", ACCOUNT_ID, REGION)
    topic = expected_sender_from_environment(
        {"OUTBOX_CONSUMER_TRANSPORT": "sns_fifo", "OUTBOX_CONSUMER_TOPIC_ARN": TOPIC_ARN + ".fifo"}
    )
    assert (topic.transport, topic.arn) == ("sns", TOPIC_ARN + ".fifo")
    forwarded = expected_sender_from_environment(
        {
            "OUTBOX_CONSUMER_TRANSPORT": "eventbridge",
            "OUTBOX_CONSUMER_EVENT_BUS_ARN": BUS_ARN,
            "OUTBOX_CONSUMER_FORWARDED_FROM_REGIONS": "ap-south-1, us-west-2,",
        }
    )
    assert (forwarded.region, forwarded.forwarded_from) == (REGION, ("ap-south-1", "us-west-2"))


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"OUTBOX_CONSUMER_TRANSPORT": "eventbridge"}, "OUTBOX_CONSUMER_EVENT_BUS_ARN"),
        (
            {"OUTBOX_CONSUMER_TRANSPORT": "eventbridge", "OUTBOX_CONSUMER_EVENT_BUS_ARN": "orders"},
            "OUTBOX_CONSUMER_EVENT_BUS_ARN",
        ),
        (
            {"OUTBOX_CONSUMER_TRANSPORT": "sns", "OUTBOX_CONSUMER_TOPIC_ARN": BUS_ARN},
            "OUTBOX_CONSUMER_TOPIC_ARN",
        ),
        ({"OUTBOX_CONSUMER_TRANSPORT": "kinesis"}, "OUTBOX_CONSUMER_TRANSPORT"),
        (
            {
                "OUTBOX_CONSUMER_TRANSPORT": "eventbridge",
                "OUTBOX_CONSUMER_EVENT_BUS_ARN": BUS_ARN,
                "OUTBOX_CONSUMER_FORWARDED_FROM_REGIONS": REGION,  # its own region
            },
            "OUTBOX_CONSUMER_FORWARDED_FROM_REGIONS",
        ),
        (
            {
                "OUTBOX_CONSUMER_TRANSPORT": "eventbridge",
                "OUTBOX_CONSUMER_EVENT_BUS_ARN": BUS_ARN,
                "OUTBOX_CONSUMER_FORWARDED_FROM_REGIONS": "US-EAST-1",
            },
            "OUTBOX_CONSUMER_FORWARDED_FROM_REGIONS",
        ),
    ],
)
def test_a_half_configured_sender_is_a_configuration_error_naming_the_variable(
    environ: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigurationError, match=named):
        expected_sender_from_environment(environ)


def test_read_body_reports_a_replay_name_as_checked_only_from_the_expected_bus() -> None:
    body = replayed(eventbridge_body(make_envelope()))
    checked = read_body(body, ExpectedSender.eventbridge(BUS_ARN))
    unchecked = read_body(body)
    assert (checked.replay_name, checked.replay_checked) == (REPROCESS, True)
    assert (unchecked.replay_name, unchecked.replay_checked) == (REPROCESS, False)
    with pytest.raises(UntrustedSender):
        read_body(with_fields(body, **{"replay_name": ""}), ExpectedSender.eventbridge(BUS_ARN))
