"""One deployment of the module, rebuilt on moto and driven by the local runtime.

:class:`OutboxStack` creates what ``terraform apply`` would (the entity table
with its stream and pending index, the idempotency table, the bus or topic,
the publisher's on-failure queue, and per consumer a queue, a DLQ and a rule
or subscription) under the module's names and with its settings
(:mod:`dynamodb_outbox.testing.module_settings`), and wires the publisher
(``dynamodb_outbox.publisher.handler``, from its environment as on Lambda) and
each consumer through the event source mappings the module deploys.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import boto3

from dynamodb_outbox import publisher
from dynamodb_outbox.consumer import SQSEvent
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.local import (
    DrainResult,
    LambdaContext,
    LocalRuntime,
    SqsMapping,
    StreamMapping,
    VirtualClock,
    mapping_config,
)
from dynamodb_outbox.outbox_item import ATTR_PENDING_SHARD
from dynamodb_outbox.settings import (
    DEFAULT_METRICS_NAMESPACE,
    ENV_CONSUMER_EVENT_BUS_ARN,
    ENV_CONSUMER_NAME,
    ENV_CONSUMER_TOPIC_ARN,
    ENV_CONSUMER_TRANSPORT,
    ENV_EVENT_BUS_NAME,
    ENV_EXPIRES_AFTER_SECONDS,
    ENV_IDEMPOTENCY_TABLE,
    ENV_PARTITION_KEY,
    ENV_PUBLISH_TO,
    ENV_SORT_KEY,
    ENV_TABLE_NAME,
    ENV_TOPIC_ARN,
    ConfigurationError,
)
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS, TableKeys
from dynamodb_outbox.testing.aws import ACCOUNT_ID, REGION
from dynamodb_outbox.testing.failures import ConsumerFailure, FailureLog, reconcile
from dynamodb_outbox.testing.module_settings import (
    DEFAULT_SOURCE,
    DLQ_RETENTION_SECONDS,
    ConsumerSettings,
    ModuleNames,
    PublisherSettings,
    idempotency_window,
)
from dynamodb_outbox.writer import OutboxWriter

__all__ = ["ConsumerFailed", "ConsumerQueue", "OutboxStack"]

Handler = Callable[[SQSEvent, LambdaContext], Any]
PublishTo = Literal["eventbridge", "sns"]


class ConsumerFailed(AssertionError):
    """A consumer failed messages; raised from the first exception it logged."""


@dataclass
class ConsumerQueue:
    """A consumer's queue and DLQ, as the module creates them."""

    key: str
    settings: ConsumerSettings
    queue_url: str
    queue_arn: str
    dlq_url: str
    mapping: SqsMapping
    _sqs: Any = field(repr=False)

    def dead_letters(self) -> list[Envelope | str]:
        """Every message in the DLQ, left there: its event, or its raw body when
        the body is no outbox event (what a poison message is)."""
        from dynamodb_outbox.consumer import parse_body

        seen: dict[str, dict[str, Any]] = {}
        while True:
            # Hidden while read, so the next receive returns the others.
            messages = self._sqs.receive_message(
                QueueUrl=self.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=_READ_HIDDEN
            ).get("Messages", [])
            fresh = [m for m in messages if m["MessageId"] not in seen]
            if not fresh:
                break
            seen.update((m["MessageId"], m) for m in fresh)
        read = list(seen.values())
        for start in range(0, len(read), 10):  # visible again, as before the read
            self._sqs.change_message_visibility_batch(
                QueueUrl=self.dlq_url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                    for n, m in enumerate(read[start : start + 10])
                ],
            )
        letters: list[Envelope | str] = []
        for message in read:
            try:
                letters.append(parse_body(message["Body"]))
            except Exception:
                letters.append(str(message["Body"]))
        return letters

    def dead_events(self) -> list[Envelope]:
        """The events in the DLQ, typed; an AssertionError quoting any body that is no event."""
        letters = self.dead_letters()
        raw = [letter for letter in letters if isinstance(letter, str)]
        if raw:
            raise AssertionError(f"the DLQ of {self.key!r} holds bodies that are no event: {raw!r}")
        return [letter for letter in letters if isinstance(letter, Envelope)]


#: How long dead_letters() hides a DLQ message it has read, until it has read them all.
_READ_HIDDEN = 300


