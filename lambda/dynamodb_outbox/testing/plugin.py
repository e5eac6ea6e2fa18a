"""The pytest plugin ``pip install dynamodb-outbox[testing]`` registers (entry point ``pytest11``).

Registered whenever the package is installed, with or without the extra, so
importing it costs nothing: the kit and moto are imported when a fixture runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from dynamodb_outbox.testing.stack import OutboxStack


@pytest.fixture
def outbox_aws() -> Iterator[None]:
    """moto for every AWS service, an isolated environment, the package's caches reset."""
    from dynamodb_outbox.testing.aws import isolated_aws

    with isolated_aws():
        yield


@pytest.fixture
def outbox_stack(outbox_aws: None) -> Iterator[OutboxStack]:
    """The module's deployment named ``orders`` (EventBridge), on ``outbox_aws``."""
    from dynamodb_outbox.testing.stack import OutboxStack

    stack = OutboxStack()
    try:
        yield stack
    finally:
        stack.close()
