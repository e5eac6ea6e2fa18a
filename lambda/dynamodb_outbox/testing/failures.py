"""Why a consumer failed a message: the exception, read from the toolkit's own log lines.

The consumer toolkit logs, at ERROR with the ``message_id``, every message it
fails for its body or its function, and when the function raised, the
exception itself (its ``exception_type`` value carries it, and ``exc_info``
when the consumer logs exception texts). A handler on the root logger (Powertools
loggers propagate to it) keeps those records, so a test can ask *why* a
message came back, not only which one. (An event another invocation holds is
returned with a WARNING: a concurrency outcome, not a failure of the code.)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from dynamodb_outbox._consumer_errors import describe

__all__ = ["ConsumerFailure", "FailureLog"]


@dataclass(frozen=True)
class ConsumerFailure:
    """One message a consumer failed, and why.

    ``exception`` is what the function (or its model, or the idempotency store)
    raised; ``None`` when nothing was raised inside the function: a body that
    is no outbox event, an event in progress elsewhere (``reason`` says which).
    """

    message_id: str
    event_id: str | None
    event_type: str | None
    reason: str
    exception: BaseException | None


class FailureLog(logging.Handler):
    """Collects the consumer toolkit's "message failed" records while installed."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.failures: list[ConsumerFailure] = []

    def emit(self, record: logging.LogRecord) -> None:
        message_id = getattr(record, "message_id", None)
        if not isinstance(message_id, str):
            return
        carried = getattr(getattr(record, "exception_type", None), "exception", None)
        exception = record.exc_info[1] if record.exc_info else carried
        reason = getattr(record, "reason", None)
        self.failures.append(
            ConsumerFailure(
                message_id=message_id,
                event_id=getattr(record, "event_id", None),
                event_type=getattr(record, "event_type", None),
                reason=_reason(reason, exception, record),
                exception=exception,
            )
        )

    def filter(self, record: logging.LogRecord) -> bool:
        # Powertools adds a filter to every root handler that drops its own
        # loggers' records (deduplication for pytest's live log); this handler
        # exists to read exactly those records.
        return True

    def install(self) -> None:
        logging.getLogger().addHandler(self)

    def uninstall(self) -> None:
        logging.getLogger().removeHandler(self)


def _reason(logged: object, exception: BaseException | None, record: logging.LogRecord) -> str:
    """The logged reason; else, in-process only, the exception's own text (never logged)."""
    if logged is not None:
        return str(logged)
    if exception is not None:
        return describe(exception)
    return record.getMessage()
