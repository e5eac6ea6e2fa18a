"""The facade: :class:`OutboxConsumer` builds the Lambda handler from a one-event function."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar, overload

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
    AmazonCloudWatchEMFProvider,
)
from aws_lambda_powertools.utilities.idempotency import (
    BasePersistenceLayer,
    DynamoDBPersistenceLayer,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from dynamodb_outbox.consumer._deadline import RecordDurations
from dynamodb_outbox.consumer._idempotency import checked_name, resolve_expires_after_seconds
from dynamodb_outbox.consumer._logging import (
    ENV_LAMBDA_FUNCTION_NAME,
    ENV_METRICS_NAMESPACE,
    ENV_SERVICE_NAME,
)
from dynamodb_outbox.consumer._messages import LambdaHandler, SQSEvent
from dynamodb_outbox.consumer._processing import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_STOP_MARGIN_SECONDS,
    process_sqs_batch,
)
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.ledger import EXPIRY_ATTR, KEY_ATTR
from dynamodb_outbox.routing import Router
from dynamodb_outbox.sender_checks import ExpectedSender, expected_sender_from_environment
from dynamodb_outbox.settings import (
    DEFAULT_METRICS_NAMESPACE,
    ENV_CONSUMER_NAME,
    ConfigurationError,
)
from dynamodb_outbox.stream_types import PartialBatchResponse


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
    resolved = name or from_environment or os.environ.get(ENV_LAMBDA_FUNCTION_NAME)
    if not resolved:
        raise ValueError(
            f"the consumer needs a name to scope its idempotency keys: pass name=..., "
            f"or set {ENV_CONSUMER_NAME} (AWS_LAMBDA_FUNCTION_NAME is used on Lambda)"
        )
    return checked_name(resolved)


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
        service = os.environ.get(ENV_SERVICE_NAME) or self.name
        self.logger = logger if logger is not None else Logger(service=service)
        # A private EMF provider: Powertools' default Metrics share one global
        # metric set, so flushing ours would also flush (under our namespace)
        # whatever the user's own Metrics instance collected.
        self.metrics = (
            metrics
            if metrics is not None
            else Metrics(
                provider=AmazonCloudWatchEMFProvider(
                    namespace=os.environ.get(ENV_METRICS_NAMESPACE) or DEFAULT_METRICS_NAMESPACE,
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
        (:mod:`dynamodb_outbox._typed_payload`).
        """
        if process_one is None:
            if model is None:
                raise TypeError("consumer.handler needs a function, or model= to decorate one")
            from dynamodb_outbox._typed_payload import with_payload_model

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
