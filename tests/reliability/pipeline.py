"""The whole outbox on moto in-process, driven by the local runtime, with faults injected.

One :class:`Pipeline` is one deployment as the module builds it, without
Terraform: an outbox table (stream NEW_IMAGE, sparse ``outbox-pending`` index),
the publisher's stream mapping with the module's defaults (TRIM_HORIZON, the
INSERT + ``OUTBOX#`` filter, ReportBatchItemFailures, bisect, 10 retries,
record age 86400 s, an on-failure queue), an EventBridge bus whose rule targets
the consumer queue (DLQ, maxReceiveCount 5, the target's DLQ too, both at the
module's max_message_size), and the reference consumer behind an SQS mapping
(batch 10, ReportBatchItemFailures). The bus delivers to the queue as AWS does
(:func:`dynamodb_outbox.local.aws_seams`): after PutEvents, to the DLQ when the
queue refuses, dropped and counted in ``Pipeline.seams`` when the DLQ does too.

Faults are injected only through what the public plain functions take: the
events client behind :class:`EventBridgeSink`, the DynamoDB client given to
:func:`publish_stream_batch` / :func:`sweep`, and the DynamoDB client given to
the reference consumer's :func:`build_handler`. Nothing in ``lambda/`` changes.
"""

from __future__ import annotations

import contextvars
import functools
import json
import os
import random
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import boto3
import jsonpath_ng.ext
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from moto import mock_aws

from dynamodb_outbox.consumer import OutboxConsumer
from dynamodb_outbox.local import (
    LocalRuntime,
    SeamLedger,
    SqsMapping,
    StreamMapping,
    VirtualClock,
    aws_seams,
    mapping_config,
    stream_records_follow,
)
from dynamodb_outbox.outbox_item import (
    ATTR_PENDING_SHARD,
    ATTR_STATUS,
    OUTBOX_SK_PREFIX,
    STATUS_QUARANTINED,
)
from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies
from dynamodb_outbox.reference_consumer import build_handler
from dynamodb_outbox.sinks import EventBridgeSink
from dynamodb_outbox.sizes import QUEUE_MAX_MESSAGE_BYTES
from dynamodb_outbox.sweeper import SweepResult, sweep
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from tests.support.aws_errors import client_error
from tests.support.module_windows import default_window
from tests.support.moto_tables import PENDING_INDEX, create_idempotency_table, create_outbox_table

REGION = "eu-west-1"
TABLE = "orders"
IDEMPOTENCY_TABLE = "orders-idempotency"
BUS = "orders-bus"
SOURCE = "app.orders"
CONSUMER = "orders-consumer"
FUNCTION_TIMEOUT_SECONDS = 3
#: The publisher's (the module's default is 60 s; shorter keeps retries brief).
PUBLISHER_TIMEOUT_SECONDS = 3
#: The module's default: 6 x the consumer function's timeout.
CONSUMER_VISIBILITY_SECONDS = 6 * FUNCTION_TIMEOUT_SECONDS
MAX_RECEIVE_COUNT = 5
STREAM_MAX_RETRIES = 10
STREAM_MAX_RECORD_AGE = 86_400
OUTBOX_FILTER = {
    "eventName": ["INSERT"],
    "dynamodb": {"Keys": {"SK": {"S": [{"prefix": OUTBOX_SK_PREFIX}]}}},
}
SWEEPER_MIN_AGE_SECONDS = 300
#: What Pipeline.live_change changes, in turn.
LIVE_CHANGES = ("consumer batch size", "publishing paused", "publishing resumed")
CONSUMER_BATCH_SIZES = (3, 1, 10)
STREAM_BATCH_SIZES = (7, 2, 100)

# ------------------------------------------------------------------------ faults

