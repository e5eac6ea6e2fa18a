"""The consumer's log lines: its default Logger, the producer's ids on every line, failures."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Final

from aws_lambda_powertools import Logger

from dynamodb_outbox.consumer._errors import ExceptionType, describe, describe_traceback, raised_at
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.trace_context import TraceContext

DEFAULT_SERVICE_NAME: Final = "dynamodb-outbox-consumer"


ENV_LAMBDA_FUNCTION_NAME: Final = "AWS_LAMBDA_FUNCTION_NAME"


ENV_METRICS_NAMESPACE: Final = "POWERTOOLS_METRICS_NAMESPACE"


ENV_SERVICE_NAME: Final = "POWERTOOLS_SERVICE_NAME"


default_logger = Logger(service=os.environ.get(ENV_SERVICE_NAME, DEFAULT_SERVICE_NAME))


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


@contextlib.contextmanager
def record_log_keys(log: Logger, **keys: str | None) -> Iterator[None]:
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


def log_failure(
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
