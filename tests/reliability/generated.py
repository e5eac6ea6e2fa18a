"""The stack the generated-input campaign runs on, and the figures it prints.

One moto for the whole campaign (a table as ``table.tf`` makes it, an
idempotency table, a bus, a standard and a FIFO topic), recording what each
sink accepted: an event counts as published when the emulator answered its
entry with success, which is also what the publisher trusts before deleting.

Behind the bus and each topic are consumer queues of the module's size
(``max_message_size``) with their DLQs: a rule's target, and raw and non-raw
subscriptions, delivered as AWS does (:func:`dynamodb_outbox.local.aws_seams`),
so the campaign sees an event that PutEvents or Publish accepted and the queue
refused (``Stack.seams``) -- on AWS a silent loss.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

from dynamodb_outbox.local import SeamLedger, aws_seams
from dynamodb_outbox.sinks import EventBridgeSink, Sink, SnsSink
from dynamodb_outbox.sizes import QUEUE_MAX_MESSAGE_BYTES
from tests.reliability.pipeline import REGION, aws_environment
from tests.support.moto_tables import create_idempotency_table, create_outbox_table

TABLE = "generated"
#: moto copies every table of a region before each TransactWriteItems (to roll it
#: back): the idempotency table lives in another region, so that the copy stays
#: the size of one example's outbox items.
IDEMPOTENCY_REGION = "us-west-2"
IDEMPOTENCY_TABLE = "generated-idempotency"
BUS = "generated-bus"
ACCOUNT = "123456789012"

#: Records each profile's campaign must reach (checked after it ran).
MIN_RECORDS = {"ci": 2_000, "soak": 100_000, "dev": 0}
#: Hypothesis examples per test and profile; each example is a batch of records.
EXAMPLES = {
    "ci": {"stream": 60, "sweeper": 30, "consumer": 30, "hostile": 10},
    "soak": {"stream": 3_000, "sweeper": 1_000, "consumer": 1_500, "hostile": 1_000},
    "dev": {"stream": 5, "sweeper": 3, "consumer": 3, "hostile": 3},
}


class RecordingEvents:
    """PutEvents on moto; remembers every entry it accepted, as the bus would deliver it."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.accepted: Counter[str] = Counter()
        self.delivered: list[str] = []

    def put_events(self, *, Entries: list[dict[str, Any]]) -> Any:
        response = self.real.put_events(Entries=Entries)
        for entry, answer in zip(Entries, response["Entries"], strict=True):
            if answer.get("ErrorCode"):
                continue
            detail = json.loads(entry["Detail"])
            self.accepted[detail["id"]] += 1
            self.delivered.append(
                json.dumps(
                    {
                        "version": "0",
                        "id": str(uuid.uuid4()),
                        "detail-type": entry["DetailType"],
                        "source": entry["Source"],
                        "account": ACCOUNT,
                        "time": "2026-01-01T00:00:00Z",
                        "region": REGION,
                        "resources": [],
                        "detail": detail,
                    },
                    ensure_ascii=False,
                )
            )
        return response


