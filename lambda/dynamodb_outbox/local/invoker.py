"""One synchronous invocation of a handler, as Lambda makes it.

The event crosses a JSON boundary both ways: the handler gets its own decoded
copy (mutating it cannot change what the runtime retries), and a response
that cannot be serialised is a function error, as ``Runtime.MarshalError`` is
in Lambda, and so is a response over Lambda's 6 MB invocation response limit
(``Function.ResponseSizeTooLarge``). Any exception the handler raises is a
function error; it is recorded, never propagated. ``SystemExit`` too: Lambda's
Python runtime does not catch it, the runtime process exits and the invocation
fails with ``Runtime.ExitError`` (the sandbox then starts cold). A
``KeyboardInterrupt`` propagates: it stops the local run, as Ctrl-C should.
When the context follows the
virtual clock, an invocation that ends past its deadline is a function error
("Task timed out"), whatever it returned: Lambda stops the function at the
timeout and never sees its answer (its effects until then remain, as in AWS).
"""

from __future__ import annotations

import contextlib
import decimal
import json
import os
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .context import LambdaContext

__all__ = [
    "MAX_RESPONSE_BYTES",
    "Handler",
    "HandlerResult",
    "function_environment",
    "invoke_handler",
]

#: Lambda's synchronous invocation response limit, "6 MB": read as 6 MiB of
#: the JSON the runtime sends back (the larger reading never fails a response
#: AWS would take).
MAX_RESPONSE_BYTES = 6 * 1024 * 1024

Handler = Callable[[Any, Any], object]
"""A Lambda handler: ``(event, context) -> response``.

The event and context are ``Any`` so that handlers typed with the event's own
shape (``SQSEvent``, ``DynamoDBStreamEvent``) and Powertools' ``LambdaContext``
are accepted under ``mypy --strict``: the runtime builds AWS's shapes, and
passes a context with the attributes Powertools reads."""


@dataclass(frozen=True)
class HandlerResult:
    """The outcome of one invocation: a response, or the error that replaced it."""

    request_id: str
    response: Any = None
    error: str | None = None
    error_traceback: str | None = None
    #: what the handler raised, when it raised (in-process only: Lambda has the text)
    exception: BaseException | None = field(default=None, compare=False, repr=False)

    @property
    def function_error(self) -> bool:
        return self.error is not None


def _lambda_json_default(value: Any) -> Any:
    # The Python runtime serialises Decimal (what boto3's resource layer returns).
    if isinstance(value, decimal.Decimal):
        return float(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def invoke_handler(
    handler: Handler, event: Mapping[str, Any], context: LambdaContext
) -> HandlerResult:
    """Call ``handler`` with a JSON copy of ``event``; never raises for handler faults."""
    payload = json.loads(json.dumps(event))
    try:
        response = handler(payload, context)
    except SystemExit as exit_:
        if context.timed_out:
            return _timed_out(context)
        return HandlerResult(
            request_id=context.aws_request_id,
            error=f"Runtime.ExitError: Runtime exited with error: exit status {exit_.code}",
            error_traceback=traceback.format_exc(),
            exception=exit_,
        )
    except Exception as error:
        if context.timed_out:
            return _timed_out(context)
        return HandlerResult(
            request_id=context.aws_request_id,
            error=f"{type(error).__name__}: {_text(error)}",
            error_traceback=traceback.format_exc(),
            exception=error,
        )
    if context.timed_out:
        return _timed_out(context)
    try:
        text = json.dumps(response, default=_lambda_json_default)
        decoded = json.loads(text)
    except (TypeError, ValueError) as error:
        return HandlerResult(
            request_id=context.aws_request_id,
            error=f"Runtime.MarshalError: {error}",
        )
    if len(text.encode("utf-8")) > MAX_RESPONSE_BYTES:
        return HandlerResult(
            request_id=context.aws_request_id,
            error=f"Function.ResponseSizeTooLarge: response over {MAX_RESPONSE_BYTES} bytes",
        )
    return HandlerResult(request_id=context.aws_request_id, response=decoded)


@contextlib.contextmanager
def function_environment(environment: Mapping[str, str] | None) -> Iterator[None]:
    """``os.environ`` with the function's variables while it runs, restored afterwards.

    On Lambda a function's environment variables exist for its whole life,
    not only while its module is imported: code reading them at invocation
    (a handler built on its first call) sees them. Set around each poll's
    invocations (concurrent invocations of one function share its
    environment), so that several functions in one process each see their own.
    """
    if not environment:
        yield
        return
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _text(error: BaseException) -> str:
    # An exception whose __str__ raises still fails the invocation, with its type.
    try:
        return str(error)
    except Exception as broken:
        return f"<str() raised {type(broken).__name__}>"


def _timed_out(context: LambdaContext) -> HandlerResult:
    return HandlerResult(
        request_id=context.aws_request_id,
        error=f"Task timed out after {context.timeout_seconds:.2f} seconds",
    )
