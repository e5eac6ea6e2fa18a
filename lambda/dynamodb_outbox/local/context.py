"""The ``context`` object the runtime passes to a handler.

It carries the attributes of the Lambda Python runtime's context that
handlers and Powertools read. Time does not pass during an in-process
invocation, so the remaining time is always the whole timeout.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

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
        return int(self.timeout_seconds * 1000)
