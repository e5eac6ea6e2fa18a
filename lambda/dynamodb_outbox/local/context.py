"""The ``context`` object the runtime passes to a handler.

It carries the attributes of the Lambda Python runtime's context that
handlers and Powertools read. With a ``clock`` (the runtime always passes its
virtual clock), the remaining time follows it from the start of the
invocation: a handler that waits (by advancing the clock) sees its time run
out, and :func:`~dynamodb_outbox.local.invoker.invoke_handler` reports an
invocation that ran past its timeout as Lambda does, a function error. Without
a clock the remaining time is always the whole timeout.
"""

from __future__ import annotations

import uuid
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext as PowertoolsLambdaContext

from .clock import VirtualClock

__all__ = ["DEFAULT_TIMEOUT_SECONDS", "LambdaContext"]

DEFAULT_TIMEOUT_SECONDS = 3.0


class LambdaContext(PowertoolsLambdaContext):
    """A stand-in for ``awslambdaric``'s ``LambdaContext``.

    A subclass of Powertools' ``LambdaContext``, the type handlers are
    annotated with, so passing one to a typed handler passes ``mypy --strict``.
    """

    def __init__(
        self,
        invoked_function_arn: str,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        memory_limit_in_mb: int = 128,
        function_version: str = "$LATEST",
        aws_request_id: str | None = None,
        identity: Any = None,
        client_context: Any = None,
        clock: VirtualClock | None = None,
        started_at: float | None = None,
    ) -> None:
        self._invoked_function_arn = invoked_function_arn
        self.timeout_seconds = timeout_seconds
        self._memory_limit_in_mb = memory_limit_in_mb
        self._function_version = function_version
        self._aws_request_id = aws_request_id or str(uuid.uuid4())
        self._identity = identity
        self._client_context = client_context
        self.clock = clock
        self.started_at = clock.now() if clock is not None and started_at is None else started_at
        # arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>]
        self._function_name = invoked_function_arn.split(":")[6]
        self._log_group_name = f"/aws/lambda/{self._function_name}"
        self._log_stream_name = f"local/[{function_version}]{self._aws_request_id.replace('-', '')}"

    def __repr__(self) -> str:
        return (
            f"LambdaContext(invoked_function_arn={self.invoked_function_arn!r}, "
            f"timeout_seconds={self.timeout_seconds!r}, aws_request_id={self.aws_request_id!r})"
        )

    @property
    def deadline(self) -> float | None:
        """The virtual time the invocation times out at, when it follows a clock."""
        if self.started_at is None:
            return None
        return self.started_at + self.timeout_seconds

    @property
    def timed_out(self) -> bool:
        deadline = self.deadline
        return self.clock is not None and deadline is not None and self.clock.now() > deadline

    def get_remaining_time_in_millis(self) -> int:  # type: ignore[override]
        deadline = self.deadline
        if self.clock is None or deadline is None:
            return int(self.timeout_seconds * 1000)
        return max(0, int((deadline - self.clock.now()) * 1000))