class RecordingSns:
    """PublishBatch on moto; remembers every message it accepted (raw delivery)."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.accepted: Counter[str] = Counter()
        self.delivered: list[str] = []

    def publish_batch(self, **kwargs: Any) -> Any:
        response = self.real.publish_batch(**kwargs)
        by_id = {entry["Id"]: entry for entry in kwargs["PublishBatchRequestEntries"]}
        for success in response.get("Successful", []):
            message = by_id[success["Id"]]["Message"]
            self.accepted[json.loads(message)["id"]] += 1
            self.delivered.append(message)
        return response


@dataclass
class Stack:
    dynamodb: Any
    events: RecordingEvents
    sns: RecordingSns
    topic_arn: str
    fifo_topic_arn: str
    store: DynamoDBPersistenceLayer
    sqs: Any
    seams: SeamLedger
    #: by publish_to: the consumer queues every published event must reach
    queues: dict[str, list[str]]

    def sink(self, publish_to: str) -> Sink:
        if publish_to == "eventbridge":
            return EventBridgeSink(self.events, BUS)
        if publish_to == "sns":
            return SnsSink(self.sns, self.topic_arn)
        return SnsSink(self.sns, self.fifo_topic_arn)

    def recorder(self, publish_to: str) -> RecordingEvents | RecordingSns:
        return self.events if publish_to == "eventbridge" else self.sns

    def item(self, pk: Any, sk: Any) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.dynamodb.get_item(
            TableName=TABLE, Key={"PK": pk, "SK": sk}, ConsistentRead=True
        ).get("Item")
        return found


def _queue(sqs: Any, name: str, *, fifo: bool, dlq_arn: str | None = None) -> tuple[str, str]:
    attributes = {"MaximumMessageSize": str(QUEUE_MAX_MESSAGE_BYTES)}
    if fifo:
        attributes |= {"FifoQueue": "true", "ContentBasedDeduplication": "false"}
    if dlq_arn is not None:
        attributes["RedrivePolicy"] = json.dumps(
            {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 5}
        )
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return str(url), str(arn)


def _consumer_queue(sqs: Any, name: str, *, fifo: bool) -> tuple[str, str, str]:
    """A consumer queue and its DLQ, as ``consumers.tf`` makes them: (url, arn, DLQ arn)."""
    suffix = ".fifo" if fifo else ""
    _dlq_url, dlq_arn = _queue(sqs, f"{name}-dlq{suffix}", fifo=fifo)
    url, arn = _queue(sqs, f"{name}{suffix}", fifo=fifo, dlq_arn=dlq_arn)
    return url, arn, dlq_arn


def _subscribe(sns: Any, sqs: Any, topic_arn: str, name: str, *, raw: bool) -> str:
    url, arn, dlq_arn = _consumer_queue(sqs, name, fifo=topic_arn.endswith(".fifo"))
    sns.subscribe(
        TopicArn=topic_arn,
        Protocol="sqs",
        Endpoint=arn,
        Attributes={
            "RawMessageDelivery": "true" if raw else "false",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn}),
        },
    )
    return url


@contextmanager
def generated_stack() -> Iterator[Stack]:
    with aws_environment(), aws_seams() as seams:
        session = boto3.Session(region_name=REGION)
        dynamodb = session.client("dynamodb")
        # No stream: records are built by hand, and moto would keep every record
        # in memory and copy them on every transaction.
        create_outbox_table(dynamodb, TABLE, stream=None)
        idempotency = boto3.client("dynamodb", region_name=IDEMPOTENCY_REGION)
        create_idempotency_table(idempotency, IDEMPOTENCY_TABLE)
        events = session.client("events")
        events.create_event_bus(Name=BUS)
        sns = session.client("sns")
        topic = sns.create_topic(Name="generated")["TopicArn"]
        fifo = sns.create_topic(Name="generated.fifo", Attributes={"FifoTopic": "true"})["TopicArn"]
        sqs = session.client("sqs")
        bus_url, bus_queue_arn, bus_dlq_arn = _consumer_queue(sqs, "bus-consumer", fifo=False)
        events.put_rule(Name="everything", EventBusName=BUS, EventPattern='{"version":["0"]}')
        events.put_targets(
            Rule="everything",
            EventBusName=BUS,
            Targets=[{"Id": "q", "Arn": bus_queue_arn, "DeadLetterConfig": {"Arn": bus_dlq_arn}}],
        )
        queues = {
            "eventbridge": [bus_url],
            "sns": [
                _subscribe(sns, sqs, topic, "sns-raw", raw=True),
                _subscribe(sns, sqs, topic, "sns-json", raw=False),
            ],
            "sns_fifo": [
                _subscribe(sns, sqs, fifo, "fifo-raw", raw=True),
                _subscribe(sns, sqs, fifo, "fifo-json", raw=False),
            ],
        }
        yield Stack(
            dynamodb=dynamodb,
            events=RecordingEvents(events),
            sns=RecordingSns(sns),
            topic_arn=topic,
            fifo_topic_arn=fifo,
            store=DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=idempotency),
            sqs=sqs,
            seams=seams,
            queues=queues,
        )


@dataclass
class GeneratedCampaign:
    """What the campaign generated and what became of it; printed by the summary hook."""

    profile: str = ""
    records: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    invariants: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.records.values())

    def to_wire(self) -> dict[str, Any]:
        """The counters as plain data, for an xdist worker to hand to the controller."""
        return {
            "profile": self.profile,
            "records": dict(self.records),
            "outcomes": dict(self.outcomes),
            "invariants": dict(self.invariants),
        }

    def merge(self, wire: dict[str, Any]) -> None:
        self.profile = self.profile or wire["profile"]
        self.records.update(wire["records"])
        self.outcomes.update(wire["outcomes"])
        self.invariants.update(wire["invariants"])

    def lines(self) -> list[str]:
        out = [f"generated-input campaign (profile {self.profile!r}): {self.total:,} records"]
        out += [f"  {name:<44}{count:>10,}" for name, count in sorted(self.records.items())]
        out.append("  outcomes:")
        out += [f"    {name:<42}{count:>10,}" for name, count in sorted(self.outcomes.items())]
        out.append("  invariants checked (all held, or the run failed):")
        out += [f"    {name:<42}{count:>10,}" for name, count in sorted(self.invariants.items())]
        return out


GENERATED = GeneratedCampaign()