class OutboxStack:
    """The module's resources on moto (inside :func:`~dynamodb_outbox.testing.isolated_aws`).

    ``name`` is the module's ``name`` input; ``publish_to`` its sink
    (``eventbridge`` or ``sns``); ``table_keys`` the table's key names
    (``table.partition_key`` / ``sort_key``). Call :meth:`close` at the end
    (the ``outbox_stack`` fixture does).
    """

    def __init__(
        self,
        name: str = "orders",
        *,
        publish_to: PublishTo = "eventbridge",
        table_keys: TableKeys = DEFAULT_TABLE_KEYS,
        source: str = DEFAULT_SOURCE,
        publisher_settings: PublisherSettings | None = None,
    ) -> None:
        if publish_to not in ("eventbridge", "sns"):
            raise ValueError(f"publish_to must be 'eventbridge' or 'sns', got {publish_to!r}")
        self.names = ModuleNames(name)
        self.publish_to: PublishTo = publish_to
        self.table_keys = table_keys
        self.source = source
        self.publisher_settings = publisher_settings or PublisherSettings()
        self.clock = VirtualClock()
        self.runtime = LocalRuntime(self.clock)
        self.consumers: dict[str, ConsumerQueue] = {}
        self.dynamodb = boto3.client("dynamodb", region_name=REGION)
        self.sqs = boto3.client("sqs", region_name=REGION)
        self._failure_log = FailureLog()
        self._failure_log.install()
        self._heard_loggers: list[logging.Logger] = []
        self.topic_arn: str | None = None
        self.event_bus_arn: str | None = None
        stream_arn = self._create_table()
        self._create_idempotency_table()
        if publish_to == "eventbridge":
            bus = boto3.client("events", region_name=REGION).create_event_bus(
                Name=self.names.event_bus
            )
            self.event_bus_arn = str(bus["EventBusArn"])
        else:
            topic = boto3.client("sns", region_name=REGION).create_topic(Name=self.names.topic)
            self.topic_arn = str(topic["TopicArn"])
        # The publisher's, and the sender a consumer built outside load_handler
        # checks its messages against.
        # Restored by close(): a stack leaves os.environ as it found it.
        stack_environment = {**self.publisher_environment(), **self.sender_environment()}
        self._saved_environment = {name: os.environ.get(name) for name in stack_environment}
        os.environ.update(stack_environment)
        publisher.default_runtime.cache_clear()
        self.runtime.add(self._publisher_mapping(stream_arn))

    # ----------------------------------------------------------------- environment

    def publisher_environment(self) -> dict[str, str]:
        """What the module sets on the publisher function (``publisher.tf``)."""
        partition_key, sort_key = self.table_keys.names
        sink = (
            {ENV_PUBLISH_TO: "eventbridge", ENV_EVENT_BUS_NAME: self.names.event_bus}
            if self.publish_to == "eventbridge"
            else {ENV_PUBLISH_TO: "sns", ENV_TOPIC_ARN: str(self.topic_arn)}
        )
        return {
            **sink,
            ENV_TABLE_NAME: self.names.table,
            ENV_PARTITION_KEY: partition_key,
            ENV_SORT_KEY: sort_key,
        }

    def sender_environment(self) -> dict[str, str]:
        """What consumers check their messages against (``sns.tf``'s
        ``consumer_sender_environment``, the module's ``consumer_environment`` output)."""
        if self.publish_to == "eventbridge":
            return {
                ENV_CONSUMER_TRANSPORT: "eventbridge",
                ENV_CONSUMER_EVENT_BUS_ARN: str(self.event_bus_arn),
            }
        return {
            ENV_CONSUMER_TRANSPORT: self.publish_to,
            ENV_CONSUMER_TOPIC_ARN: str(self.topic_arn),
        }

    def consumer_environment(
        self, key: str, settings: ConsumerSettings | None = None
    ) -> dict[str, str]:
        """What a consumer function of key ``key`` has (``consumers.tf``)."""
        if settings is None:
            added = self.consumers.get(key)
            settings = added.settings if added is not None else ConsumerSettings()
        window = idempotency_window(self.publish_to, settings)
        return {
            **self.sender_environment(),
            ENV_IDEMPOTENCY_TABLE: self.names.idempotency_table,
            ENV_EXPIRES_AFTER_SECONDS: str(window),
            ENV_CONSUMER_NAME: key,
            "POWERTOOLS_SERVICE_NAME": self.names.consumer_service(key),
            "POWERTOOLS_METRICS_NAMESPACE": DEFAULT_METRICS_NAMESPACE,
        }

    # ------------------------------------------------------------------ producers

    def writer(self, **options: Any) -> OutboxWriter:
        """An :class:`OutboxWriter` on the stack's table, sink and key names."""
        partition_key, sort_key = self.table_keys.names
        defaults: dict[str, Any] = {
            "source": self.source,
            "publish_to": self.publish_to,
            "partition_key": partition_key,
            "sort_key": sort_key,
        }
        return OutboxWriter(self.names.table, **{**defaults, **options})

    # ------------------------------------------------------------------ consumers

    def load_handler(
        self, key: str, target: str, settings: ConsumerSettings | None = None
    ) -> Handler:
        """Import ``"package.module:handler"`` afresh, with consumer ``key``'s environment.

        The module is imported again (dropped from ``sys.modules`` first), so
        what it builds at import time (``OutboxConsumer(...)`` reading
        ``OUTBOX_IDEMPOTENCY_TABLE`` / ``OUTBOX_CONSUMER_NAME``) is built in this
        test, against this stack. The environment is the consumer's during the
        import only: several consumers can be loaded in one test.
        """
        module_name, _, attribute = target.partition(":")
        if not module_name or not attribute:
            raise ValueError(f"target must be 'package.module:handler', got {target!r}")
        environment = self.consumer_environment(key, settings)
        saved = {name: os.environ.get(name) for name in environment}
        os.environ.update(environment)
        try:
            sys.modules.pop(module_name, None)
            handler: Handler = getattr(importlib.import_module(module_name), attribute)
        finally:
            # Another consumer built later in the same test gets its own name.
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        return handler

    def add_consumer(
        self,
        key: str,
        handler: Handler | str,
        settings: ConsumerSettings | None = None,
        **overrides: Any,
    ) -> ConsumerQueue:
        """Consumer ``key`` of the module's ``consumers`` input, handled by ``handler``.

        ``handler`` is the Lambda handler or ``"package.module:handler"`` (see
        :meth:`load_handler`). ``settings`` (or keyword overrides of its
        fields, e.g. ``event_pattern=``) are the consumer's input; the rest are
        the module's defaults.
        """
        if key in self.consumers:
            raise ValueError(f"consumer {key!r} already exists")
        chosen = settings or ConsumerSettings()
        if overrides:
            chosen = ConsumerSettings(**{**chosen.__dict__, **overrides})
        self._refuse_what_the_module_refuses(key, chosen)
        if not isinstance(handler, str):
            _refuse_another_name(key, handler)
        function = self.load_handler(key, handler, chosen) if isinstance(handler, str) else handler
        queue_url, queue_arn, dlq_url = self._create_queues(key, chosen)
        self._route_to(key, queue_arn, chosen)
        mapping = SqsMapping(
            mapping_config(
                queue_arn,
                function_arn=self._function_arn(self.names.consumer(key)),
                batch_size=chosen.batch_size,
                maximum_batching_window_seconds=chosen.maximum_batching_window_in_seconds,
                report_batch_item_failures=True,
                maximum_concurrency=chosen.maximum_concurrency,
            ),
            self._failure_log.collecting(function),
            sqs_client=self.sqs,
            clock=self.clock,
            function_timeout_seconds=chosen.function_timeout_seconds,
            # On Lambda the function has its environment for its whole life:
            # set around each of its invocations, not only for the import.
            environment=self.consumer_environment(key, chosen),
        )
        self._hear_a_logger_that_does_not_propagate(function)
        self.runtime.add(mapping)
        queue = ConsumerQueue(key, chosen, queue_url, queue_arn, dlq_url, mapping, self.sqs)
        self.consumers[key] = queue
        return queue

    # ------------------------------------------------------------------ running

    def drain(self, max_invocations: int = 1_000) -> DrainResult:
        """Deliver everything: stream → publisher → sink → queues → consumers, retries
        and redrives included, on the virtual clock, until nothing is left to do."""
        return self.runtime.drain(max_invocations)

    @property
    def failures(self) -> list[ConsumerFailure]:
        """Every message this stack's consumers failed, with why, consumer by consumer.

        Read from each invocation's outcome (so a whole-invocation error, a
        timeout, or a failure whose log line never reached the root logger is
        here too), explained by the toolkit's ERROR log record of the message
        when there is one (:func:`~dynamodb_outbox.testing.failures.reconcile`);
        then the failures a handler called directly (outside :meth:`drain`)
        logged, which every open stack sees.
        """
        return reconcile(
            (
                (key, invocation)
                for key, queue in self.consumers.items()
                for invocation in queue.mapping.invocations
            ),
            self._failure_log.failures,
        ) + list(self._failure_log.direct)

    def raise_failures(self) -> None:
        """Raise :class:`ConsumerFailed` from the first failure's exception, if any failed."""
        failures = self.failures
        if not failures:
            return
        first = failures[0]
        lines = [f"{f.consumer}: {f.message_id} ({f.event_type}): {f.reason}" for f in failures]
        raise ConsumerFailed(
            f"{len(failures)} message failure(s) in consumers:\n  " + "\n  ".join(lines)
        ) from first.exception

    def close(self) -> None:
        """Stop collecting failures and put back the ``os.environ`` values the stack set
        (the stack's resources end with the moto mock)."""
        self._failure_log.uninstall()
        for logger in self._heard_loggers:
            logger.removeHandler(self._failure_log)
        self._heard_loggers.clear()
        saved, self._saved_environment = self._saved_environment, {}
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def __enter__(self) -> OutboxStack:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _hear_a_logger_that_does_not_propagate(self, handler: Handler) -> None:
        # The failure log sits on the root logger; a toolkit handler whose
        # logger does not propagate (Logger(propagate=False), the default of a
        # Powertools Logger built by hand) gets it on its own logger too.
        logger = getattr(getattr(handler, "outbox_consumer", None), "logger", None)
        std = getattr(logger, "_logger", logger)  # a Powertools Logger wraps a logging.Logger
        quiet = isinstance(std, logging.Logger) and not std.propagate
        if quiet and isinstance(std, logging.Logger) and self._failure_log not in std.handlers:
            std.addHandler(self._failure_log)
            self._heard_loggers.append(std)

    def _refuse_what_the_module_refuses(self, key: str, settings: ConsumerSettings) -> None:
        """``var.consumers``' validations (variables.tf), with the module's messages."""
        pattern, policy = settings.event_pattern, settings.filter_policy
        if pattern is not None and policy is not None:
            raise ValueError(
                'Set either event_pattern (publish_to = "eventbridge") or filter_policy '
                f'(publish_to = "sns") on a consumer, not both. Both set on: {key}.'
            )
        if self.publish_to == "eventbridge" and pattern is None:
            raise ValueError(
                'With publish_to = "eventbridge" every consumer needs an event_pattern (a JSON '
                'EventBridge event pattern) and no filter_policy (that is for publish_to = "sns"). '
                f"Invalid for: {key}."
            )
        if self.publish_to != "eventbridge" and policy is None:
            raise ValueError(
                f'With publish_to = "{self.publish_to}" every consumer needs a filter_policy (a '
                "JSON filter policy on the message attributes event_type and source) and no "
                f"event_pattern. Invalid for: {key}."
            )
        visibility, timeout = settings.visibility_timeout_seconds, settings.function_timeout_seconds
        if visibility is not None and visibility < 6 * timeout:
            raise ValueError(
                "A consumer's visibility_timeout_seconds must be at least 6 x its "
                "function_timeout_seconds (AWS's recommendation for SQS event sources, so a "
                "message stays hidden while Lambda retries a throttled batch; Lambda refuses "
                "outright a mapping whose function timeout exceeds the visibility timeout). "
                f"Too small for: {key} ({visibility} < 6 x {timeout}). Leave it null to get "
                "6 x function_timeout_seconds."
            )

    # ----------------------------------------------------------------- resources

    @staticmethod
    def _function_arn(function_name: str) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{function_name}"

    def _create_table(self) -> str:
        # table.tf: string keys, the sparse KEYS_ONLY pending index, a NEW_IMAGE stream.
        partition_key, sort_key = self.table_keys.names
        description = self.dynamodb.create_table(
            TableName=self.names.table,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": partition_key, "AttributeType": "S"},
                {"AttributeName": sort_key, "AttributeType": "S"},
                {"AttributeName": ATTR_PENDING_SHARD, "AttributeType": "S"},
            ],
            KeySchema=[
                {"AttributeName": partition_key, "KeyType": "HASH"},
                {"AttributeName": sort_key, "KeyType": "RANGE"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": self.names.pending_index,
                    "KeySchema": [
                        {"AttributeName": ATTR_PENDING_SHARD, "KeyType": "HASH"},
                        {"AttributeName": sort_key, "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
            ],
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
        )["TableDescription"]
        return str(description["LatestStreamArn"])

    def _create_idempotency_table(self) -> None:
        # consumers.tf: hash key "id" (S), TTL on "expiration" (Powertools' layout).
        name = self.names.idempotency_table
        self.dynamodb.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        )
        self.dynamodb.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiration"},
        )

    def _publisher_mapping(self, stream_arn: str) -> StreamMapping:
        # publisher.tf: TRIM_HORIZON, the OUTBOX# INSERT filter, partial batch
        # responses, bisection, bounded retries and age, the on-failure queue.
        settings = self.publisher_settings
        on_failure = self.sqs.create_queue(QueueName=self.names.on_failure_queue)["QueueUrl"]
        on_failure_arn = self.sqs.get_queue_attributes(
            QueueUrl=on_failure, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        return StreamMapping(
            mapping_config(
                stream_arn,
                function_arn=self._function_arn(self.names.publisher),
                batch_size=settings.batch_size,
                maximum_batching_window_seconds=settings.maximum_batching_window_in_seconds,
                filter_patterns=[self.table_keys.stream_filter_pattern()],
                report_batch_item_failures=True,
                bisect_batch_on_function_error=True,
                maximum_retry_attempts=settings.maximum_retry_attempts,
                maximum_record_age_seconds=settings.maximum_record_age_in_seconds,
                parallelization_factor=settings.parallelization_factor,
                on_failure_destination=on_failure_arn,
            ),
            publisher.handler,
            streams_client=boto3.client("dynamodbstreams", region_name=REGION),
            sqs_client=self.sqs,
            clock=self.clock,
            function_timeout_seconds=settings.timeout_seconds,
            environment=self.publisher_environment(),
        )

    def _create_queues(self, key: str, settings: ConsumerSettings) -> tuple[str, str, str]:
        # consumers.tf: a DLQ, and the queue redriving to it after max_receive_count.
        dlq_url = self.sqs.create_queue(
            QueueName=self.names.consumer_dlq(key),
            Attributes={"MessageRetentionPeriod": str(DLQ_RETENTION_SECONDS)},
        )["QueueUrl"]
        dlq_arn = self._queue_arn(dlq_url)
        queue_url = self.sqs.create_queue(
            QueueName=self.names.consumer(key),
            Attributes={
                "VisibilityTimeout": str(settings.visibility_timeout),
                "MessageRetentionPeriod": str(settings.message_retention_seconds),
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": settings.max_receive_count}
                ),
            },
        )["QueueUrl"]
        return str(queue_url), self._queue_arn(queue_url), str(dlq_url)

    def _queue_arn(self, url: str) -> str:
        attributes = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        return str(attributes["Attributes"]["QueueArn"])

    def _route_to(self, key: str, queue_arn: str, settings: ConsumerSettings) -> None:
        if self.publish_to == "eventbridge":
            events = boto3.client("events", region_name=REGION)
            rule = self.names.consumer(key)
            events.put_rule(
                Name=rule,
                EventBusName=self.names.event_bus,
                EventPattern=settings.pattern_json(),
            )
            events.put_targets(
                Rule=rule,
                EventBusName=self.names.event_bus,
                Targets=[{"Id": "queue", "Arn": queue_arn}],
            )
            return
        attributes: dict[str, str] = {"RawMessageDelivery": "true"}
        policy = settings.filter_policy_json()
        if policy is not None:
            attributes["FilterPolicy"] = policy
        boto3.client("sns", region_name=REGION).subscribe(
            TopicArn=str(self.topic_arn),
            Protocol="sqs",
            Endpoint=queue_arn,
            Attributes=attributes,
        )


def _refuse_another_name(key: str, handler: Handler) -> None:
    """A toolkit handler named other than its key: what ``OutboxConsumer`` refuses on Lambda.

    On AWS the function gets ``OUTBOX_CONSUMER_NAME=<key>`` and its IAM policy
    grants only ``idempotency#<key>#*`` keys; a consumer built in the test
    before that variable existed was not checked against it.
    """
    consumer = getattr(handler, "outbox_consumer", None)
    name = getattr(consumer, "name", None)
    if isinstance(name, str) and name != key:
        raise ConfigurationError(
            f"the consumer is named {name!r} in code but {ENV_CONSUMER_NAME}={key!r} "
            "(the module's consumers key, which its IAM policy grants): drop name=... to use "
            "the environment's, or make them the same"
        )
