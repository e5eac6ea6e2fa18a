"""What the consumer toolkit does with whatever a record's code raises.

Only its record fails, whatever it is (any ``BaseException``), except the one
exception that must end the process: :data:`PROCESS_ENDING`.

* ``KeyboardInterrupt`` ends the process. It means "a person stopped this
  program" (SIGINT, Ctrl-C): a local drain or a test run must stop when asked.
  Lambda never sends SIGINT to a function (it stops a sandbox with SIGTERM,
  SIGKILL after), so on AWS it only arrives when code raises it on purpose,
  and then Lambda's own rule applies: the invocation fails and the batch
  returns whole.
* ``SystemExit`` (``sys.exit()`` in the record's code or a CLI library it
  calls) fails its record only. Left to escape, Lambda's Python runtime does
  not catch it: the runtime process exits (``Runtime.ExitError``), the batch
  returns whole, processed messages included, and the sandbox cold-starts
  again. That is one record holding the batch hostage; pytest reads it the
  same way (a test calling ``sys.exit`` fails alone).
* ``asyncio.CancelledError``, ``GeneratorExit`` and any other
  ``BaseException`` subclass fail their record only: they describe the
  record's own work (an awaited call cancelled, a generator misused).
* ``MemoryError`` is an ``Exception``: one allocation the record asked for
  failed, the interpreter carries on, and so does the batch. A sandbox that
  runs out of memory for real is killed by Lambda (``Runtime.OutOfMemory``)
  before Python can raise anything; no library can isolate that.

Log lines name the exception's type and where it was raised, never its text:
the text of a validation error quotes the payload (a card number, an e-mail
address). :func:`describe` gives the text only when a consumer opts in, and
never raises, whatever the exception's ``__str__`` or ``__repr__`` do.
"""

from __future__ import annotations

import traceback
from typing import Final

__all__ = [
    "PROCESS_ENDING",
    "ExceptionType",
    "HandlerRaised",
    "describe",
    "describe_traceback",
    "raised_at",
    "type_name",
    "unwrapped",
]

#: The exceptions that end the batch (and the process) instead of one record.
PROCESS_ENDING: Final[tuple[type[BaseException], ...]] = (KeyboardInterrupt,)

#: Most characters of an exception's text put in a log line, when opted in.
MAX_LOGGED_TEXT: Final = 2_000


class HandlerRaised(Exception):
    """A record's code raised a ``BaseException`` that is not an ``Exception``.

    Carried as an ``Exception`` through Powertools' idempotency handler, which
    deletes the in-progress record only for an ``Exception``: the retry then
    runs the event again instead of waiting for the record to expire.
    """

    def __init__(self, raised: BaseException) -> None:
        super().__init__(type_name(raised))
        self.raised = raised


class ExceptionType(str):
    """A failure's ``exception_type`` log value that also carries the exception.

    Logged (JSON) as the plain type name; an in-process reader of the log
    record (the testing kit's ``FailureLog``) gets the exception itself from
    :attr:`exception`, so tests can ask why a message failed while its text,
    which may quote the payload, stays out of the log line.
    """

    exception: BaseException

    def __new__(cls, exc: BaseException) -> ExceptionType:
        named = super().__new__(cls, type_name(exc))
        named.exception = exc
        return named


def unwrapped(exc: BaseException) -> BaseException:
    """The exception the record's code raised, without the toolkit's wrapper."""
    return exc.raised if isinstance(exc, HandlerRaised) else exc


def type_name(exc: BaseException) -> str:
    """``module.QualifiedName`` of the exception's class (builtins without a module)."""
    try:
        cls = type(exc)
        module = cls.__module__
        name = cls.__qualname__
        return name if module == "builtins" else f"{module}.{name}"
    except Exception:  # a metaclass may make even this raise
        return "<unnamed exception>"


def raised_at(exc: BaseException) -> str | None:
    """``file:line in function`` of the innermost frame the exception passed through."""
    try:
        frames = traceback.extract_tb(exc.__traceback__)
    except Exception:
        return None
    if not frames:
        return None
    frame = frames[-1]
    return f"{frame.filename}:{frame.lineno} in {frame.name}"


def describe(exc: BaseException) -> str:
    """The exception's type and text, cut to :data:`MAX_LOGGED_TEXT`, UTF-8 safe; never raises.

    Text that UTF-8 cannot encode (lone surrogates) is escaped: written as is,
    it would make the log handler fail and the line be lost.
    """
    try:
        text = str(exc)
    except PROCESS_ENDING:
        raise
    except BaseException as failure:
        text = f"<__str__ raised {type_name(failure)}>"
    try:
        text = text[:MAX_LOGGED_TEXT]
    except PROCESS_ENDING:
        raise
    except BaseException:  # a str subclass with a hostile __getitem__
        text = "<unprintable>"
    return _utf8_safe(f"{type_name(exc)}: {text}")


def describe_traceback(exc: BaseException) -> str:
    """Where the exception passed (file, line, function, source line), then :func:`describe`."""
    try:
        frames = "".join(traceback.format_tb(exc.__traceback__))
    except Exception:
        frames = ""
    return _utf8_safe(frames) + describe(exc)


def _utf8_safe(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
