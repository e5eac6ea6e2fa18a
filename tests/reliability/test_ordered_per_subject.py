"""The ordered path (publish_to = "sns_fifo") keeps each subject's events in order, under faults.

1,000 events over 50 subjects, written by interleaved transactions, travel the
whole path in-process: table stream → publisher (local stream mapping) → SNS
FIFO topic → SQS FIFO queue (DLQ after 5 receives) → consumer toolkit (local
SQS mapping), on moto and a virtual clock. On the way:

* PublishBatch answers some entries ``Throttling`` (retried, order held);
* the publisher's process dies after sending and before deleting (the batch
  comes again: events are sent twice);
* the consumer fails one message on its first three deliveries (its group waits);
* the consumer function dies after handling a whole batch (the batch comes again).

Every consumer must see each subject's events in write order once duplicates
are dropped, and every event must take effect exactly once: none lost.

The run costs about 40 s of CPU (moto serialises every stream page and counts
every queued message on every send); ``OUTBOX_ORDERED_EVENTS`` and
``OUTBOX_ORDERED_SUBJECTS`` scale it down for a quicker look.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

from dynamodb_outbox.consumer import OutboxConsumer
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.local import (
    LocalRuntime,
    SqsMapping,
    StreamMapping,
    VirtualClock,
    mapping_config,
    stream_records_follow,
)
from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies
from dynamodb_outbox.sinks import PUBLISH_TO_SNS_FIFO, SnsSink
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from dynamodb_outbox.writer import OutboxWriter
from tests.reliability.pipeline import (
    IDEMPOTENCY_TABLE,
    OUTBOX_FILTER,
    SOURCE,
    TABLE,
    _session,
    aws_environment,
)
from tests.support.moto_tables import create_idempotency_table, create_outbox_table

EVENTS = int(os.environ.get("OUTBOX_ORDERED_EVENTS", "1000"))
SUBJECTS = int(os.environ.get("OUTBOX_ORDERED_SUBJECTS", "50"))
CONSUMERS = ("billing", "shipping")
THROTTLE_PERCENT = 5
PUBLISHER_CRASHES = 3  # the first deletes of that many invocations die
CONSUMER_POISON_DELIVERIES = 3  # below maxReceiveCount: the message is not dead-lettered
CONSUMER_CRASHES = 2  # consumer invocations that die after handling their batch
MAX_RECEIVE_COUNT = 5
STREAM_BATCH_SIZE = 100  # the module's default
FUNCTION_TIMEOUT_SECONDS = 3


class PublisherCrash(Exception):
    """The publisher's process dying between PublishBatch and the delete."""


class ConsumerCrash(Exception):
    """The consumer's process dying after it handled its batch, before answering."""


class ThrottlingSns:
    """The SNS client: some entries answered ``Throttling`` and not forwarded."""

    def __init__(self, real: Any, rnd: random.Random) -> None:
        self.real = real
        self.rnd = rnd
        self.throttled = 0

    def publish_batch(self, *, TopicArn: str, PublishBatchRequestEntries: list[Any]) -> Any:
        failed, forwarded = [], []
        for entry in PublishBatchRequestEntries:
            if self.rnd.randrange(100) < THROTTLE_PERCENT:
                failed.append({"Id": entry["Id"], "Code": "Throttling", "SenderFault": False})
                self.throttled += 1
            else:
                forwarded.append(entry)
        response: dict[str, Any] = {"Successful": [], "Failed": failed}
        if forwarded:
            real = self.real.publish_batch(TopicArn=TopicArn, PublishBatchRequestEntries=forwarded)
            response["Successful"] = real["Successful"]
            response["Failed"] += real.get("Failed", [])
        return response


class CrashingTableClient:
    """The publisher's DynamoDB client: the first deletes die, as the process would."""

    def __init__(self, real: Any, crashes: int) -> None:
        self.real = real
        self.crashes_left = crashes

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def batch_write_item(self, **kwargs: Any) -> Any:
        if self.crashes_left > 0:
            self.crashes_left -= 1
            raise PublisherCrash("injected: died after PublishBatch, before the delete")
        return self.real.batch_write_item(**kwargs)


