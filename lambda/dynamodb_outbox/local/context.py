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
from dataclasses import dataclass, field
from typing import Any

from .clock import VirtualClock

DEFAULT_TIMEOUT_SECONDS = 3.0


@dataclass
class LambdaContext:
    """A stand-in for ``awslambdaric``'s ``LambdaContext``."""

    invoked_function_arn: str
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    memory_limit_in_mb: int = 128
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    identity: Any = None
    client_context: Any = None
    clock: VirtualClock | None = field(default=None, repr=False)
    started_at: float | None = None

    def __post_init__(self) -> None:
        if self.clock is not None and self.started_at is None:
            self.started_at = self.clock.now()

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

    @property
    def function_name(self) -> str:
        # arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>]
        return self.invoked_function_arn.split(":")[6]

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return f"local/[{self.function_version}]{self.aws_request_id.replace('-', '')}"

    def get_remaining_time_in_millis(self) -> int:
        deadline = self.deadline
        if self.clock is None or deadline is None:
            return int(self.timeout_seconds * 1000)
        return max(0, int((deadline - self.clock.now()) * 1000))
