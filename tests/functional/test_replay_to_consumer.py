"""``outbox-ops replay`` on moto: an archived window replayed to one consumer's rule.

The stack is the module's shape in miniature: a bus with an archive named after
the stack, two consumers (``audit``, ``billing``) each with a rule
``orders-<key>-consumer`` sending to its queue, and the reference consumer's
handler (toolkit + ledger) draining each queue. The ledger counts every run of
the consumer's effect, so ``times_processed`` shows what a replay applied.

moto (5.2.5) replays the WHOLE archive to EVERY rule of the bus: it ignores the
window and ``Destination.FilterArns``. So here the other consumer receives the
replayed events too, which real EventBridge would not send it: what it does with
them (nothing) is the toolkit's second line of defence, tested for free. What
AWS does with the window and the filter is checked on the request we send.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from botocore.stub import Stubber

from dynamodb_outbox.consumer import OutboxConsumer
from dynamodb_outbox.ledger import read_ledger
from dynamodb_outbox.ops import main
from dynamodb_outbox.reference_consumer import build_handler
from dynamodb_outbox.sender_checks import ExpectedSender
from dynamodb_outbox.sinks import EventBridgeSink, OutboundEvent
from tests.factories import ACCOUNT_ID, REGION, SOURCE, make_envelope
from tests.functional.consumer_fixtures import envelopes, sqs_record
from tests.functional.outbox_helpers import ulid_at
from tests.support.lambda_context import FakeLambdaContext
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table

NAME = "orders"
CONSUMERS = ("audit", "billing")
BUS_ARN = f"arn:aws:events:{REGION}:{ACCOUNT_ID}:event-bus/{NAME}"
ARCHIVE_ARN = f"arn:aws:events:{REGION}:{ACCOUNT_ID}:archive/{NAME}"


@dataclass
class Run:
    code: int
    out: str
    err: str


@dataclass
class Stack:
    events: Any
    sqs: Any
    dynamodb: Any
    queue_urls: dict[str, str]
    handlers: dict[str, Callable[[dict[str, Any], Any], Any]]
    #: Every body each consumer's queue delivered, in order.
    delivered: dict[str, list[str]]

    def publish(self, count: int) -> list[str]:
        """``count`` events put on the bus the way the publisher puts them."""
        batch = envelopes(count)
        sink = EventBridgeSink(self.events, NAME)
        assert all(result.ok for result in sink.send([OutboundEvent.of(e) for e in batch]))
        return [e.id for e in batch]

    def drain(self, key: str) -> list[str]:
        """Run the consumer on its queue until empty; the bodies it was handed."""
        bodies: list[str] = []
        while messages := self.sqs.receive_message(
            QueueUrl=self.queue_urls[key], MaxNumberOfMessages=10
        ).get("Messages", []):
            self.consume(key, [m["Body"] for m in messages])
            for message in messages:
                self.sqs.delete_message(
                    QueueUrl=self.queue_urls[key], ReceiptHandle=message["ReceiptHandle"]
                )
            bodies.extend(m["Body"] for m in messages)
        self.delivered[key].extend(bodies)
        return bodies

    def consume(self, key: str, bodies: list[str]) -> None:
        records = [sqs_record(body, message_id=f"m{n}") for n, body in enumerate(bodies)]
        response = self.handlers[key]({"Records": records}, FakeLambdaContext())
        assert response == {"batchItemFailures": []}

    def ledger(self, key: str) -> dict[str, int]:
        return {
            entry["event_id"]: entry["times_processed"]
            for entry in read_ledger(self.dynamodb, IDEMPOTENCY_TABLE, key)
        }


@pytest.fixture
def stack(aws: None) -> Iterator[Stack]:
    events = boto3.client("events", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    create_idempotency_table(dynamodb)
    events.create_event_bus(Name=NAME)
    events.create_archive(ArchiveName=NAME, EventSourceArn=BUS_ARN, RetentionDays=7)
    queue_urls: dict[str, str] = {}
    handlers: dict[str, Any] = {}
    for key in CONSUMERS:
        name = f"{NAME}-{key}-consumer"
        queue_urls[key] = sqs.create_queue(QueueName=name)["QueueUrl"]
        events.put_rule(Name=name, EventBusName=NAME, EventPattern=json.dumps({"source": [SOURCE]}))
        events.put_targets(
            Rule=name,
            EventBusName=NAME,
            Targets=[{"Id": "consumer-queue", "Arn": f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{name}"}],
        )
        consumer = OutboxConsumer(
            persistence_store=DynamoDBPersistenceLayer(
                table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb
            ),
            name=key,
            # What the module sets on its consumers: only this bus's replays count.
            expected_sender=ExpectedSender.eventbridge(BUS_ARN),
        )
        handlers[key] = build_handler(consumer, dynamodb, IDEMPOTENCY_TABLE)
    yield Stack(events, sqs, dynamodb, queue_urls, handlers, {key: [] for key in CONSUMERS})


def window() -> tuple[str, str]:
    now = datetime.now(UTC)
    return (now - timedelta(hours=1)).isoformat(), (now + timedelta(hours=1)).isoformat()


@pytest.fixture
def replay(capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    start, end = window()  # one window per test: the same command is the same replay

    def run(*extra: str, factory: Callable[[str], Any] | None = None) -> Run:
        argv = ["replay", "--name", NAME, "--from", start, "--to", end, "--poll-seconds", "0"]
        code = main([*argv, *extra], client_factory=factory)
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run


# ------------------------------------------------------------------ on the emulator


def test_replay_processes_only_what_the_consumer_missed_and_applies_nothing_twice(
    stack: Stack, replay: Callable[..., Run]
) -> None:
    """GIVEN audit lost one event and billing processed all; WHEN replaying to audit."""
    seen = stack.publish(3)
    stack.drain("audit")
    stack.drain("billing")
    (lost,) = stack.publish(1)
    stack.sqs.purge_queue(QueueUrl=stack.queue_urls["audit"])  # audit never sees it
    stack.drain("billing")

    run = replay("--consumer", "audit")

    assert run.code == 0, run
    replayed = stack.drain("audit")
    assert len(replayed) == 4
    assert all(json.loads(body)["replay-name"].startswith("replay.audit.") for body in replayed)
    # The lost event took effect once; the others were skipped as duplicates.
    assert stack.ledger("audit") == {event_id: 1 for event_id in [*seen, lost]}
    # moto sent the replay to billing's rule too: absorbed the same way.
    assert len(stack.drain("billing")) == 4
    assert stack.ledger("billing") == {event_id: 1 for event_id in [*seen, lost]}


def test_reprocess_applies_each_event_once_more_in_the_named_consumer_only(
    stack: Stack, replay: Callable[..., Run]
) -> None:
    ids = stack.publish(3)
    for key in CONSUMERS:
        stack.drain(key)

    run = replay("--consumer", "audit", "--reprocess")

    assert run.code == 0, run
    replayed = stack.drain("audit")
    assert stack.ledger("audit") == {event_id: 2 for event_id in ids}
    stack.drain("billing")
    assert stack.ledger("billing") == {event_id: 1 for event_id in ids}

    # SQS redelivers a replayed message (at least once): it is not applied again.
    stack.consume("audit", replayed)
    assert stack.ledger("audit") == {event_id: 2 for event_id in ids}


def test_rerunning_the_same_replay_follows_the_first_and_starts_nothing(
    stack: Stack, replay: Callable[..., Run]
) -> None:
    ids = stack.publish(2)
    for key in CONSUMERS:
        stack.drain(key)
    first = replay("--consumer", "audit", "--reprocess")
    assert first.code == 0, first
    stack.drain("audit")

    again = replay("--consumer", "audit", "--reprocess")

    assert again.code == 0, again
    assert "already started (COMPLETED): following it, starting nothing" in again.out
    assert stack.drain("audit") == []
    assert stack.ledger("audit") == {event_id: 2 for event_id in ids}

    # A new attempt is a new replay, asked for on purpose: one more run each.
    third = replay("--consumer", "audit", "--reprocess", "--attempt", "2")
    assert third.code == 0, third
    stack.drain("audit")
    assert stack.ledger("audit") == {event_id: 3 for event_id in ids}


def test_the_replay_asks_aws_for_the_window_and_the_consumers_rule_only(
    stack: Stack, replay: Callable[..., Run]
) -> None:
    run = replay("--consumer", "billing", "--json")

    assert run.code == 0, run
    report = json.loads(run.out)
    described = stack.events.describe_replay(ReplayName=report["replay_name"])
    assert described["EventSourceArn"] == ARCHIVE_ARN
    assert described["Destination"] == {
        "Arn": BUS_ARN,
        "FilterArns": [f"arn:aws:events:{REGION}:{ACCOUNT_ID}:rule/{NAME}/{NAME}-billing-consumer"],
    }
    assert report["state"] == "COMPLETED"
    assert report["reprocess"] is False


def test_dry_run_starts_nothing(stack: Stack, replay: Callable[..., Run]) -> None:
    stack.publish(1)

    run = replay("--consumer", "audit", "--dry-run")

    assert run.code == 0, run
    assert "dry run: would start it" in run.out
    assert stack.events.list_replays()["Replays"] == []


def test_unknown_consumer_is_one_line_naming_the_rule(
    stack: Stack, replay: Callable[..., Run]
) -> None:
    run = replay("--consumer", "shipping")

    assert run.code == 2, run
    assert run.err.strip().splitlines() == [
        f"outbox-ops: error: --consumer shipping: no rule {NAME}-shipping-consumer on bus "
        f"{BUS_ARN} (is it a consumer key of this stack, with publish_to = eventbridge?)"
    ]


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        ("2026-12-01T10:00Z", "2026-12-01T09:00Z", "--from (2026-12-01T10:00:00+00:00) must be"),
        ("2026-12-01T08:00", "2026-12-01T09:00Z", "--from needs a time zone"),
        ("yesterday", "2026-12-01T09:00Z", "--from must be an ISO 8601 time"),
    ],
)
def test_a_bad_window_is_refused_before_any_call(
    capsys: pytest.CaptureFixture[str], start: str, end: str, message: str
) -> None:
    def no_aws(service: str) -> Any:
        raise AssertionError(f"no AWS call expected, got a {service} client")

    argv = ["replay", "--name", NAME, "--consumer", "audit", "--from", start, "--to", end]
    code = main([*argv, "--region", REGION], client_factory=no_aws)

    assert code == 2
    assert message in capsys.readouterr().err


# ------------------------------------------------------- following a replay (stubbed)

START = datetime(2026, 12, 1, 8, tzinfo=UTC)
END = datetime(2026, 12, 1, 10, tzinfo=UTC)
RULE_ARN = f"arn:aws:events:{REGION}:{ACCOUNT_ID}:rule/{NAME}/{NAME}-audit-consumer"


def stubbed_replay(states: list[tuple[str, datetime | None]]) -> tuple[Any, str]:
    """An events client answering one replay's life: not found, started, then ``states``."""
    from dynamodb_outbox.replays import replay_name

    client = boto3.client("events", region_name=REGION)
    stub = Stubber(client)
    name = replay_name(
        "audit",
        archive_arn=ARCHIVE_ARN,
        rule_arn=RULE_ARN,
        start=START.isoformat(),
        end=END.isoformat(),
        reprocess=False,
    )
    stub.add_response(
        "describe_archive",
        {"ArchiveArn": ARCHIVE_ARN, "EventSourceArn": BUS_ARN, "State": "ENABLED"},
        {"ArchiveName": NAME},
    )
    stub.add_response(
        "describe_rule",
        {"Name": f"{NAME}-audit-consumer", "Arn": RULE_ARN},
        {"Name": f"{NAME}-audit-consumer", "EventBusName": BUS_ARN},
    )
    stub.add_client_error(
        "describe_replay", "ResourceNotFoundException", expected_params={"ReplayName": name}
    )
    stub.add_response(
        "start_replay",
        {"State": "STARTING"},
        {
            "ReplayName": name,
            "Description": "outbox-ops replay",
            "EventSourceArn": ARCHIVE_ARN,
            "EventStartTime": START,
            "EventEndTime": END,
            "Destination": {"Arn": BUS_ARN, "FilterArns": [RULE_ARN]},
        },
    )
    for state, last in states:
        answer: dict[str, Any] = {"ReplayName": name, "State": state}
        if last is not None:
            answer["EventLastReplayedTime"] = last
        if state == "FAILED":
            answer["StateReason"] = "rule deleted"
        stub.add_response("describe_replay", answer, {"ReplayName": name})
    stub.activate()
    return client, name


