"""One SQS batch: every record parsed, checked, run once, and reported on its own."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.idempotency import BasePersistenceLayer, IdempotencyConfig
from aws_lambda_powertools.utilities.typing import LambdaContext

from dynamodb_outbox._clock import remaining_seconds
from dynamodb_outbox.consumer._batch import (
    BatchResult,
    Outcome,
    lanes_of,
    run_concurrently,
    run_in_order,
)
from dynamodb_outbox.consumer._deadline import Deadline, RecordDurations
from dynamodb_outbox.consumer._errors import describe, type_name
from dynamodb_outbox.consumer._idempotency import (
    IDEMPOTENCY_EVENT_KEY,
    check_store,
    idempotency_key_prefix,
    process_envelope,
    resolve_expires_after_seconds,
)
from dynamodb_outbox.consumer._logging import default_logger, producer_log_keys, record_log_keys
from dynamodb_outbox.consumer._messages import SQSEvent, SQSRecord, message_group
from dynamodb_outbox.consumer._messages import message_ids as checked_message_ids
from dynamodb_outbox.envelope import Envelope, InvalidEnvelope
from dynamodb_outbox.event_ids import event_id_milliseconds
from dynamodb_outbox.replays import is_reprocess_for
from dynamodb_outbox.sender_checks import (
    ExpectedSender,
    UntrustedSender,
    expected_sender_from_environment,
    read_body,
)
from dynamodb_outbox.sizes import is_fifo
from dynamodb_outbox.stream_types import PartialBatchResponse

METRIC_PROCESSED: Final = "ProcessedEvents"


METRIC_DUPLICATE: Final = "DuplicateEvents"


METRIC_FAILED: Final = "FailedEvents"


METRIC_UNATTEMPTED: Final = "UnattemptedEvents"


#: Messages refused because they are not what the module's bus or topic delivers
#: (dynamodb_outbox.sender_checks); each is also counted in FailedEvents.
METRIC_UNTRUSTED: Final = "UntrustedEvents"


#: The floor of the deadline rule: a record starts only with at least its
#: expected duration (the 90th percentile of those recently observed) plus this much left
#: (:mod:`dynamodb_outbox.consumer._deadline`). Small enough for Lambda's
#: default 3 s timeout; raise it for handlers whose durations vary widely.
DEFAULT_STOP_MARGIN_SECONDS: Final = 1.0


#: How many records of a batch an ``async def`` consumer runs at once. SQS
#: batches hold up to 10 messages without a batching window (Lambda's SQS event
#: source mapping, "BatchSize"), so 10 awaits a whole default batch together.
DEFAULT_MAX_CONCURRENCY: Final = 10


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
    (:mod:`dynamodb_outbox.consumer._deadline`). ``record_durations`` keeps the
    durations across invocations (:class:`OutboxConsumer` keeps one per handler);
    without it only this batch's records are known.

    An ``async def`` ``process_one`` runs on the process's event loop, kept
    across invocations, with up to ``max_concurrency`` records at once; on a
    FIFO queue each message group still runs one record at a time, in order.

    Whatever ``process_one`` raises fails its record only, ``SystemExit``,
    ``GeneratorExit`` and ``asyncio.CancelledError`` included; a
    ``KeyboardInterrupt`` ends the batch (:mod:`dynamodb_outbox.consumer._errors`
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
    :func:`~dynamodb_outbox.consumer._messages.message_ids`), ``ValueError``
    when ``persistence_store`` was configured for another function, and
    :class:`~dynamodb_outbox.settings.ConfigurationError` when the environment
    names a sender half-way (``OUTBOX_CONSUMER_TRANSPORT`` without its bus or
    topic);
    all are whole-batch failures by design: the messages stay queued.
    Every other problem (bad body, function error, event in progress elsewhere,
    idempotency store error) fails its record only.
    """
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
    log = logger or default_logger
    expires_after_seconds = resolve_expires_after_seconds(expires_after_seconds, logger=log)
    message_ids = checked_message_ids(event)
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
    check_store(persistence_store, config, key_prefix)
    sender = expected_sender if expected_sender is not None else expected_sender_from_environment()

    groups = [message_group(record) if fifo else None for record in records]
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
        # asyncio only for async consumers
        import asyncio

        from dynamodb_outbox.consumer._handover import Handover
        from dynamodb_outbox.consumer._loop import run_to_end

        handover = Handover()

        async def run_batch() -> BatchResult:
            run_one = handover.awaited_on(asyncio.get_running_loop(), process_one)
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
                result = run_to_end(run_batch, on_stop=handover.close)
            except BaseException:
                handover.release()  # no worker may wait for the stopped loop
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
    with record_log_keys(log, **producer_log_keys(envelope)):
        return process_envelope(
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


def _older_than(event_id: str, seconds: int) -> bool:
    try:
        made = event_id_milliseconds(event_id) / 1000
    except ValueError:
        return True  # no time to tell by: the safe answer
    return made < time.time() - seconds