#: Every fault the campaign can inject, by the name the summary prints.
FAULT_KINDS = (
    "put_events_raises",  # the call fails before anything is sent
    "put_events_lost_reply",  # the events went out, the reply was lost (raises after)
    "entry_throttled",  # per-entry ThrottlingException
    "entry_internal_failure",  # per-entry InternalFailure
    "entry_rejected",  # per-entry MalformedDetail: quarantined (a good event parked)
    "bus_duplicate",  # the bus delivers an event twice to the queue
    "quarantine_write_fails",  # UpdateItem of a poison item throttled
    "batch_write_raises",  # BatchWriteItem (delete) raises
    "batch_write_unprocessed",  # BatchWriteItem leaves every delete unprocessed
    "publisher_crash",  # the process dies between PutEvents and the delete
    "consumer_exception",  # the consumer's effect raises (per event, first k runs)
    "sweeper_interleaved",  # a sweep (min age 0) runs between PutEvents and the delete
    "publisher_timeout",  # a PutEvents call hangs past the publisher's timeout (after sending)
    "stream_duplicate",  # Lambda delivers a stream batch again after it succeeded (rate)
    "sqs_duplicate",  # the consumer queue delivers a handled message again (rate)
    "stream_concurrency",  # ParallelizationFactor STREAM_LANES: lanes of the shard at once (on/off)
    "sqs_concurrency",  # MaximumConcurrency CONSUMER_BATCHES: consumer batches at once (on/off)
    "live_change",  # an apply updates a mapping mid-run (per order written): Pipeline.live_change
)
#: Kinds that are the runtime's own, not rolled per call; counted from its stats.
PLATFORM_KINDS = ("stream_duplicate", "sqs_duplicate", "stream_concurrency", "sqs_concurrency")
#: Concurrency when its kind's rate is above 0 (a setting, not a rate).
STREAM_LANES = 4
CONSUMER_BATCHES = 3


class PublisherCrash(Exception):
    """The publisher's process dying between PutEvents and the delete."""


class ConsumerBoom(RuntimeError):
    """The consumer's function failing."""


#: The faults fired by the invocation running in this context: a context
#: variable, because concurrent invocations run in threads of their own and the
#: publisher's delete worker runs in a copy of its invocation's context.
_fired_here: contextvars.ContextVar[list[int]] = contextvars.ContextVar("fired_here")


@dataclass
class FaultPlan:
    """Per-kind rates (percent) and a seeded random source; counts what it fired."""

    rates: Mapping[str, int]
    rnd: random.Random
    enabled: bool = True
    fired: Counter[str] = field(default_factory=Counter)
    #: consumer failures still to inject, per event id
    consumer_failures: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Each kind rolls from a stream of its own: concurrent invocations roll
        # in threads, and with one shared stream the order they happened to
        # run in decided which kinds fired (once, none of a kind did).
        self._seed = self.rnd.getrandbits(64)
        self._streams: dict[str, random.Random] = {}

    def roll(self, kind: str) -> bool:
        rate = self.rates.get(kind, 0)
        if not self.enabled or rate <= 0:
            return False
        stream = self._streams.get(kind)
        if stream is None:
            stream = self._streams.setdefault(kind, random.Random(f"{self._seed}:{kind}"))
        if stream.randrange(100) >= rate:
            return False
        self.fired[kind] += 1
        counter = _fired_here.get(None)
        if counter is not None:
            counter[0] += 1
        return True

    @contextmanager
    def attributing(self) -> Iterator[list[int]]:
        """Count the faults fired within the block (and what it hands to worker threads)."""
        counter = [0]
        token = _fired_here.set(counter)
        try:
            yield counter
        finally:
            _fired_here.reset(token)

    @property
    def total_fired(self) -> int:
        return sum(self.fired.values())


