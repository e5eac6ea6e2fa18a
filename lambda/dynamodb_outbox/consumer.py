"""Consumer toolkit: one function per event, a correct partial batch response per batch.

A consumer of the outbox reads an SQS queue fed by EventBridge or SNS. Delivery
is at least once end to end (stream retries, sweeper re-publishes, target
retries, SQS redelivery), so the same event can arrive more than once, in the
same batch or days later. This module turns "a function that handles ONE
event" into a Lambda handler that:

* handles every record on its own and answers with
  ``{"batchItemFailures": [{"itemIdentifier": <messageId>}]}`` (the mapping
  must set ``FunctionResponseTypes = ["ReportBatchItemFailures"]``), so one bad
  message returns to the queue, and after ``maxReceiveCount`` to the DLQ,
  while the rest of the batch is deleted;
* never answers with an empty or null identifier: Lambda reads that as "the
  whole batch failed" (docs/aws-semantics.md, "Partial batch responses"). A record that
  cannot be named is reported by raising instead, on purpose and loudly;
* on FIFO queues stops a message group at its first failure and returns that
  message plus every later message of its group, because processing past it
  would break the group's order, while the other groups of the batch carry on
  (Powertools' ``SqsFifoPartialProcessor(skip_group_on_error=True)``); a FIFO
  message without a group id stops the whole batch, the safe reading;
* runs the function at most once per event id and consumer, through Powertools
  idempotency on DynamoDB: a redelivered event is skipped (success), a failed
  attempt leaves no record (Powertools deletes it) so the retry runs, and an
  event another invocation is still processing fails here so it comes back
  later instead of running twice concurrently;
* treats an event replayed from the bus's archive like any redelivery (skipped
  when done), except when the replay's name asks this consumer to reprocess
  it: then once more per such replay (:mod:`dynamodb_outbox.replays`);
* refuses, without processing it, a message its bus or topic cannot have
  delivered (:mod:`dynamodb_outbox.sender_checks`): a replay name counts only
  on an EventBridge event from the bus the module configured.

"Once" has one gap no consumer-side library can close: if the function
succeeds but saving the COMPLETED record then fails, the message comes back and
runs again after the in-progress window. Effects that must never repeat need
their own conditional write; the reference consumer's ledger
(:mod:`dynamodb_outbox.ledger`) counts runs so that such a repeat shows.

Usage::

    from dynamodb_outbox.consumer import OutboxConsumer
    from dynamodb_outbox.envelope import Envelope

    consumer = OutboxConsumer(idempotency_table=os.environ["OUTBOX_IDEMPOTENCY_TABLE"])

    @consumer.handler
    def handler(event: Envelope) -> None:
        ...  # raise to fail this message only

An ``async def`` function works the same way: each event is awaited to the end,
under the same idempotency and partial batch rules, on one event loop kept for
the life of the process (:mod:`dynamodb_outbox._consumer_loop`), several
events at once (:mod:`dynamodb_outbox._consumer_batch`). A plain function that
*returns* an awaitable fails its message instead: nothing awaited it, so
nothing may be recorded as done. Whatever the function raises fails its
message only, ``KeyboardInterrupt`` excepted (:mod:`dynamodb_outbox._consumer_errors`);
no record is started that is not expected to end before the timeout
(:mod:`dynamodb_outbox._consumer_deadline`).

The handler's Lambda needs, on the idempotency table: ``dynamodb:PutItem``,
``dynamodb:GetItem``, ``dynamodb:UpdateItem``, ``dynamodb:DeleteItem``; on the
queue (for the event source mapping): ``sqs:ReceiveMessage``,
``sqs:DeleteMessage``, ``sqs:GetQueueAttributes``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Final, NotRequired, TypedDict, TypeVar, overload

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
    AmazonCloudWatchEMFProvider,
)
from aws_lambda_powertools.utilities.idempotency import (
    BasePersistenceLayer,
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
)
from aws_lambda_powertools.utilities.idempotency.base import IdempotencyHandler
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from dynamodb_outbox._clock import remaining_seconds
from dynamodb_outbox._consumer_batch import (
    BatchResult,
    Outcome,
    lanes_of,
    run_concurrently,
    run_in_order,
)
from dynamodb_outbox._consumer_deadline import Deadline, RecordDurations
from dynamodb_outbox._consumer_errors import (
    PROCESS_ENDING,
    ExceptionType,
    HandlerRaised,
    describe,
    describe_traceback,
    raised_at,
    type_name,
    unwrapped,
)
from dynamodb_outbox.envelope import Envelope, InvalidEnvelope
from dynamodb_outbox.event_ids import event_id_milliseconds
from dynamodb_outbox.ledger import EXPIRY_ATTR, KEY_ATTR
from dynamodb_outbox.replays import is_reprocess_for
from dynamodb_outbox.routing import Router
from dynamodb_outbox.sender_checks import (
    ExpectedSender,
    UntrustedSender,
    expected_sender_from_environment,
    read_body,
)

# Same namespace as the publisher, so one dashboard holds the whole pipeline.
from dynamodb_outbox.settings import (
    DEFAULT_METRICS_NAMESPACE,
    ENV_CONSUMER_NAME,
    ENV_EXPIRES_AFTER_SECONDS,
    ConfigurationError,
    integer_env,
)
from dynamodb_outbox.sizes import is_fifo
from dynamodb_outbox.stream_types import BatchItemFailure, PartialBatchResponse
from dynamodb_outbox.trace_context import TraceContext

__all__ = [
    "DEFAULT_EXPIRES_AFTER_SECONDS",
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_METRICS_NAMESPACE",
    "DEFAULT_STOP_MARGIN_SECONDS",
    "ENV_CONSUMER_NAME",
    "IDEMPOTENCY_EVENT_KEY",
    "METRIC_DUPLICATE",
    "METRIC_FAILED",
    "METRIC_PROCESSED",
    "METRIC_UNATTEMPTED",
    "METRIC_UNTRUSTED",
    "BatchItemFailure",
    "LambdaHandler",
    "MalformedBatch",
    "OutboxConsumer",
    "PartialBatchResponse",
    "SQSEvent",
    "SQSRecord",
    "SQSRecordAttributes",
    "idempotency_key_prefix",
    "is_fifo",
    "parse_body",
    "process_sqs_batch",
    "producer_log_keys",
    "resolve_expires_after_seconds",
]

#: The window when neither ``expires_after_seconds`` nor
#: ``$OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS`` gives one. Behind the module
#: the window is derived from every place a copy of an event can still come
#: from (modules/windows, docs/seams.md "Windows": 20 days with its defaults)
#: and given to each consumer in its environment; this default is only for a
#: consumer fed some other way, and is too short for a queue whose DLQ keeps
#: messages 14 days.
DEFAULT_EXPIRES_AFTER_SECONDS: Final = 7 * 24 * 60 * 60

_warned_without_window = False


def resolve_expires_after_seconds(
    explicit: int | None,
    environ: Mapping[str, str] | None = None,
    logger: Logger | None = None,
) -> int:
    """The idempotency window a consumer keeps records for.

    ``$OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS`` is what the module derived
    (docs/seams.md, "Windows"): an ``explicit`` window may lengthen it, never
    shorten it (:class:`~dynamodb_outbox.settings.ConfigurationError`: a copy
    of an event arriving after a shorter window would take effect twice).
    Without the variable, ``explicit`` or :data:`DEFAULT_EXPIRES_AFTER_SECONDS`;
    on Lambda (``$AWS_LAMBDA_FUNCTION_NAME`` set) the default is logged as a
    warning, once per process: the function was not given the module's
    ``consumer_environment`` (or its ``consumers`` output's ``environment``).
    """
    env = os.environ if environ is None else environ
    derived = (
        integer_env(env, ENV_EXPIRES_AFTER_SECONDS, 0, minimum=1)
        if env.get(ENV_EXPIRES_AFTER_SECONDS, "").strip()
        else None
    )
    if explicit is not None and explicit <= 0:
        raise ValueError("expires_after_seconds must be positive")
    if derived is not None:
        if explicit is not None and explicit < derived:
            raise ConfigurationError(
                f"expires_after_seconds={explicit} is shorter than {ENV_EXPIRES_AFTER_SECONDS}"
                f"={derived}, the window the module derived from every place a copy of an "
                "event can still come from (docs/seams.md, Windows): a copy arriving after "
                "the shorter window would take effect twice. Drop the argument, or pass at "
                f"least {derived}"
            )
        return explicit if explicit is not None else derived
    if explicit is not None:
        return explicit
    global _warned_without_window
    if env.get(_ENV_LAMBDA_FUNCTION_NAME) and not _warned_without_window:
        _warned_without_window = True
        (logger or _default_logger).warning(
            f"{ENV_EXPIRES_AFTER_SECONDS} is not set: event ids are remembered "
            f"{DEFAULT_EXPIRES_AFTER_SECONDS} s (7 days), shorter than a copy of an event "
            "can still arrive behind the module (20 days or more, docs/seams.md Windows). "
            "Merge the module's consumer_environment output into this function's environment"
        )
    return DEFAULT_EXPIRES_AFTER_SECONDS


DEFAULT_SERVICE_NAME: Final = "dynamodb-outbox-consumer"

_ENV_LAMBDA_FUNCTION_NAME: Final = "AWS_LAMBDA_FUNCTION_NAME"
_ENV_METRICS_NAMESPACE: Final = "POWERTOOLS_METRICS_NAMESPACE"
_ENV_SERVICE_NAME: Final = "POWERTOOLS_SERVICE_NAME"

#: The envelope field the idempotency record is keyed by (the ULID, end to end).
IDEMPOTENCY_EVENT_KEY: Final = "id"

METRIC_PROCESSED: Final = "ProcessedEvents"
METRIC_DUPLICATE: Final = "DuplicateEvents"
METRIC_FAILED: Final = "FailedEvents"
METRIC_UNATTEMPTED: Final = "UnattemptedEvents"
#: Messages refused because they are not what the module's bus or topic delivers
#: (dynamodb_outbox.sender_checks); each is also counted in FailedEvents.
METRIC_UNTRUSTED: Final = "UntrustedEvents"

#: The floor of the deadline rule: a record starts only with at least its
#: expected duration (the 90th percentile of those recently observed) plus this much left
#: (:mod:`dynamodb_outbox._consumer_deadline`). Small enough for Lambda's
#: default 3 s timeout; raise it for handlers whose durations vary widely.
DEFAULT_STOP_MARGIN_SECONDS: Final = 1.0

#: How many records of a batch an ``async def`` consumer runs at once. SQS
#: batches hold up to 10 messages without a batching window (Lambda's SQS event
#: source mapping, "BatchSize"), so 10 awaits a whole default batch together.
DEFAULT_MAX_CONCURRENCY: Final = 10

_default_logger = Logger(service=os.environ.get(_ENV_SERVICE_NAME, DEFAULT_SERVICE_NAME))


# --------------------------------------------------------------------------- wire shapes


class SQSRecordAttributes(TypedDict):
    """System attributes of a received message (FIFO ones only on FIFO queues)."""

    ApproximateReceiveCount: str
    SentTimestamp: str
    SenderId: str
    ApproximateFirstReceiveTimestamp: str
    MessageGroupId: NotRequired[str]
    MessageDeduplicationId: NotRequired[str]
    SequenceNumber: NotRequired[str]


class SQSRecord(TypedDict):
    """One message of an SQS event; ``messageId`` is its ``itemIdentifier``."""

    messageId: str
    receiptHandle: str
    body: str
    attributes: SQSRecordAttributes
    messageAttributes: dict[str, Any]
    md5OfBody: str
    eventSource: str
    eventSourceARN: str
    awsRegion: str


class SQSEvent(TypedDict):
    """What an SQS event source mapping passes to the function."""

    Records: list[SQSRecord]


#: The Lambda handler :meth:`OutboxConsumer.handler` builds.
LambdaHandler = Callable[[SQSEvent, LambdaContext], PartialBatchResponse]


class MalformedBatch(ValueError):
    """The event cannot be answered record by record; raising retries the whole batch."""


# --------------------------------------------------------------------------- parsing


def parse_body(body: object, *, parse_float: Callable[[str], Any] = float) -> Envelope:
    """The envelope an SQS message body carries, whoever delivered it.

    Data numbers with a fraction or an exponent are ``float`` unless
    ``parse_float`` says otherwise: ``parse_float=Decimal`` gives the exact
    digits the producer wrote (money), see :mod:`dynamodb_outbox.payload_json`.

    Three shapes reach a consumer queue:

    * EventBridge rule with an SQS target: the whole EventBridge event, whose
      ``detail`` is the envelope and ``detail-type`` its type;
    * SNS with raw message delivery: the envelope JSON itself;
    * SNS without raw delivery: ``{"Type": "Notification", "Message": "<envelope
      JSON>", ...}``. Accepted so that forgetting ``raw_message_delivery`` on a
      subscription costs nothing.

    Raises :class:`InvalidEnvelope` (with the reason) for anything else. It
    checks no sender: a consumer checks the one it was configured to expect
    (:mod:`dynamodb_outbox.sender_checks`).
    """
    return read_body(body, parse_float=parse_float).envelope


def _message_group(record: Mapping[str, Any]) -> str | None:
    attributes = record.get("attributes")
    group = attributes.get("MessageGroupId") if isinstance(attributes, Mapping) else None
    return group if isinstance(group, str) and group else None


def idempotency_key_prefix(consumer_name: str) -> str:
    """The prefix of this consumer's idempotency keys: ``idempotency#<consumer name>``.

    Powertools stores ``<prefix>#<md5 of the event id>``. A fixed prefix (instead
    of Powertools' default, the Lambda function name plus the Python function's
    qualified name) keeps keys stable across code refactors, lets several
    consumers share one table without deduplicating each other's events, and
    lets IAM restrict a consumer to its own keys (``dynamodb:LeadingKeys``).
    """
    return f"idempotency#{_checked_name(consumer_name)}"


def _checked_name(consumer_name: str) -> str:
    # "#" separates key parts; a name containing it could collide with another
    # consumer's prefix ("a#b" starts with "a#"). Lambda names cannot hold "#".
    if not consumer_name or "#" in consumer_name:
        raise ValueError(f"consumer name must be non-empty and without '#': {consumer_name!r}")
    return consumer_name


def _message_ids(event: Mapping[str, Any]) -> list[str]:
    """Every record's messageId, checked BEFORE any record is processed.

    A record without a usable messageId cannot be listed in
    ``batchItemFailures``: an empty or null ``itemIdentifier`` makes Lambda fail
    the whole batch anyway, and leaving it out would report it as a success and
    delete it. So the only honest answer is to raise (whole batch retried and,
    if it keeps happening, sent to the DLQ). Checking first means nothing was
    done for a batch that is going to be retried in full.
    """
    records = event.get("Records") if isinstance(event, Mapping) else None
    if not isinstance(records, list):
        raise MalformedBatch("event has no 'Records' list: is this an SQS event?")
    ids: list[str] = []
    for position, record in enumerate(records):
        message_id = record.get("messageId") if isinstance(record, Mapping) else None
        if not isinstance(message_id, str) or not message_id:
            raise MalformedBatch(
                f"record {position} has no messageId, so it cannot be reported on its own; "
                "failing the whole batch so that it is retried rather than deleted"
            )
        ids.append(message_id)
    return ids


# --------------------------------------------------------------------------- processing


def process_sqs_batch(
    event: SQSEvent,
    process_one: Callable[[Envelope], object],
    *,
    persistence_store: BasePersistenceLayer,
    consumer_name: str,
    expires_after_seconds: int | None = None,
    lambda_context: LambdaContext | None = None,
    logger: Logger | None = None,
    metrics: Metrics | None = None,
    stop_margin_seconds: float = DEFAULT_STOP_MARGIN_SECONDS,
    parse_float: Callable[[str], Any] = float,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    log_exception_text: bool = False,
    record_durations: RecordDurations | None = None,
    expected_sender: ExpectedSender | None = None,
) -> PartialBatchResponse:
    """Run ``process_one`` once per event of an SQS batch; report failures by messageId.

    ``process_one`` receives the :class:`Envelope`: the event's ``data`` and its
    CloudEvents attributes (``id``, ``type``, ``source``, ``subject``, ``time``,
    ``correlation_id``, ``traceparent``..., all of them as
    :attr:`Envelope.attributes`). It fails a message by
    raising, and its return value is ignored (storing it would make a
    non-JSON return value fail the event AFTER its side effects ran).

    ``persistence_store`` holds the idempotency records (a
    ``DynamoDBPersistenceLayer`` in production; any Powertools persistence
    layer works). ``consumer_name`` scopes the keys, see
    :func:`idempotency_key_prefix`. Pass ``lambda_context``: Powertools then
    lets an in-progress record expire when this invocation would have timed
    out, so a crashed attempt is retried on the next delivery; without it the
    record blocks the event until ``expires_after_seconds``, which defaults to
    ``$OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS`` and may not be shorter than
    it (:func:`resolve_expires_after_seconds`).

    ``metrics`` (optional) receives ProcessedEvents, DuplicateEvents,
    FailedEvents and UnattemptedEvents counts; flushing them is the caller's job.

    With a ``lambda_context``, a record is started only when the invocation has at least
    the expected record duration (90th percentile of the recent ones) plus
    ``stop_margin_seconds`` left (the first record of an invocation always starts): the
    records never attempted are returned in ``batchItemFailures``, so a slow batch ends
    in time with the done ones deleted, instead of timing out and returning every
    message, done ones included, one receive closer to the DLQ
    (:mod:`dynamodb_outbox._consumer_deadline`). ``record_durations`` keeps the
    durations across invocations (:class:`OutboxConsumer` keeps one per handler);
    without it only this batch's records are known.

    An ``async def`` ``process_one`` runs on the process's event loop, kept
    across invocations, with up to ``max_concurrency`` records at once; on a
    FIFO queue each message group still runs one record at a time, in order.

    Whatever ``process_one`` raises fails its record only, ``SystemExit``,
    ``GeneratorExit`` and ``asyncio.CancelledError`` included; a
    ``KeyboardInterrupt`` ends the batch (:mod:`dynamodb_outbox._consumer_errors`
    says why). The log line names the exception's type and where it was
    raised, not its text, which may quote the payload: ``log_exception_text=True``
    adds the text and the traceback, for a consumer whose payloads may be logged.

    ``parse_float`` reads the data's non-integer numbers (see :func:`parse_body`).

    ``expected_sender`` is what every message must show (transport, bus or
    topic: :mod:`dynamodb_outbox.sender_checks`); None reads it from the
    environment the module sets. A message that does not show it fails alone,
    counted in UntrustedEvents, and is never processed; a replay name is
    honoured only on a genuine EventBridge event from the expected bus.

    Raises :class:`MalformedBatch` when a record has no messageId (see
    :func:`_message_ids`), ``ValueError`` when ``persistence_store`` was
    configured for another function, and
    :class:`~dynamodb_outbox.settings.ConfigurationError` when the environment
    names a sender half-way (``OUTBOX_CONSUMER_TRANSPORT`` without its bus or
    topic);
    all are whole-batch failures by design: the messages stay queued.
    Every other problem (bad body, function error, event in progress elsewhere,
    idempotency store error) fails its record only.
    """
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
    log = logger or _default_logger
    expires_after_seconds = resolve_expires_after_seconds(expires_after_seconds, logger=log)
    message_ids = _message_ids(event)
    records: Sequence[SQSRecord] = event["Records"]
    fifo = any(is_fifo(record.get("eventSourceARN")) for record in records)

    config = IdempotencyConfig(
        event_key_jmespath=IDEMPOTENCY_EVENT_KEY,
        raise_on_no_idempotency_key=True,
        expires_after_seconds=expires_after_seconds,
    )
    if lambda_context is not None:
        if callable(getattr(lambda_context, "get_remaining_time_in_millis", None)):
            config.register_lambda_context(lambda_context)
        else:
            # Powertools would call the missing method inside its store calls
            # and fail every record; run without the in-progress expiry instead.
            log.warning("lambda_context has no get_remaining_time_in_millis(); ignoring it")
    key_prefix = idempotency_key_prefix(consumer_name)
    _check_store(persistence_store, config, key_prefix)
    sender = expected_sender if expected_sender is not None else expected_sender_from_environment()

    groups = [_message_group(record) if fifo else None for record in records]
    lanes = lanes_of(groups, fifo)
    deadline = Deadline(
        remaining_seconds(lambda_context),
        record_durations or RecordDurations(),
        stop_margin_seconds,
    )

    def run_record(run_one: Callable[[Envelope], None], index: int) -> Outcome:
        return _process_record(
            message_ids[index],
            records[index],
            run_one,
            persistence_store,
            config,
            key_prefix,
            log,
            parse_float,
            consumer_name=consumer_name,
            expected_sender=sender,
            log_exception_text=log_exception_text,
        )

    result: BatchResult
    if _is_async(process_one):
        from dynamodb_outbox._consumer_loop import run_to_end  # asyncio only for async consumers

        aborted: Future[None] = Future()

        async def run_batch() -> BatchResult:
            run_one = _awaited_on_loop(process_one, aborted)
            return await run_concurrently(
                message_ids,
                lanes,
                functools.partial(run_record, run_one),
                deadline,
                log,
                groups=groups,
                workers=workers,
                limit=max_concurrency,
            )

        # One worker per record in flight: the loop's default executor has
        # min(32, CPUs + 4) threads, a limit below max_concurrency unannounced.
        with ThreadPoolExecutor(max_concurrency, thread_name_prefix="outbox-record") as workers:
            try:
                result = run_to_end(run_batch)
            except BaseException:
                aborted.set_result(None)  # no worker may wait for the stopped loop
                raise
    else:
        result = run_in_order(
            message_ids,
            lanes,
            functools.partial(run_record, _refusing_awaitables(process_one)),
            deadline,
            log,
            groups=groups,
        )
    outcomes, unattempted, failures = result.outcomes, result.unattempted, result.failures

    if metrics is not None:
        metrics.add_metric(METRIC_PROCESSED, MetricUnit.Count, outcomes[Outcome.PROCESSED])
        metrics.add_metric(METRIC_DUPLICATE, MetricUnit.Count, outcomes[Outcome.DUPLICATE])
        # An untrusted message is a failed one too.
        failed = outcomes[Outcome.FAILED] + outcomes[Outcome.UNTRUSTED]
        metrics.add_metric(METRIC_FAILED, MetricUnit.Count, failed)
        metrics.add_metric(METRIC_UNATTEMPTED, MetricUnit.Count, unattempted)
        metrics.add_metric(METRIC_UNTRUSTED, MetricUnit.Count, outcomes[Outcome.UNTRUSTED])
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failures]}


def _is_async(process_one: Callable[..., object]) -> bool:
    # A callable object whose class defines ``async def __call__`` counts too.
    return inspect.iscoroutinefunction(process_one) or inspect.iscoroutinefunction(
        type(process_one).__call__
    )


def _refusing_awaitables(process_one: Callable[[Envelope], object]) -> Callable[[Envelope], None]:
    """A plain ``process_one`` that fails the event when it returns an awaitable
    or a generator (a ``def`` or ``async def`` with a stray ``yield``).

    Neither ran: completing the event would lose it.
    """
    name = getattr(process_one, "__qualname__", repr(process_one))

    def run_one(envelope: Envelope) -> None:
        result = process_one(envelope)
        if inspect.isgenerator(result) or inspect.isasyncgen(result):
            # A stray `yield` makes the body a generator that nothing iterates.
            if inspect.isgenerator(result):
                result.close()
            raise TypeError(
                f"{name} is a generator function (it contains `yield`): its body never "
                "ran; the event is failed, not completed"
            )
        if not inspect.isawaitable(result):
            return
        close = getattr(result, "close", None)
        if callable(close):
            close()  # no "never awaited" warning: the error below says it all
        raise TypeError(
            f"{name} returned an awaitable instead of handling the event: declare it "
            "`async def` so the consumer awaits it; the event is failed, not completed"
        )

    return run_one


def _awaited_on_loop(
    process_one: Callable[[Envelope], object], aborted: Future[None]
) -> Callable[[Envelope], None]:
    """An ``async def`` ``process_one`` as a blocking call, for a record's worker thread.

    The coroutine runs on the running loop (the process loop, where the
    function's clients live) and the worker waits for its end, so the event
    is COMPLETED only after it. Whatever it raises is raised here, in the
    record's worker; a ``KeyboardInterrupt`` is left to asyncio, which stops
    the loop with it, and ``aborted`` then tells every worker still waiting
    that no loop will run its coroutine (it fails as cancelled).
    """
    import asyncio

    loop = asyncio.get_running_loop()

    def run_one(envelope: Envelope) -> None:
        result = process_one(envelope)
        if not inspect.isawaitable(result):
            return
        running = asyncio.run_coroutine_threadsafe(_captured(result), loop)
        either: list[Future[Any]] = [running, aborted]
        wait(either, return_when=FIRST_COMPLETED)
        if not running.done():
            running.cancel()
            raise asyncio.CancelledError("the batch was stopped before this event ended")
        raised = running.result()
        if raised is not None:
            raise raised

    return run_one


async def _captured(awaitable: Awaitable[object]) -> BaseException | None:
    # Returned, not raised: asyncio re-raises SystemExit out of the loop, and a
    # CancelledError would cancel the future the worker waits on instead of
    # telling it what happened.
    try:
        await awaitable
    except PROCESS_ENDING:
        raise
    except BaseException as exc:
        return exc
    return None


def _check_store(store: BasePersistenceLayer, config: IdempotencyConfig, key_prefix: str) -> None:
    # Powertools configures a persistence layer once and then ignores later
    # configs. A store first configured by another idempotent function would
    # hash the wrong field and silently stop deduplicating: refuse it.
    store.configure(config=config, key_prefix=key_prefix)
    if store.event_key_jmespath != IDEMPOTENCY_EVENT_KEY:
        raise ValueError(
            f"the persistence store is already configured with event_key_jmespath="
            f"{store.event_key_jmespath!r}; give the consumer a persistence store of its own"
        )
    if store.expires_after_seconds != config.expires_after_seconds:
        raise ValueError(
            f"the persistence store is already configured with expires_after_seconds="
            f"{store.expires_after_seconds}, not {config.expires_after_seconds}"
        )


def _process_record(
    message_id: str,
    record: SQSRecord,
    process_one: Callable[[Envelope], object],
    store: BasePersistenceLayer,
    config: IdempotencyConfig,
    key_prefix: str,
    log: Logger,
    parse_float: Callable[[str], Any],
    *,
    consumer_name: str,
    expected_sender: ExpectedSender,
    log_exception_text: bool = False,
) -> Outcome:
    attributes = record.get("attributes")
    receive_count = (
        attributes.get("ApproximateReceiveCount") if isinstance(attributes, Mapping) else None
    )
    try:
        delivered = read_body(record.get("body"), expected_sender, parse_float=parse_float)
    except UntrustedSender as exc:
        # Not what the module's bus or topic delivers: a forgery, or a queue
        # shared with another sender. Never processed; the DLQ keeps it.
        log.error(
            "message is not from the outbox's bus or topic; refused, returning it to the "
            "queue (DLQ after maxReceiveCount)",
            extra={"message_id": message_id, "reason": str(exc), "receive_count": receive_count},
        )
        return Outcome.UNTRUSTED
    except Exception as exc:
        # A poison message fails alone, whatever parsing it raised (InvalidEnvelope,
        # or worse); SQS moves it to the DLQ after maxReceiveCount receives. The
        # log line says why it will end there.
        # The toolkit's own reasons name fields, not values; any other
        # exception's text could quote the body, so only its type is logged.
        reason = (
            describe(exc).partition(": ")[2] if isinstance(exc, InvalidEnvelope) else type_name(exc)
        )
        log.error(
            "message is not a valid outbox event; returning it to the queue (DLQ after "
            "maxReceiveCount)",
            extra={"message_id": message_id, "reason": reason, "receive_count": receive_count},
        )
        return Outcome.FAILED

    # A replayed event is deduplicated by its id like any other, unless the
    # operator asked this consumer to reprocess it (dynamodb_outbox.replays).
    # read_body returns a replay name only from a genuine EventBridge replay.
    envelope, replay = delivered.envelope, delivered.replay_name
    reprocess = delivered.replay_checked and is_reprocess_for(replay, consumer_name)
    if replay and not reprocess and _older_than(envelope.id, config.expires_after_seconds):
        # Its record, if it was processed, may have expired: running it could
        # apply it twice. Only a replay asked to reprocess may run it.
        log.warning(
            "replayed event is older than the idempotency window, so whether it was "
            "processed is no longer known: skipped (a replay asked to reprocess runs it)",
            extra={"message_id": message_id, "event_id": envelope.id, "replay_name": replay},
        )
        return Outcome.DUPLICATE

    # Every line logged for this record, the toolkit's and the function's own
    # through the same Logger, carries the ids that join it to the producer's
    # request and trace. Thread-safe keys: concurrent batches each see their own record.
    with _record_log_keys(log, **producer_log_keys(envelope)):
        return _process_envelope(
            message_id,
            receive_count,
            envelope,
            process_one,
            store,
            config,
            key_prefix,
            log,
            replay=replay,
            reprocess=reprocess,
            log_exception_text=log_exception_text,
        )


def producer_log_keys(envelope: Envelope) -> dict[str, str | None]:
    """The keys that join a consumer's log lines to the producer of ``envelope``.

    ``correlation_id``; ``trace_id``, the producer's trace id in X-Ray's form
    (``1-<8 hex>-<24 hex>``, as Powertools writes its own ``xray_trace_id``);
    ``traceparent``, the producer's W3C trace context as the event carries it.
    A key is None (not logged) when the event has no such attribute.
    """
    trace = TraceContext.parse(envelope.traceparent, envelope.tracestate)
    return {
        "correlation_id": envelope.correlation_id,
        "trace_id": trace.xray_trace_id if trace else None,
        "traceparent": envelope.traceparent,
    }


def _older_than(event_id: str, seconds: int) -> bool:
    try:
        made = event_id_milliseconds(event_id) / 1000
    except ValueError:
        return True  # no time to tell by: the safe answer
    return made < time.time() - seconds


@contextlib.contextmanager
def _record_log_keys(log: Logger, **keys: str | None) -> Iterator[None]:
    """``keys`` on every line ``log`` writes in this thread until the block ends.

    A Logger that cannot hold keys (an orphaned child Logger raises) only loses
    them: the record is still processed, never failed for its logging.
    """
    try:
        log.thread_safe_append_keys(**keys)
    except Exception:
        yield
        return
    try:
        yield
    finally:
        log.thread_safe_remove_keys(keys)


def _process_envelope(
    message_id: str,
    receive_count: object,
    envelope: Envelope,
    process_one: Callable[[Envelope], object],
    store: BasePersistenceLayer,
    config: IdempotencyConfig,
    key_prefix: str,
    log: Logger,
    *,
    replay: str | None = None,
    reprocess: bool = False,
    log_exception_text: bool = False,
) -> Outcome:
    fields = {
        "message_id": message_id,
        "event_id": envelope.id,
        "event_type": envelope.type,
        "receive_count": receive_count,
    }
    payload = envelope.to_dict()
    if replay:
        fields["replay_name"] = replay
    if reprocess:
        # Its own record per replay: once more than before, once however often
        # this replay delivers it.
        payload[IDEMPOTENCY_EVENT_KEY] = f"{envelope.id}#{replay}"
        log.info("replayed event to be reprocessed, as the replay's name asks", extra=fields)
    ran = False

    def run() -> None:
        nonlocal ran
        ran = True
        try:
            process_one(envelope)
        except Exception:
            raise
        except PROCESS_ENDING:
            raise
        except BaseException as exc:
            # Powertools deletes the in-progress record for an Exception only.
            raise HandlerRaised(exc) from exc

    try:
        IdempotencyHandler(
            function=run,
            function_payload=payload,
            config=config,
            persistence_store=store,
            key_prefix=key_prefix,
            function_args=(),
            function_kwargs={},
        ).handle()
    except IdempotencyAlreadyInProgressError:
        # Another invocation holds this event (a concurrent duplicate). Running
        # it here could run it twice; failing returns it to the queue, and by
        # its next delivery the other run has completed (-> skipped) or failed
        # (record deleted -> runs) or timed out (record expired -> runs).
        log.warning(
            "event is being processed by another invocation; returning it to the queue",
            extra=fields,
        )
        return Outcome.FAILED
    except Exception as exc:
        # The function raised (Powertools deleted the in-progress record, so the
        # retry runs it again) or the idempotency store failed.
        _log_failure(log, fields, unwrapped(exc), with_text=log_exception_text)
        return Outcome.FAILED

    if not ran:
        log.info("duplicate event skipped: already processed", extra=fields)
        return Outcome.DUPLICATE
    return Outcome.PROCESSED


def _log_failure(
    log: Logger, fields: Mapping[str, object], exc: BaseException, *, with_text: bool
) -> None:
    """The failure's type and where it was raised; its text and traceback only if asked.

    An exception's text often quotes the data that failed (a validation error
    repeats the offending value): payload values stay out of the logs unless
    the consumer opts in with ``log_exception_text=True``.
    """
    extra = {**fields, "exception_type": ExceptionType(exc), "raised_at": raised_at(exc)}
    message = "event processing failed; returning it to the queue"
    if not with_text:
        log.error(message, extra=extra)
        return
    extra["reason"] = describe(exc)
    extra["traceback"] = describe_traceback(exc)
    log.error(message, extra=extra)


# --------------------------------------------------------------------------- the handler


def _resolve_name(name: str | None) -> str:
    from_environment = os.environ.get(ENV_CONSUMER_NAME)
    if name and from_environment and name != from_environment:
        # The module grants this function its idempotency keys by its consumer
        # key (IAM dynamodb:LeadingKeys on idempotency#<key>#...) and sets that
        # key here: another name in code would be denied every write on AWS.
        raise ConfigurationError(
            f"the consumer is named {name!r} in code but {ENV_CONSUMER_NAME}={from_environment!r} "
            "(the module's consumers key, which its IAM policy grants): drop name=... to use "
            f"the environment's, or make them the same"
        )
    resolved = name or from_environment or os.environ.get(_ENV_LAMBDA_FUNCTION_NAME)
    if not resolved:
        raise ValueError(
            f"the consumer needs a name to scope its idempotency keys: pass name=..., "
            f"or set {ENV_CONSUMER_NAME} (AWS_LAMBDA_FUNCTION_NAME is used on Lambda)"
        )
    return _checked_name(resolved)


_Model = TypeVar("_Model")


class OutboxConsumer:
    """Builds poison-safe, idempotent SQS handlers from one-event functions.

    Give it the idempotency table (``idempotency_table``, hash key ``id`` of
    type S, TTL on ``expiration``) or, in tests, any Powertools
    ``persistence_store``. ``name`` scopes the idempotency keys; it defaults to
    ``$OUTBOX_CONSUMER_NAME`` (the module sets it to the consumer's key), then the
    Lambda function name; a ``name`` that differs from ``$OUTBOX_CONSUMER_NAME``
    raises :class:`~dynamodb_outbox.settings.ConfigurationError` (IAM would deny
    its idempotency writes). ``expires_after_seconds`` (how long an event id is
    remembered) defaults to ``$OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS``, which
    the module sets to the window it derives (its ``consumer_environment``
    output, or its ``consumers`` output's ``environment``), then to
    :data:`DEFAULT_EXPIRES_AFTER_SECONDS` (logged as a warning on Lambda); an
    explicit value shorter than the variable raises
    :class:`~dynamodb_outbox.settings.ConfigurationError`
    (:func:`resolve_expires_after_seconds`). Logs go to
    ``logger`` (default: a Powertools Logger named ``$POWERTOOLS_SERVICE_NAME``
    or the consumer name); metrics to ``metrics`` (default: CloudWatch EMF in
    ``$POWERTOOLS_METRICS_NAMESPACE`` or ``DynamoDBOutbox``, dimension
    ``service`` = the same service name), flushed after every batch.
    ``parse_float=Decimal`` hands ``process_one`` data numbers with their
    exact digits instead of floats (see :mod:`dynamodb_outbox.payload_json`).
    ``max_concurrency`` bounds how many records an ``async def`` function
    handles at once; ``log_exception_text=True`` puts a failed record's
    exception text and traceback in the log line, which may quote its payload
    (see :func:`process_sqs_batch`). The idempotency table's client is made
    on the first batch, not when the module is imported.
    ``expected_sender`` is the bus or topic every message must come from; it
    defaults to what the environment the module sets says
    (:func:`~dynamodb_outbox.sender_checks.expected_sender_from_environment`).
    """

    def __init__(
        self,
        idempotency_table: str | None = None,
        *,
        persistence_store: BasePersistenceLayer | None = None,
        name: str | None = None,
        expires_after_seconds: int | None = None,
        logger: Logger | None = None,
        metrics: Metrics | None = None,
        stop_margin_seconds: float = DEFAULT_STOP_MARGIN_SECONDS,
        parse_float: Callable[[str], Any] = float,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        log_exception_text: bool = False,
        expected_sender: ExpectedSender | None = None,
    ) -> None:
        if (idempotency_table is None) == (persistence_store is None):
            raise ValueError("give exactly one of idempotency_table or persistence_store")
        self.name = _resolve_name(name)
        # What the module derives (its consumer_environment or `consumers`
        # output, the reference consumer's environment); never shorter.
        self.expires_after_seconds = resolve_expires_after_seconds(
            expires_after_seconds, logger=logger
        )
        # Resolved again per batch from what the caller gave, so the window
        # follows the environment the function runs in (not the import's).
        self._explicit_expires_after_seconds = expires_after_seconds
        self.stop_margin_seconds = stop_margin_seconds
        self.parse_float = parse_float
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        self.max_concurrency = max_concurrency
        self.log_exception_text = log_exception_text
        self.idempotency_table = idempotency_table
        self._persistence_store = persistence_store
        # Read once, so a misconfigured environment fails at construction.
        self.expected_sender = (
            expected_sender if expected_sender is not None else expected_sender_from_environment()
        )
        service = os.environ.get(_ENV_SERVICE_NAME) or self.name
        self.logger = logger if logger is not None else Logger(service=service)
        # A private EMF provider: Powertools' default Metrics share one global
        # metric set, so flushing ours would also flush (under our namespace)
        # whatever the user's own Metrics instance collected.
        self.metrics = (
            metrics
            if metrics is not None
            else Metrics(
                provider=AmazonCloudWatchEMFProvider(
                    namespace=os.environ.get(_ENV_METRICS_NAMESPACE) or DEFAULT_METRICS_NAMESPACE,
                    service=service,
                )
            )
        )

    @property
    def persistence_store(self) -> BasePersistenceLayer:
        """The idempotency store; a DynamoDB one (and its boto3 client) is made on first use.

        Not at import: a cold start with nothing to do makes no client, and
        importing the handler needs no AWS region or credentials.
        """
        if self._persistence_store is None:
            self._persistence_store = DynamoDBPersistenceLayer(
                table_name=str(self.idempotency_table), key_attr=KEY_ATTR, expiry_attr=EXPIRY_ATTR
            )
        return self._persistence_store

    def process_batch(
        self,
        event: SQSEvent,
        process_one: Callable[[Envelope], object],
        lambda_context: LambdaContext | None = None,
        *,
        record_durations: RecordDurations | None = None,
    ) -> PartialBatchResponse:
        """:func:`process_sqs_batch` with this consumer's store, name, logger and metrics."""
        return process_sqs_batch(
            event,
            process_one,
            persistence_store=self.persistence_store,
            consumer_name=self.name,
            expires_after_seconds=self._explicit_expires_after_seconds,
            lambda_context=lambda_context,
            logger=self.logger,
            metrics=self.metrics,
            stop_margin_seconds=self.stop_margin_seconds,
            parse_float=self.parse_float,
            max_concurrency=self.max_concurrency,
            log_exception_text=self.log_exception_text,
            record_durations=record_durations,
            expected_sender=self.expected_sender,
        )

    @overload
    def handler(self, process_one: Callable[[Envelope], object]) -> LambdaHandler: ...

    @overload
    def handler(
        self, *, model: type[_Model]
    ) -> Callable[[Callable[[Envelope, _Model], object]], LambdaHandler]: ...

    def handler(
        self,
        process_one: Callable[[Envelope], object] | None = None,
        *,
        model: type[Any] | None = None,
    ) -> LambdaHandler | Callable[[Callable[[Envelope, Any], object]], LambdaHandler]:
        """Decorator: ``process_one(envelope)`` becomes ``handler(event, context)``.

        ``process_one`` may be ``async def``: each event is then awaited (see the
        module docstring). The handler keeps its name and docstring.

        ``consumer.handler(router)`` with a :class:`~dynamodb_outbox.routing.Router`
        runs the route of each event's type.

        ``@consumer.handler(model=OrderCreated)`` (a Pydantic v2 model) calls
        ``process_one(envelope, OrderCreated.model_validate(envelope.data))``;
        a payload the model refuses fails its message like any exception
        (:mod:`dynamodb_outbox.typed_payload`).
        """
        if process_one is None:
            if model is None:
                raise TypeError("consumer.handler needs a function, or model= to decorate one")
            from dynamodb_outbox.typed_payload import with_payload_model

            chosen = model

            def decorate(typed: Callable[[Envelope, Any], object]) -> LambdaHandler:
                return self._handler(with_payload_model(typed, chosen))

            return decorate
        if model is not None:
            raise TypeError("use @consumer.handler(model=...) to parse payloads with a model")
        if isinstance(process_one, Router):  # routing by event type (dynamodb_outbox.routing)
            return self._handler(process_one.process_one())
        return self._handler(process_one)

    def _handler(self, process_one: Callable[[Envelope], object]) -> LambdaHandler:
        # What this handler's records took, kept across warm invocations.
        durations = RecordDurations()

        @functools.wraps(process_one)
        def lambda_handler(event: SQSEvent, context: LambdaContext) -> PartialBatchResponse:
            response = self.process_batch(event, process_one, context, record_durations=durations)
            # Counts are added once the batch is answered; a MalformedBatch
            # raise leaves none, and there is nothing to flush.
            self._flush_metrics()
            return response

        # Who handles (its name, its idempotency table), for tools that wire
        # the handler as the module would: the testing kit refuses a name that
        # is not the consumer's key. functools.wraps copies it to a wrapper.
        lambda_handler.outbox_consumer = self  # type: ignore[attr-defined]
        return lambda_handler

    def _flush_metrics(self) -> None:
        # Metrics are a by-product: a flush error must not turn a processed
        # batch into a failed one (which would redeliver every message).
        try:
            self.metrics.flush_metrics()
        except Exception:
            self.logger.exception("could not flush consumer metrics")
        finally:
            # Powertools keeps the set when metrics are disabled
            # (POWERTOOLS_METRICS_DISABLED): do not let it grow across invocations.
            self.metrics.clear_metrics()