def run_stubbed(client: Any, capsys: pytest.CaptureFixture[str]) -> Run:
    argv = ["replay", "--name", NAME, "--consumer", "audit", "--poll-seconds", "0"]
    argv += ["--from", START.isoformat(), "--to", END.isoformat()]
    code = main(argv, client_factory=lambda service: client, now=lambda: END + timedelta(days=1))
    captured = capsys.readouterr()
    return Run(code, captured.out, captured.err)


def test_replay_is_followed_to_its_end_with_progress(
    capsys: pytest.CaptureFixture[str], aws_env: None
) -> None:
    client, name = stubbed_replay(
        [
            ("STARTING", None),
            ("RUNNING", START + timedelta(minutes=30)),
            ("RUNNING", START + timedelta(minutes=90)),
            ("COMPLETED", END),
        ]
    )

    run = run_stubbed(client, capsys)

    assert run.code == 0, run
    assert run.err.splitlines() == [
        f"replay {name}: STARTING",
        f"replay {name}: RUNNING, events up to 2026-12-01T08:30:00Z (25% of the window)",
        f"replay {name}: RUNNING, events up to 2026-12-01T09:30:00Z (75% of the window)",
        f"replay {name}: COMPLETED, events up to 2026-12-01T10:00:00Z (100% of the window)",
    ]
    assert run.out.splitlines()[-1] == "  COMPLETED"