@dataclass
class Consumer:
    """What one consumer saw (every delivery) and did (every effect), in order."""

    name: str
    poison_id: str
    poison_left: int = CONSUMER_POISON_DELIVERIES
    crashes_left: int = CONSUMER_CRASHES
    deliveries: list[tuple[str, str]] = field(default_factory=list)
    effects: list[tuple[str, str]] = field(default_factory=list)

    def process(self, envelope: Envelope) -> None:
        if envelope.id == self.poison_id and self.poison_left > 0:
            self.poison_left -= 1
            raise RuntimeError("injected: the consumer cannot handle this message yet")
        self.effects.append((envelope.subject, envelope.id))

    def handler(self, dynamodb: Any) -> Any:
        toolkit = OutboxConsumer(
            persistence_store=DynamoDBPersistenceLayer(
                table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb
            ),
            name=self.name,
            # A service of its own: Logger(level=...) sets the process-wide
            # logging.getLogger(service) level, which other tests' "billing"
            # consumers would inherit (and lose their ERROR lines).
            logger=Logger(service=f"ordered-per-subject-{self.name}", level="CRITICAL"),
        )
        handle = toolkit.handler(self.process)

        def invoke(event: dict[str, Any], context: Any) -> Any:
            for record in event["Records"]:
                body = json.loads(record["body"])
                self.deliveries.append((body["subject"], body["id"]))
            response = handle(event, context)  # type: ignore[arg-type]
            if self.crashes_left > 0 and not response["batchItemFailures"]:
                self.crashes_left -= 1
                raise ConsumerCrash("injected: died after handling the batch")
            return response

        return invoke


