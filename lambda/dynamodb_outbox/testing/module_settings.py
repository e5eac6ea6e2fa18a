"""What the Terraform module deploys, as the testing kit rebuilds it on moto.

The names (``main.tf``'s ``locals``) and the defaults of the ``stream_mapping``,
``publisher`` and ``consumers`` inputs (``variables.tf``), stated once here for
Python. Terraform cannot read them from here (an ``optional()`` default must be
a literal), so ``tests/unit/test_testing_kit.py`` reads ``variables.tf`` and
fails when a default here differs from the module's: the kit cannot drift from
what ``terraform apply`` creates without the project's suite saying so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from dynamodb_outbox.pending_index import DEFAULT_PENDING_INDEX

__all__ = [
    "DEFAULT_SOURCE",
    "ConsumerSettings",
    "ModuleNames",
    "PublisherSettings",
]

_EVERY_EVENT: Final = {"version": ["0"]}

#: The ``source`` the kit's writer gives events (the module does not choose it).
DEFAULT_SOURCE: Final = "app"


@dataclass(frozen=True)
class PublisherSettings:
    """``var.stream_mapping`` and the publisher's ``timeout_seconds`` (``var.publisher``)."""

    batch_size: int = 100
    maximum_batching_window_in_seconds: int = 0
    parallelization_factor: int = 1
    maximum_retry_attempts: int = 10
    maximum_record_age_in_seconds: int = 86_400
    timeout_seconds: int = 60


@dataclass(frozen=True)
class ConsumerSettings:
    """One entry of ``var.consumers``: what routes to the queue, and the queue's settings.

    ``event_pattern`` (EventBridge, the default sink) or ``filter_policy``
    (SNS) as a dict or its JSON; ``None`` receives every event of the bus
    (``{"version": ["0"]}``: every EventBridge event has version 0).
    ``visibility_timeout_seconds`` ``None`` is 6 x ``function_timeout_seconds``,
    as the module makes it.
    """

    event_pattern: Mapping[str, Any] | str | None = None
    filter_policy: Mapping[str, Any] | str | None = None
    function_timeout_seconds: int = 30
    visibility_timeout_seconds: int | None = None
    message_retention_seconds: int = 345_600
    max_receive_count: int = 5
    batch_size: int = 10
    maximum_batching_window_in_seconds: int = 0
    maximum_concurrency: int | None = None

    @property
    def visibility_timeout(self) -> int:
        if self.visibility_timeout_seconds is not None:
            return self.visibility_timeout_seconds
        return 6 * self.function_timeout_seconds

    def pattern_json(self) -> str:
        """The rule's event pattern: the consumer's, or one every event matches."""
        pattern = self.event_pattern if self.event_pattern is not None else _EVERY_EVENT
        return pattern if isinstance(pattern, str) else json.dumps(pattern)

    def filter_policy_json(self) -> str | None:
        policy = self.filter_policy
        if policy is None:
            return None
        return policy if isinstance(policy, str) else json.dumps(policy)


@dataclass(frozen=True)
class ModuleNames:
    """The names ``main.tf`` derives from the module's ``name`` input."""

    name: str

    @property
    def table(self) -> str:
        return self.name

    @property
    def event_bus(self) -> str:
        return self.name

    @property
    def topic(self) -> str:
        return self.name

    @property
    def idempotency_table(self) -> str:
        return f"{self.name}-idempotency"

    @property
    def publisher(self) -> str:
        return f"{self.name}-publisher"

    @property
    def on_failure_queue(self) -> str:
        return f"{self.name}-publisher-on-failure"

    @property
    def pending_index(self) -> str:
        return DEFAULT_PENDING_INDEX

    def consumer(self, key: str) -> str:
        """Queue, rule and function of consumer ``key``: ``<name>-<key>-consumer``."""
        return f"{self.name}-{key}-consumer"

    def consumer_dlq(self, key: str) -> str:
        return f"{self.consumer(key)}-dlq"

    def consumer_service(self, key: str) -> str:
        """The consumer function's ``POWERTOOLS_SERVICE_NAME``."""
        return f"{self.name}-{key}"