def test_a_failed_replay_exits_1_and_says_how_to_start_another(
    capsys: pytest.CaptureFixture[str], aws_env: None
) -> None:
    client, name = stubbed_replay([("STARTING", None), ("FAILED", None)])

    run = run_stubbed(client, capsys)

    assert run.code == 1
    assert run.err.splitlines()[-1] == (
        f"outbox-ops: error: replay {name} ended FAILED: rule deleted; --attempt 2 starts a new one"
    )


def test_a_replayed_event_older_than_the_idempotency_window_is_not_run_by_accident(
    stack: Stack, replay: Callable[..., Run]
) -> None:
    """Its record may have expired: without --reprocess it is skipped, never run twice."""
    # audit keeps its records one hour (the module keeps them as long as the archive).
    consumer = OutboxConsumer(
        persistence_store=DynamoDBPersistenceLayer(
            table_name=IDEMPOTENCY_TABLE, boto3_client=stack.dynamodb
        ),
        name="audit",
        expires_after_seconds=3600,
        expected_sender=ExpectedSender.eventbridge(BUS_ARN),
    )
    stack.handlers["audit"] = build_handler(consumer, stack.dynamodb, IDEMPOTENCY_TABLE)
    old = make_envelope(id=ulid_at(datetime.now(UTC) - timedelta(hours=2)))
    young = make_envelope()
    sink = EventBridgeSink(stack.events, NAME)
    assert all(result.ok for result in sink.send([OutboundEvent.of(old), OutboundEvent.of(young)]))
    stack.sqs.purge_queue(QueueUrl=stack.queue_urls["audit"])  # both lost

    assert replay("--consumer", "audit").code == 0
    stack.drain("audit")
    assert stack.ledger("audit") == {young.id: 1}

    assert replay("--consumer", "audit", "--reprocess").code == 0
    stack.drain("audit")
    assert stack.ledger("audit") == {old.id: 1, young.id: 2}
