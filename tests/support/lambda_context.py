"""The Lambda context the tests hand to handlers."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from tests.factories import ACCOUNT_ID, REGION


@dataclass
class FakeLambdaContext:
    """The part of Lambda's context that the handlers and Powertools read.

    Its remaining time runs down from ``remaining_millis`` with the wall clock,
    as Lambda's does: a handler that keeps retrying until its time is nearly
    spent stops in a test too.
    """

    function_name: str = "outbox-function"
    remaining_millis: int = 60_000
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 256
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    invoked_function_arn: str = field(init=False)
    _started: float = field(init=False, repr=False, default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.invoked_function_arn = (
            f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{self.function_name}"
        )

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_millis - int((time.monotonic() - self._started) * 1000)
