"""Why a consumer failed a message: the exception, read from the toolkit's own log lines
and from what each invocation returned.

The consumer toolkit logs, at ERROR with the ``message_id``, every message it
fails for its body or its function, and when the function raised, the
exception itself (its ``exception_type`` value carries it, and ``exc_info``
when the consumer logs exception texts). A handler on the root logger (Powertools
loggers propagate to it) keeps those records, so a test can ask *why* a
message came back, not only which one. (An event another invocation holds is
returned with a WARNING: a concurrency outcome, not a failure of the code.)

The log alone cannot be trusted to see every failure: an invocation that fails
as a whole (``ConfigurationError``, a malformed batch, an exception escaping
the handler, "Task timed out") logs nothing per message, and a logger that
does not propagate, a level above ERROR or ``logging.disable`` hide the lines.
So :func:`reconcile` starts from the runtime's own record of each invocation
(:class:`~dynamodb_outbox.local.Invocation`): every message an invocation
failed is a failure, explained by its log record when there is one, else by
the invocation's error (with the exception the handler raised) or by
"reported failed in batchItemFailures, no ERROR log record seen".
"""

from __future__ import annotations

import contextvars
import functools
import logging
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from dynamodb_outbox.consumer._errors import describe
from dynamodb_outbox.local import Invocation

__all__ = ["ConsumerFailure", "FailureLog", "reconcile"]

Handler = Callable[[Any, Any], object]


@dataclass(frozen=True)
class ConsumerFailure:
    """One message a consumer failed, and why.

    ``exception`` is what the function (or its model, or the idempotency store)
    raised; ``None`` when nothing was raised inside the function: a body that
    is no outbox event, an event in progress elsewhere (``reason`` says which).
    ``invocation_error`` is the error that failed the whole invocation
    (Lambda's text, e.g. ``"Task timed out after 30.00 seconds"``), ``None``
    when the function answered and reported the message failed. ``consumer``
    is the consumer's key.
    """

    message_id: str
    event_id: str | None
    event_type: str | None
    reason: str
    exception: BaseException | None
    invocation_error: str | None = None
    consumer: str | None = None


#: The FailureLog of the stack whose runtime is invoking a function in this
#: thread (set by :meth:`FailureLog.collecting`), None outside its invocations.
_INVOKING: contextvars.ContextVar[FailureLog | None] = contextvars.ContextVar(
    "dynamodb_outbox_testing_invoking", default=None
)


class FailureLog(logging.Handler):
    """Collects the consumer toolkit's "message failed" records while installed.

    Records logged during an invocation its stack's runtime made go to
    :attr:`failures` of that stack's log only (two stacks never collect each
    other's); records logged outside any (a handler called directly) go to
    :attr:`direct` of every installed log.
    """

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.failures: list[ConsumerFailure] = []
        self.direct: list[ConsumerFailure] = []

    def collecting(self, function: Handler) -> Handler:
        """``function``, whose invocations report their failures to this log."""

        @functools.wraps(function)
        def invoke(event: Any, context: Any) -> object:
            token = _INVOKING.set(self)
            try:
                return function(event, context)
            finally:
                _INVOKING.reset(token)

        return invoke

    def emit(self, record: logging.LogRecord) -> None:
        message_id = getattr(record, "message_id", None)
        if not isinstance(message_id, str):
            return
        invoking = _INVOKING.get()
        if invoking is not None and invoking is not self:
            return
        found = self.failures if invoking is self else self.direct
        carried = getattr(getattr(record, "exception_type", None), "exception", None)
        exception = without_input(record.exc_info[1] if record.exc_info else carried)
        reason = getattr(record, "reason", None)
        found.append(
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


_UNLOGGED = (
    "reported failed in batchItemFailures, no ERROR log record seen (a logger that "
    "does not propagate, a level above ERROR, or logging.disable hides it)"
)


def reconcile(
    invocations: Iterable[tuple[str, Invocation]], logged: Iterable[ConsumerFailure]
) -> list[ConsumerFailure]:
    """Every message the ``(consumer key, invocation)`` pairs failed, explained.

    A logged failure explains the next failure of its message; a failure no
    log record explains gets the invocation's error or :data:`_UNLOGGED`. Log
    records of messages these invocations did not fail (another stack's) are
    left out.
    """
    by_message: dict[str, deque[ConsumerFailure]] = defaultdict(deque)
    for failure in logged:
        by_message[failure.message_id].append(failure)
    found: list[ConsumerFailure] = []
    for key, invocation in invocations:
        bodies = _bodies(invocation)
        for message_id in invocation.failed_ids:
            waiting = by_message.get(message_id)
            if waiting:
                failure = waiting.popleft()
                found.append(replace(failure, consumer=key, invocation_error=invocation.error))
                if invocation.error is None:
                    continue
            event_id, event_type = _identify(bodies.get(message_id))
            found.append(
                ConsumerFailure(
                    message_id=message_id,
                    event_id=event_id,
                    event_type=event_type,
                    reason=invocation.error or _UNLOGGED,
                    exception=without_input(invocation.exception),
                    invocation_error=invocation.error,
                    consumer=key,
                )
            )
    return found


def without_input(exception: BaseException | None) -> BaseException | None:
    """Pydantic's ValidationError again with its input values hidden; anything else as is.

    Pydantic's text quotes the values a model refused (``input_value=...``):
    the payload, which may hold personal data, would reach the test report
    through :attr:`ConsumerFailure.reason` and :meth:`raise_failures`' cause.
    The consumer's log line names only the type (unless the team opts in with
    ``log_exception_text=True``); the kit keeps the field, the rule and the
    error type, as a model's ``hide_input_in_errors`` would.
    """
    try:
        from pydantic_core import ValidationError
    except ImportError:  # pragma: no cover - pydantic is not installed
        return exception
    if not isinstance(exception, ValidationError):
        return exception
    try:
        hidden: BaseException = ValidationError.from_exception_data(
            exception.title,
            exception.errors(include_url=False, include_context=True),  # type: ignore[arg-type]
            hide_input=True,
        )
    except Exception:
        # An error type from_exception_data cannot rebuild: its text without inputs.
        details = "; ".join(
            f"{'.'.join(map(str, error['loc']))}: {error['msg']} [type={error['type']}]"
            for error in exception.errors(include_url=False, include_input=False)
        )
        hidden = ValueError(
            f"{exception.error_count()} validation error(s) for {exception.title}: {details}"
        )
    hidden.__traceback__ = exception.__traceback__
    return hidden


def _bodies(invocation: Invocation) -> dict[str, object]:
    records = invocation.event.get("Records", [])
    return {
        str(record.get("messageId")): record.get("body")
        for record in records
        if isinstance(record, dict)
    }


def _identify(body: object) -> tuple[str | None, str | None]:
    from dynamodb_outbox.consumer import parse_body

    try:
        envelope = parse_body(body)
    except Exception:
        return None, None
    return envelope.id, envelope.type
