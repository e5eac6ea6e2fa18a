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
    "ARCHIVE_RETENTION_DAYS",
    "DEFAULT_SOURCE",
    "DLQ_RETENTION_SECONDS",
    "SNS_TO_SQS_RETRY_SECONDS",
    "STREAM_RECORD_LIFETIME_SECONDS",
    "SWEEPER_REPUBLISH_SECONDS",
    "UNMODELLED_CONSUMER_INPUTS",
    "ConsumerSettings",
    "ModuleNames",
    "PublisherSettings",
    "idempotency_window",
]

# modules/windows/main.tf's numbers (AWS's, cited in docs/seams.md "Windows"),
# restated for Python; tests/unit/test_testing_kit_settings.py has Terraform
# derive the window and fails when idempotency_window() below differs.
#: DynamoDB Streams keeps a record 24 hours: the publisher can re-publish that long.
STREAM_RECORD_LIFETIME_SECONDS: Final = 86_400
#: SNS retries delivery to an SQS endpoint over 23 days.
SNS_TO_SQS_RETRY_SECONDS: Final = 23 * 86_400
#: SQS keeps a message at most 14 days: the consumers' DLQs keep that long.
DLQ_RETENTION_SECONDS: Final = 1_209_600
#: ``var.event_archive.retention_days``'s default (an archive exists with EventBridge only).
ARCHIVE_RETENTION_DAYS: Final = 7
#: The default sweeper's republish bound: ``min_age_seconds`` (300) + its
#: ``rate(5 minutes)`` interval, the oldest-pending alarm's threshold.
SWEEPER_REPUBLISH_SECONDS: Final = 300 + 300

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


#: The ``var.consumers`` inputs :class:`ConsumerSettings` leaves out, and why
#: (tests/unit/test_testing_kit_settings.py fails on an input in neither).
UNMODELLED_CONSUMER_INPUTS: Final = {
    "function": "the kit invokes the Python handler it is given, in-process",
    "function_memory_size_mb": "an in-process invocation has no memory limit",
    "maximum_retry_attempts": "moto delivers to a rule target at once and never retries it",
    "retired": "a test adds only the consumers it runs",
}


@dataclass(frozen=True)
class ConsumerSettings:
    """One entry of ``var.consumers``: what routes to the queue, and the queue's settings.

    ``event_pattern`` (EventBridge, the default sink) or ``filter_policy``
    (SNS) as a dict or its JSON; ``None`` receives every event of the bus
    (``{"version": ["0"]}``: every EventBridge event has version 0).
    ``visibility_timeout_seconds`` ``None`` is 6 x ``function_timeout_seconds``,
    as the module makes it; ``idempotency_expires_after_seconds`` ``None`` is
    the window the module derives (:func:`idempotency_window`).

    The module's inputs the kit does not model are
    :data:`UNMODELLED_CONSUMER_INPUTS`, each with why.
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
    maximum_event_age_in_seconds: int = 86_400
    idempotency_expires_after_seconds: int | None = None

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


def idempotency_window(
    publish_to: str,
    settings: ConsumerSettings,
    *,
    archive_retention_days: int | None = None,
    sweeper_republish_seconds: int = SWEEPER_REPUBLISH_SECONDS,
) -> int:
    """The idempotency window the module gives a consumer (``modules/windows``).

    The consumer's ``idempotency_expires_after_seconds``, else the shortest
    window that outlives every copy of an event: republish (the stream's 24 h
    or the sweeper's bound) + delivery (EventBridge's target retry window, or
    SNS's 23 days) + the DLQ's life + the queue's retention again (a copy
    redriven from the DLQ), and at least the archive's retention.
    ``archive_retention_days`` ``None`` is the module's default archive (on
    EventBridge only).
    """
    if settings.idempotency_expires_after_seconds is not None:
        return settings.idempotency_expires_after_seconds
    if archive_retention_days is None:
        archive_retention_days = ARCHIVE_RETENTION_DAYS if publish_to == "eventbridge" else 0
    retention = settings.message_retention_seconds
    republish = max(STREAM_RECORD_LIFETIME_SECONDS, sweeper_republish_seconds)
    delivery = (
        settings.maximum_event_age_in_seconds
        if publish_to == "eventbridge"
        else SNS_TO_SQS_RETRY_SECONDS
    )
    ordered = publish_to == "sns_fifo"
    dlq_life = (
        retention + DLQ_RETENTION_SECONDS if ordered else max(retention, DLQ_RETENTION_SECONDS)
    )
    return max(republish + delivery + dlq_life + retention, archive_retention_days * 86_400)
