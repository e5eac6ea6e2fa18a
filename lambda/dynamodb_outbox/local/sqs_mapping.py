"""An SQS event source mapping, driven in-process on a virtual clock.

:class:`SqsMapping` receives from the queue through the SQS API, batches the
messages the way Lambda's SQS poller does and calls the handler synchronously.

* Batching: up to ``BatchSize`` messages, closed early by the 6 MB payload
  limit; with ``MaximumBatchingWindowInSeconds`` a smaller batch waits until
  its window has passed on the virtual clock (0 delivers at once). "The next
  batching window begins as soon as the previous function invocation
  completes" (Lambda's "How Lambda processes records from stream and
  queue-based event sources", batching behavior), the first one at the first
  poll.
* Responses (:mod:`.responses`): on success every message is deleted; on a
  partial failure every message *not* reported; on a whole-batch failure
  (exception, bad identifier) none. Lambda does not retry SQS batches itself:
  a message left in the queue comes back when its visibility timeout ends.
* Visibility: the queue's ``VisibilityTimeout`` is measured on the virtual
  clock. moto measures it on the wall clock, so the runtime receives with the
  longest wall-clock timeout SQS allows (12 h) — the message stays invisible
  however slow the test machine — and makes it visible with
  ``ChangeMessageVisibility(0)`` once the virtual clock passes its deadline.
* Redrive: moto applies the queue's ``RedrivePolicy`` on receive — a visible
  message already received ``maxReceiveCount`` times moves to the DLQ instead
  of being returned — which is SQS's own rule; the runtime relies on it.
* FIFO: messages of a group keep their order, and a group is blocked while one
  of its messages is in flight (moto enforces it on receive; the runtime keeps
  failed messages in flight until their virtual deadline). FIFO mappings allow
  at most 10 messages per batch and no batching window, as in AWS.
* Filters: a message matching no filter is deleted without reaching the
  handler, as Lambda does.
* Concurrency: a poll receives up to ``concurrency`` batches and invokes them
  at once (:mod:`.concurrency`: one thread each, switching at every AWS call,
  reproducibly from ``random_source``), then settles each. ``concurrency``
  defaults to ``ScalingConfig.MaximumConcurrency`` when the mapping sets it,
  and to 1 otherwise (AWS would scale up from 5 pollers; tests that want
  concurrency say so); it may not exceed ``MaximumConcurrency``. FIFO groups
  are never split across concurrent batches: a group is blocked on receive
  while one of its messages is in flight.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .clock import VirtualClock
from .concurrency import run_concurrently
from .config import (
    SQS_FIFO_MAX_BATCH_SIZE,
    MappingConfigError,
    SqsMappingSettings,
    arn_parts,
    check_update,
    is_enabled,
)
from .context import DEFAULT_TIMEOUT_SECONDS, LambdaContext
from .drain import drain_until_idle
from .events import PayloadMeter, SqsEventRecord, record_size, sqs_record
from .filters import RecordFilter
from .invoker import Handler, HandlerResult, function_environment, invoke_handler
from .responses import BatchVerdict, judge_response, whole_batch_failure
from .results import DrainResult, Invocation, PollResult, SqsStats

__all__ = ["QueueSettings", "SqsMapping"]

# The longest visibility timeout SQS accepts; used as the wall-clock hold.
HOLD_VISIBILITY_SECONDS = 43_200
RECEIVE_LIMIT = 10
DELETE_BATCH_LIMIT = 10


@dataclass(frozen=True)
class QueueSettings:
    """The attributes of the source queue that shape delivery, read from the emulator."""

    url: str
    arn: str
    visibility_timeout_seconds: int
    fifo: bool
    dead_letter_target_arn: str | None
    max_receive_count: int | None

    @classmethod
    def read(cls, sqs_client: Any, queue_arn: str) -> QueueSettings:
        _, _, account, name = arn_parts(queue_arn)
        url = sqs_client.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"]
        attributes = sqs_client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])[
            "Attributes"
        ]
        redrive = json.loads(attributes.get("RedrivePolicy") or "{}")
        max_receive = redrive.get("maxReceiveCount")
        return cls(
            url=str(url),
            arn=queue_arn,
            visibility_timeout_seconds=int(attributes.get("VisibilityTimeout", 30)),
            fifo=attributes.get("FifoQueue") == "true",
            dead_letter_target_arn=redrive.get("deadLetterTargetArn"),
            max_receive_count=None if max_receive is None else int(max_receive),
        )


@dataclass
class _Message:
    record: SqsEventRecord
    message_id: str
    receipt_handle: str
    deadline: float
    size: int

    @property
    def receive_count(self) -> int:
        return int(self.record["attributes"].get("ApproximateReceiveCount", "1"))


class SqsMapping:
    """Lambda's SQS poller for one mapping, invoking ``handler`` in-process.

    ``config`` is the ``GetEventSourceMapping`` shape; the queue's attributes
    (visibility timeout, redrive policy, FIFO) are read from the emulator
    through ``sqs_client`` when the mapping is created. ``environment`` is the
    function's environment variables: set in ``os.environ`` around each
    invocation and restored after it, as Lambda gives them to the function for
    its whole life (:func:`~dynamodb_outbox.local.invoker.function_environment`).
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        handler: Handler,
        *,
        sqs_client: Any,
        clock: VirtualClock,
        function_timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        duplicate_delivery_rate: float = 0.0,
        random_source: random.Random | None = None,
        concurrency: int | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        if not 0.0 <= duplicate_delivery_rate <= 1.0:
            raise MappingConfigError(
                f"duplicate_delivery_rate must be between 0 and 1, got {duplicate_delivery_rate}"
            )
        self._duplicate_rate = duplicate_delivery_rate
        self._random = random_source or random.Random()
        self._duplicated: set[str] = set()  # each message comes again at most once
        self.settings = SqsMappingSettings.from_config(config)
        self._requested_concurrency = concurrency
        self.concurrency = _concurrency(concurrency, self.settings.maximum_concurrency)
        self.queue = QueueSettings.read(sqs_client, self.settings.event_source_arn)
        self._check_queue_takes(self.settings)
        #: False once an update disabled the mapping: it stops polling (see :meth:`update`)
        self.enabled = True
        if function_timeout_seconds > self.queue.visibility_timeout_seconds:
            raise MappingConfigError(
                f"the function timeout ({function_timeout_seconds} s) exceeds the queue's "
                f"visibility timeout ({self.queue.visibility_timeout_seconds} s); "
                "AWS rejects such a mapping"
            )
        self._handler = handler
        self._sqs = sqs_client
        self._clock = clock
        self._timeout = function_timeout_seconds
        self._environment = dict(environment or {})
        self._region = arn_parts(self.settings.event_source_arn)[1]
        self._filter = RecordFilter(self.settings.filter_patterns, parse_sqs_body=True)
        self._buffer: list[_Message] = []
        self._window_opened_at: float | None = None
        self._in_flight: dict[str, _Message] = {}
        self.stats = SqsStats()
        self.invocations: list[Invocation] = []

    def _check_queue_takes(self, settings: SqsMappingSettings) -> None:
        if not self.queue.fifo:
            return
        if settings.batch_size > SQS_FIFO_MAX_BATCH_SIZE:
            raise MappingConfigError(
                f"BatchSize={settings.batch_size}: a FIFO queue mapping takes at most "
                f"{SQS_FIFO_MAX_BATCH_SIZE}"
            )
        if settings.batching_window_seconds:
            raise MappingConfigError("a batching window is not supported for FIFO queues")

    def update(self, config: Mapping[str, Any]) -> None:
        """``UpdateEventSourceMapping``: the batches formed from now on follow ``config``.

        The messages already received (buffered or in flight) stay where they
        are: an invocation running when a mapping is updated finishes with its
        batch, and its messages are deleted or come back as before. A disabled
        mapping receives nothing more; enabling it again resumes polling. The
        queue's own settings are not re-read: they belong to the queue, not to
        the mapping.
        """
        check_update(self.settings.event_source_arn, config)
        self.enabled = is_enabled(config)
        if not self.enabled:
            return
        settings = SqsMappingSettings.from_config(config)
        self._check_queue_takes(settings)
        self.settings = settings
        self.concurrency = _concurrency(self._requested_concurrency, settings.maximum_concurrency)
        self._filter = RecordFilter(settings.filter_patterns, parse_sqs_body=True)

    # ------------------------------------------------------------------ polling

    def poll(self) -> PollResult:
        """Receive, and invoke the handler with at most ``concurrency`` batches at once."""
        result = PollResult()
        if not self.enabled:
            return result
        now = self._clock.now()
        if self._window_opened_at is None:
            self._window_opened_at = now  # the first window: the first poll
        self._release_expired(now, result)
        batches: list[list[_Message]] = []
        while len(batches) < self.concurrency:
            batch = self._next_batch(now, result)
            if batch is None:
                break
            batches.append(batch)
        if not batches:
            result.wait_until(self._earliest_deadline())
            return result
        self._invoke(batches, result)
        self._window_opened_at = self._clock.now()  # the next window begins
        return result

    def _next_batch(self, now: float, result: PollResult) -> list[_Message] | None:
        """The next batch to invoke, taken from the buffer; None if none is ready."""
        self._fill_buffer(now, result)
        if not self._buffer:
            return None
        batch: list[_Message] = []
        meter = PayloadMeter()
        for message in self._buffer:
            if len(batch) >= self.settings.batch_size or (batch and not meter.fits(message.size)):
                break
            meter.add(message.size)
            batch.append(message)
        full = len(batch) >= self.settings.batch_size or len(batch) < len(self._buffer)
        window = self.settings.batching_window_seconds
        if not full and window > 0:
            ready_at = (self._window_opened_at or now) + window
            if now < ready_at:
                result.wait_until(ready_at)
                return None
        self._buffer = self._buffer[len(batch) :]
        return batch

    def drain(self, max_invocations: int = 1_000, *, advance_clock: bool = True) -> DrainResult:
        """Poll until the queue is empty and nothing is in flight, within the bound.

        With ``advance_clock`` (the default) the virtual clock jumps to the next
        visibility deadline or window end when nothing else can happen, so
        failed messages come back, and eventually reach the DLQ, without a
        sleep. Raises :class:`DrainLimitReached` at the bound with work pending.
        """
        return drain_until_idle(
            [self], self._clock, max_invocations=max_invocations, advance_clock=advance_clock
        )

    def has_pending_work(self) -> bool:
        """Whether messages wait in the batch buffer, in flight, or visible in the queue.

        A disabled mapping has none: nothing it would do is pending.
        """
        if not self.enabled:
            return False
        if self._buffer or self._in_flight:
            return True
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=self.queue.url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attributes.get("ApproximateNumberOfMessages", 0)) > 0

    # ------------------------------------------------------------------ queue

    def _earliest_deadline(self) -> float | None:
        return min((m.deadline for m in self._in_flight.values()), default=None)

    def _release_expired(self, now: float, result: PollResult) -> None:
        expired = [m for m in self._in_flight.values() if m.deadline <= now]
        for message in expired:
            del self._in_flight[message.receipt_handle]
            try:
                self._sqs.change_message_visibility(
                    QueueUrl=self.queue.url,
                    ReceiptHandle=message.receipt_handle,
                    VisibilityTimeout=0,
                )
            except ClientError as error:
                # Deleted meanwhile (by the handler itself): nothing to make visible.
                if "ReceiptHandle" not in error.response.get("Error", {}).get("Code", ""):
                    raise
            self.stats.visibility_expirations += 1
            result.progressed = True
        if expired:
            gone = {m.receipt_handle for m in expired}
            self._buffer = [m for m in self._buffer if m.receipt_handle not in gone]

    def _fill_buffer(self, now: float, result: PollResult) -> None:
        while len(self._buffer) < self.settings.batch_size:
            wanted = min(RECEIVE_LIMIT, self.settings.batch_size - len(self._buffer))
            received = self._sqs.receive_message(
                QueueUrl=self.queue.url,
                MaxNumberOfMessages=wanted,
                VisibilityTimeout=HOLD_VISIBILITY_SECONDS,
                WaitTimeSeconds=0,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not received:
                return
            for raw in received:
                record = sqs_record(raw, queue_arn=self.queue.arn, region=self._region)
                message = _Message(
                    record=record,
                    message_id=record["messageId"],
                    receipt_handle=record["receiptHandle"],
                    deadline=now + self.queue.visibility_timeout_seconds,
                    size=record_size(record),
                )
                if not self._filter.matches(record):
                    self._delete([message])
                    self.stats.messages_filtered += 1
                    result.progressed = True
                    continue
                self._buffer.append(message)
                self._in_flight[message.receipt_handle] = message

    def _put_some_back(self, done: list[_Message]) -> list[_Message]:
        """At least once (standard queues): a handled message may come again; the rest."""
        if self.queue.fifo or not self._duplicate_rate:
            return done
        keep: list[_Message] = []
        for message in done:
            if (
                message.message_id not in self._duplicated
                and self._random.random() < self._duplicate_rate
            ):
                self._duplicated.add(message.message_id)
                self._in_flight.pop(message.receipt_handle, None)
                self._sqs.change_message_visibility(
                    QueueUrl=self.queue.url,
                    ReceiptHandle=message.receipt_handle,
                    VisibilityTimeout=0,
                )
                self.stats.duplicate_deliveries += 1
            else:
                keep.append(message)
        return keep

    def _delete(self, messages: list[_Message]) -> None:
        for start in range(0, len(messages), DELETE_BATCH_LIMIT):
            chunk = messages[start : start + DELETE_BATCH_LIMIT]
            response = self._sqs.delete_message_batch(
                QueueUrl=self.queue.url,
                Entries=[
                    {"Id": str(index), "ReceiptHandle": message.receipt_handle}
                    for index, message in enumerate(chunk)
                ],
            )
            self.stats.delete_errors += len(response.get("Failed", []))
            for message in chunk:
                self._in_flight.pop(message.receipt_handle, None)

    # ------------------------------------------------------------------ invoking

    def _invoke(self, batches: list[list[_Message]], result: PollResult) -> None:
        """Invoke the handler with every batch at once, then settle each."""
        calls = []
        events: list[dict[str, Any]] = []
        for batch in batches:
            context = LambdaContext(
                self.settings.function_arn, timeout_seconds=self._timeout, clock=self._clock
            )
            event: dict[str, Any] = {"Records": [message.record for message in batch]}
            events.append(event)
            calls.append(functools.partial(invoke_handler, self._handler, event, context))
        with function_environment(self._environment):
            outcomes, switches = run_concurrently(calls, self._random)
        self.stats.peak_concurrency = max(self.stats.peak_concurrency, len(batches))
        if len(batches) > 1:
            self.stats.concurrent_invocations += len(batches)
        self.stats.interleaving_switches += switches
        for batch, event, outcome in zip(batches, events, outcomes, strict=True):
            self._settle(batch, event, outcome, result)

    def _settle(
        self,
        batch: list[_Message],
        event: dict[str, Any],
        outcome: HandlerResult,
        result: PollResult,
    ) -> None:
        self.stats.invocations += 1
        self.stats.messages_delivered += len(batch)
        result.progressed = True

        ids = [message.message_id for message in batch]
        verdict: BatchVerdict = (
            whole_batch_failure(f"function error: {outcome.error}")
            if outcome.error is not None
            else judge_response(
                outcome.response,
                report_batch_item_failures=self.settings.report_batch_item_failures,
                batch_ids=ids,
            )
        )
        if verdict.failed_ids is None:
            kept = batch
        else:
            failed = set(verdict.failed_ids)
            kept = [message for message in batch if message.message_id in failed]
        kept_ids = {id(message) for message in kept}
        done = [message for message in batch if id(message) not in kept_ids]
        done = self._put_some_back(done)
        self._delete(done)
        self.stats.messages_deleted += len(done)
        self.stats.messages_failed += len(kept)

        invocation = Invocation(
            source=self.queue.arn,
            item_ids=tuple(ids),
            outcome=(
                "success"
                if verdict.succeeded
                else "failure"
                if verdict.whole_batch_failed
                else "partial"
            ),
            failed_ids=tuple(message.message_id for message in kept),
            reason=verdict.reason,
            request_id=outcome.request_id,
            attempt=max(message.receive_count for message in batch),
            event=event,
            response=outcome.response,
            error=outcome.error,
            exception=outcome.exception,
        )
        self.invocations.append(invocation)
        result.invocations.append(invocation)


def _concurrency(requested: int | None, maximum: int | None) -> int:
    if requested is None:
        return maximum or 1
    if requested < 1:
        raise MappingConfigError(f"concurrency must be at least 1, got {requested}")
    if maximum is not None and requested > maximum:
        raise MappingConfigError(
            f"concurrency={requested} exceeds the mapping's MaximumConcurrency ({maximum})"
        )
    return requested