class FaultyEvents:
    """An EventBridge client whose ``put_events`` misbehaves as the plan says."""

    def __init__(
        self,
        real: Any,
        plan: FaultPlan,
        after_send: Callable[[], None] | None = None,
        hang: Callable[[], None] | None = None,
    ) -> None:
        self._real = real
        self._plan = plan
        self._after_send = after_send
        self._hang = hang

    def put_events(self, *, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        plan = self._plan
        if plan.roll("put_events_raises"):
            raise client_error("InternalException", "PutEvents")
        answers: list[dict[str, Any] | None] = []
        to_send: list[dict[str, Any]] = []
        duplicates: list[dict[str, Any]] = []
        for entry in Entries:
            if plan.roll("entry_throttled"):
                answers.append({"ErrorCode": "ThrottlingException", "ErrorMessage": "injected"})
            elif plan.roll("entry_internal_failure"):
                answers.append({"ErrorCode": "InternalFailure", "ErrorMessage": "injected"})
            elif plan.roll("entry_rejected"):
                answers.append({"ErrorCode": "MalformedDetail", "ErrorMessage": "injected"})
            else:
                answers.append(None)
                to_send.append(entry)
                if plan.roll("bus_duplicate"):
                    duplicates.append(entry)
        sent: list[dict[str, Any]] = []
        if to_send:
            sent = list(self._real.put_events(Entries=to_send)["Entries"])
        if duplicates:
            self._real.put_events(Entries=duplicates)
        if self._after_send is not None:
            self._after_send()
        if self._hang is not None and plan.roll("publisher_timeout"):
            self._hang()  # the call hangs: the invocation outlives its timeout
        if plan.roll("put_events_lost_reply"):
            raise client_error("InternalException", "PutEvents")
        replies = iter(sent)
        entries = [answer if answer is not None else next(replies) for answer in answers]
        return {"FailedEntryCount": sum("ErrorCode" in e for e in entries), "Entries": entries}


class FaultyTableClient:
    """The publisher's and sweeper's DynamoDB client: writes fail as the plan says."""

    def __init__(self, real: Any, plan: FaultPlan) -> None:
        self._real = real
        self._plan = plan

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def update_item(self, **kwargs: Any) -> Any:
        if self._plan.roll("quarantine_write_fails"):
            raise client_error("ProvisionedThroughputExceededException", "UpdateItem")
        return self._real.update_item(**kwargs)

    def batch_write_item(self, **kwargs: Any) -> Any:
        plan = self._plan
        if plan.roll("publisher_crash"):
            raise PublisherCrash("injected: the process died between PutEvents and the delete")
        if plan.roll("batch_write_raises"):
            raise client_error("InternalServerError", "BatchWriteItem")
        if plan.roll("batch_write_unprocessed"):
            return {"UnprocessedItems": kwargs["RequestItems"]}
        return self._real.batch_write_item(**kwargs)


class FaultyLedgerClient:
    """The reference consumer's ledger client: the effect raises for chosen events."""

    def __init__(self, real: Any, plan: FaultPlan) -> None:
        self._real = real
        self._plan = plan
        self.effects = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def update_item(self, **kwargs: Any) -> Any:
        event_id = kwargs["ExpressionAttributeValues"][":event_id"]["S"]
        left = self._plan.consumer_failures.get(event_id, 0)
        if left > 0:  # a finite budget per event: it runs out by itself
            self._plan.consumer_failures[event_id] = left - 1
            self._plan.fired["consumer_exception"] += 1
            raise ConsumerBoom(f"injected consumer failure for {event_id}")
        self.effects += 1
        return self._real.update_item(**kwargs)


# ---------------------------------------------------------------------- the stack


# moto (5.2.5) builds a fresh JSONPath parser, i.e. a yacc table, for every path of
# its default input template on every event it delivers to a target: a quarter of
# a PutEvents call. The parse is a pure function of the path, so it is memoised
# for the campaign's speed only.
_cached_jsonpath_parse = functools.lru_cache(maxsize=256)(jsonpath_ng.ext.parse)


@contextmanager
def aws_environment() -> Iterator[None]:
    """Fake credentials, moto in-process, quiet Powertools; restored afterwards."""
    env = {
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    with mock.patch.dict(os.environ, env):
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
            os.environ.pop(name, None)
        with mock_aws(), mock.patch("jsonpath_ng.ext.parse", _cached_jsonpath_parse):
            yield


_SESSION: boto3.Session | None = None


def _session() -> boto3.Session:
    global _SESSION
    if _SESSION is None:
        _SESSION = boto3.Session(region_name=REGION)
    return _SESSION


def _queue(sqs: Any, name: str, **attributes: str) -> tuple[str, str]:
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return str(url), str(arn)


class Pipeline:
    """One deployment on moto; build it inside :func:`aws_environment` and a clock patch."""

    def __init__(
        self,
        clock: VirtualClock,
        plan: FaultPlan,
        *,
        stream_batch_size: int,
        seams: SeamLedger | None = None,
    ) -> None:
        session = _session()
        self.clock = clock
        #: Virtual time the deployment started at (copies reached the DLQ after it).
        self.started_at = clock.now()
        self.plan = plan
        #: deliveries the bus could not make to the queue (dead-lettered or dropped)
        self.seams = seams if seams is not None else SeamLedger()
        self.dynamodb = session.client("dynamodb")
        self.sqs = session.client("sqs")
        self.events = session.client("events")
        self.streams = session.client("dynamodbstreams")

        self.stream_arn = str(create_outbox_table(self.dynamodb, TABLE))
        create_idempotency_table(self.dynamodb, IDEMPOTENCY_TABLE)
        self.on_failure_url, on_failure_arn = _queue(self.sqs, "publisher-on-failure")
        size = str(QUEUE_MAX_MESSAGE_BYTES)
        self.dlq_url, dlq_arn = _queue(self.sqs, f"{CONSUMER}-dlq", MaximumMessageSize=size)
        self.queue_url, queue_arn = _queue(
            self.sqs,
            CONSUMER,
            MaximumMessageSize=size,
            VisibilityTimeout=str(CONSUMER_VISIBILITY_SECONDS),
            RedrivePolicy=json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVE_COUNT}
            ),
        )
        self.events.create_event_bus(Name=BUS)
        self.events.put_rule(
            Name=CONSUMER, EventBusName=BUS, EventPattern=json.dumps({"source": [SOURCE]})
        )
        self.events.put_targets(
            Rule=CONSUMER,
            EventBusName=BUS,
            Targets=[{"Id": CONSUMER, "Arn": queue_arn, "DeadLetterConfig": {"Arn": dlq_arn}}],
        )

        self.table_client = FaultyTableClient(self.dynamodb, plan)
        self.sink = EventBridgeSink(
            FaultyEvents(self.events, plan, self._interleave, self._hang), BUS
        )
        self._sweeping = False
        #: per stream invocation (by request id): did the plan fire a fault during it?
        self.stream_invocation_faulted: dict[str, bool] = {}
        self.sweeps: list[SweepResult] = []
        self.sweeper_crashes = 0

        self.publisher_config = mapping_config(
            self.stream_arn,
            batch_size=stream_batch_size,
            filter_patterns=[OUTBOX_FILTER],
            report_batch_item_failures=True,
            bisect_batch_on_function_error=True,
            maximum_retry_attempts=STREAM_MAX_RETRIES,
            maximum_record_age_seconds=STREAM_MAX_RECORD_AGE,
            on_failure_destination=on_failure_arn,
            parallelization_factor=(
                STREAM_LANES if plan.rates.get("stream_concurrency", 0) > 0 else 1
            ),
        )
        self.publisher = StreamMapping(
            self.publisher_config,
            self._publisher_handler,
            streams_client=self.streams,
            sqs_client=self.sqs,
            clock=clock,
            function_timeout_seconds=PUBLISHER_TIMEOUT_SECONDS,
            duplicate_delivery_rate=plan.rates.get("stream_duplicate", 0) / 100,
            random_source=random.Random(plan.rnd.random()),
        )
        self.ledger_client = FaultyLedgerClient(self.dynamodb, plan)
        consumer = OutboxConsumer(
            persistence_store=DynamoDBPersistenceLayer(
                table_name=IDEMPOTENCY_TABLE, boto3_client=self.dynamodb
            ),
            name=CONSUMER,
            # The module's window for its defaults (modules/windows), so the
            # runbook's redrive on the DLQ's last day is checked against it.
            expires_after_seconds=default_window(),
            logger=Logger(service=CONSUMER, level="CRITICAL"),
        )
        self.consumer_config = mapping_config(
            queue_arn,
            batch_size=10,
            report_batch_item_failures=True,
            maximum_concurrency=(
                CONSUMER_BATCHES if plan.rates.get("sqs_concurrency", 0) > 0 else None
            ),
        )
        self.consumer = SqsMapping(
            self.consumer_config,
            build_handler(consumer, self.ledger_client, IDEMPOTENCY_TABLE),
            sqs_client=self.sqs,
            clock=clock,
            function_timeout_seconds=FUNCTION_TIMEOUT_SECONDS,
            duplicate_delivery_rate=plan.rates.get("sqs_duplicate", 0) / 100,
            random_source=random.Random(plan.rnd.random()),
        )
        self.runtime = LocalRuntime(clock)
        self.runtime.add(self.publisher)
        self.runtime.add(self.consumer)
        #: live changes applied, by what they changed (Pipeline.live_change)
        self.live_changes: Counter[str] = Counter()
        #: publisher invocations when publishing was paused; None while it runs
        self._paused_at: int | None = None
        #: publisher invocations that started while publishing was paused (must stay 0)
        self.invocations_while_paused = 0
        #: the outbox sort keys in the table when publishing was paused
        self._outbox_at_pause: set[str] = set()
        #: per resume: the publisher invocations before it, and the outbox items
        #: written while paused, which the stream must deliver from then on (the
        #: mapping resumes where it stopped, docs/live-changes.md)
        self.resumes: list[tuple[int, frozenset[str]]] = []

    # -- live changes (docs/live-changes.md): what an apply does to the mappings

    def live_change(self) -> None:
        """The next change an owner's apply makes to the running mappings, in turn.

        A consumer's batch size (in place), then the transport switch runbook's
        pause (``stream_mapping.enabled = false``), then its resume with another
        stream batch size. Lambda applies each to the batches formed after it;
        what is in flight finishes as it was (:meth:`SqsMapping.update`,
        :meth:`StreamMapping.update`).
        """
        turn = sum(self.live_changes.values()) % len(LIVE_CHANGES)
        change = LIVE_CHANGES[turn]
        if change == "consumer batch size":
            sizes = [
                size for size in CONSUMER_BATCH_SIZES if size != self.consumer.settings.batch_size
            ]
            self.consumer.update({**self.consumer_config, "BatchSize": sizes[0]})
        elif change == "publishing paused":
            self.publisher.update({**self.publisher_config, "State": "Disabled"})
            self._paused_at = len(self.publisher.invocations)
            self._outbox_at_pause = {item["SK"]["S"] for item in self.outbox_items()}
        else:
            self.resume_publishing()
            return
        self.live_changes[change] += 1

    def resume_publishing(self) -> None:
        """The runbook's resume (``stream_mapping.enabled = true``), with another batch size."""
        if self._paused_at is None:
            return
        self.invocations_while_paused += len(self.publisher.invocations) - self._paused_at
        self._paused_at = None
        written = {item["SK"]["S"] for item in self.outbox_items()} - self._outbox_at_pause
        self.resumes.append((len(self.publisher.invocations), frozenset(written)))
        sizes = [size for size in STREAM_BATCH_SIZES if size != self.publisher.settings.batch_size]
        self.publisher.update({**self.publisher_config, "BatchSize": sizes[0]})
        self.live_changes["publishing resumed, another batch size"] += 1

    @property
    def publishing_paused(self) -> bool:
        return self._paused_at is not None

    # -- the functions

    def _publisher_handler(self, event: dict[str, Any], context: Any) -> Any:
        with self.plan.attributing() as fired:
            try:
                result = publish_stream_batch(
                    event["Records"],
                    PublishDependencies(
                        sink=self.sink,
                        table_name=TABLE,
                        dynamodb_client=self.table_client,
                        # Retries wait on the virtual clock, within the invocation's time.
                        sleep=self.clock.advance,
                        clock=self.clock.now_datetime,
                        table_keys=DEFAULT_TABLE_KEYS,
                    ),
                    time_left=lambda: context.get_remaining_time_in_millis() / 1000,
                )
            finally:
                self.stream_invocation_faulted[context.aws_request_id] = fired[0] > 0
        return result.response()

    def _hang(self) -> None:
        self.clock.advance(PUBLISHER_TIMEOUT_SECONDS + 1)

    def count_platform_faults(self) -> None:
        """The runtime's own duplicate deliveries, as fired faults of their kinds."""
        self.plan.fired["stream_duplicate"] += self.publisher.stats.duplicate_deliveries
        self.plan.fired["sqs_duplicate"] += self.consumer.stats.duplicate_deliveries
        self.plan.fired["stream_concurrency"] += self.publisher.stats.concurrent_invocations
        self.plan.fired["sqs_concurrency"] += self.consumer.stats.concurrent_invocations

    def _interleave(self) -> None:
        """Maybe run a whole sweep inside a publisher's call, after PutEvents sent."""
        if not self._sweeping and self.plan.roll("sweeper_interleaved"):
            self.run_sweeper(min_age_seconds=0)

    def run_sweeper(self, *, min_age_seconds: int = SWEEPER_MIN_AGE_SECONDS) -> None:
        self._sweeping = True
        try:
            self.sweeps.append(
                sweep(
                    PublishDependencies(
                        sink=self.sink,
                        table_name=TABLE,
                        dynamodb_client=self.table_client,
                        sleep=lambda _seconds: None,
                        clock=self.clock.now_datetime,
                        table_keys=DEFAULT_TABLE_KEYS,
                    ),
                    index_name=PENDING_INDEX,
                    min_age_seconds=min_age_seconds,
                )
            )
        except PublisherCrash:
            self.sweeper_crashes += 1  # the next scheduled run picks everything up
        finally:
            self._sweeping = False

    def drain(self) -> None:
        """Until nothing moves: the publisher first, then the consumer (fewer idle polls)."""
        self.publisher.drain(max_invocations=20_000)
        self.consumer.drain(max_invocations=20_000)
        self.runtime.drain(max_invocations=20_000)

    # -- observation

    def outbox_items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for page in self.dynamodb.get_paginator("scan").paginate(
            TableName=TABLE, ConsistentRead=True
        ):
            items.extend(i for i in page["Items"] if i["SK"]["S"].startswith(OUTBOX_SK_PREFIX))
        return items

    def unquarantined_sort_keys(self) -> set[str]:
        """Outbox items still pending: not marked quarantined, or still in the pending index."""
        return {
            item["SK"]["S"]
            for item in self.outbox_items()
            if ATTR_PENDING_SHARD in item
            or item.get(ATTR_STATUS, {}).get("S") != STATUS_QUARANTINED
        }

    def quarantined_sort_keys(self) -> set[str]:
        return {
            item["SK"]["S"]
            for item in self.outbox_items()
            if item.get(ATTR_STATUS, {}).get("S") == STATUS_QUARANTINED
            and ATTR_PENDING_SHARD not in item
        }

    def ledger(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for page in self.dynamodb.get_paginator("scan").paginate(
            TableName=IDEMPOTENCY_TABLE, ConsistentRead=True
        ):
            for item in page["Items"]:
                if item["id"]["S"].startswith("ledger#"):
                    counts[item["event_id"]["S"]] = int(item["times_processed"]["N"])
        return counts

    def take_all(self, url: str) -> list[str]:
        """Every body in a queue, received and held (call it only at the end of a run)."""
        bodies: list[str] = []
        while True:
            messages = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=43_200
            ).get("Messages", [])
            if not messages:
                return bodies
            bodies.extend(message["Body"] for message in messages)

    def queue_depth(self, url: str) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )


@contextmanager
def pipeline(plan: FaultPlan, *, stream_batch_size: int) -> Iterator[Pipeline]:
    """A fresh deployment on a fresh moto and a virtual clock that stream records follow."""
    with aws_environment(), aws_seams() as seams:
        clock = VirtualClock()
        with stream_records_follow(clock):
            yield Pipeline(clock, plan, stream_batch_size=stream_batch_size, seams=seams)