def in_order_once(seen: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Per subject, the event ids in the order first seen (duplicates dropped)."""
    per_subject: dict[str, list[str]] = {}
    known: set[str] = set()
    for subject, event_id in seen:
        if event_id not in known:
            known.add(event_id)
            per_subject.setdefault(subject, []).append(event_id)
    return per_subject


@dataclass
class Run:
    written: dict[str, list[str]]
    consumers: list[Consumer]
    throttled: int
    publisher_crashes: int
    publisher_invocations: int
    dead_letters: int
    left_in_table: int


def write_interleaved(writer: OutboxWriter, rnd: random.Random) -> dict[str, list[str]]:
    """EVENTS transactions, each an entity and its event, subjects in a shuffled interleaving."""
    order = [n % SUBJECTS for n in range(EVENTS)]
    rnd.shuffle(order)
    written: dict[str, list[str]] = {}
    for number, subject_index in enumerate(order):
        subject = f"ORDER#{subject_index:03d}"
        version = len(written.get(subject, [])) + 1
        entity = {"PK": subject, "SK": f"V#{version:04d}", "number": number}
        event = writer.new_event(entity, "OrderChanged", {"version": version})
        writer.write(entity, [event])
        written.setdefault(subject, []).append(event.id)
    return written


@pytest.fixture(scope="module")
def ordered_run() -> Iterator[Run]:
    rnd = random.Random(16)
    with aws_environment():
        clock = VirtualClock()
        with stream_records_follow(clock):
            yield _run(clock, rnd)


def _run(clock: VirtualClock, rnd: random.Random) -> Run:
    session = _session()
    dynamodb, sqs, sns = (session.client(name) for name in ("dynamodb", "sqs", "sns"))
    streams = session.client("dynamodbstreams")
    stream_arn = str(create_outbox_table(dynamodb, TABLE))
    create_idempotency_table(dynamodb, IDEMPOTENCY_TABLE)
    topic_arn = sns.create_topic(
        Name="orders.fifo",
        Attributes={"FifoTopic": "true", "ContentBasedDeduplication": "false"},
    )["TopicArn"]
    fifo = {"FifoQueue": "true", "ContentBasedDeduplication": "false"}

    def queue_arn(url: str) -> str:
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        return str(attributes["Attributes"]["QueueArn"])

    written = write_interleaved(
        OutboxWriter(TABLE, dynamodb, source=SOURCE, publish_to=PUBLISH_TO_SNS_FIFO), rnd
    )
    all_ids = [event_id for ids in written.values() for event_id in ids]

    runtime = LocalRuntime(clock)
    sns_client = ThrottlingSns(sns, rnd)
    table_client = CrashingTableClient(dynamodb, PUBLISHER_CRASHES)
    sink = SnsSink(sns_client, topic_arn)

    def publisher(event: dict[str, Any], context: Any) -> Any:
        return publish_stream_batch(
            event["Records"],
            PublishDependencies(
                sink=sink,
                table_name=TABLE,
                dynamodb_client=table_client,
                sleep=clock.advance,
                clock=clock.now_datetime,
                table_keys=DEFAULT_TABLE_KEYS,
            ),
            time_left=lambda: context.get_remaining_time_in_millis() / 1000,
        ).response()

    stream = StreamMapping(
        mapping_config(
            stream_arn,
            batch_size=STREAM_BATCH_SIZE,
            filter_patterns=[OUTBOX_FILTER],
            report_batch_item_failures=True,
            bisect_batch_on_function_error=True,
            maximum_retry_attempts=10,
            maximum_record_age_seconds=86_400,
        ),
        publisher,
        streams_client=streams,
        sqs_client=sqs,
        clock=clock,
        function_timeout_seconds=FUNCTION_TIMEOUT_SECONDS,
    )
    runtime.add(stream)

    consumers: list[Consumer] = []
    dlq_urls: list[str] = []
    for name in CONSUMERS:
        dlq_url = sqs.create_queue(QueueName=f"{name}-dlq.fifo", Attributes=fifo)["QueueUrl"]
        url = sqs.create_queue(
            QueueName=f"{name}.fifo",
            Attributes={
                **fifo,
                "VisibilityTimeout": str(6 * FUNCTION_TIMEOUT_SECONDS),
                "RedrivePolicy": json.dumps(
                    {
                        "deadLetterTargetArn": queue_arn(dlq_url),
                        "maxReceiveCount": MAX_RECEIVE_COUNT,
                    }
                ),
            },
        )["QueueUrl"]
        dlq_urls.append(dlq_url)
        sns.subscribe(
            TopicArn=topic_arn,
            Protocol="sqs",
            Endpoint=queue_arn(url),
            Attributes={"RawMessageDelivery": "true"},
        )
        consumer = Consumer(name, poison_id=rnd.choice(all_ids))
        consumers.append(consumer)
        runtime.add(
            SqsMapping(
                mapping_config(queue_arn(url), batch_size=10, report_batch_item_failures=True),
                consumer.handler(dynamodb),
                sqs_client=sqs,
                clock=clock,
                function_timeout_seconds=FUNCTION_TIMEOUT_SECONDS,
            )
        )

    runtime.drain(max_invocations=20_000)

    dead_letters = sum(
        int(
            sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])[
                "Attributes"
            ]["ApproximateNumberOfMessages"]
        )
        for url in dlq_urls
    )
    left = dynamodb.scan(TableName=TABLE, Select="COUNT", ConsistentRead=True)["Count"]
    return Run(
        written=written,
        consumers=consumers,
        throttled=sns_client.throttled,
        publisher_crashes=PUBLISHER_CRASHES - table_client.crashes_left,
        publisher_invocations=stream.stats.invocations,
        dead_letters=dead_letters,
        left_in_table=left - EVENTS,  # the entities stay; outbox items must be gone
    )


def test_the_faults_happened(ordered_run: Run) -> None:
    assert ordered_run.throttled > 0
    assert ordered_run.publisher_crashes == PUBLISHER_CRASHES
    for consumer in ordered_run.consumers:
        assert consumer.poison_left == 0 and consumer.crashes_left == 0, consumer.name
        # redeliveries: the poison message and the crashed batches came again
        assert len(consumer.deliveries) > EVENTS, consumer.name


def test_every_consumer_sees_each_subjects_events_in_write_order(ordered_run: Run) -> None:
    assert len(ordered_run.written) == SUBJECTS
    for consumer in ordered_run.consumers:
        assert in_order_once(consumer.deliveries) == ordered_run.written, consumer.name


def test_every_event_takes_effect_exactly_once_in_write_order(ordered_run: Run) -> None:
    for consumer in ordered_run.consumers:
        assert len(consumer.effects) == EVENTS, consumer.name
        assert in_order_once(consumer.effects) == ordered_run.written, consumer.name


def test_nothing_is_left_behind(ordered_run: Run) -> None:
    assert ordered_run.dead_letters == 0
    assert ordered_run.left_in_table == 0
