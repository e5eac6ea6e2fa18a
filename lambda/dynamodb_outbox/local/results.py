"""What the runtime reports: per invocation, per poll, and running counters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "DrainLimitReached",
    "DrainResult",
    "Invocation",
    "PollResult",
    "SqsStats",
    "StreamStats",
]

Outcome = Literal["success", "partial", "failure"]


@dataclass(frozen=True)
class Invocation:
    """One call of the handler with one batch.

    ``item_ids`` are the sequence numbers (streams) or message ids (SQS) that
    were delivered; ``failed_ids`` those Lambda treats as failed (all of them
    on a whole-batch failure). ``attempt`` counts the invocations of these
    records so far, this one included.
    """

    source: str
    item_ids: tuple[str, ...]
    outcome: Outcome
    failed_ids: tuple[str, ...]
    reason: str
    request_id: str
    attempt: int
    event: dict[str, Any]
    response: Any = None
    error: str | None = None
    #: a delivery of records that already succeeded (AWS's at-least-once, opt-in)
    duplicate: bool = False
    #: the shard's lane (streams with ParallelizationFactor > 1; else 0)
    lane: int = 0
    #: what the handler raised, when it raised (``error`` is its Lambda text)
    exception: BaseException | None = field(default=None, compare=False, repr=False)


@dataclass
class PollResult:
    """What one :meth:`poll` did.

    ``progressed`` is true when anything moved (an invocation, a discarded or
    filtered or trimmed record, a message made visible again).
    ``next_ready_at`` is the virtual time at which something now waiting (a
    batching window, a visibility timeout) becomes ready, if anything waits.
    """

    invocations: list[Invocation] = field(default_factory=list)
    failure_records: list[dict[str, Any]] = field(default_factory=list)
    progressed: bool = False
    next_ready_at: float | None = None

    def wait_until(self, when: float | None) -> None:
        if when is not None and (self.next_ready_at is None or when < self.next_ready_at):
            self.next_ready_at = when

    def merge(self, other: PollResult) -> None:
        self.invocations.extend(other.invocations)
        self.failure_records.extend(other.failure_records)
        self.progressed = self.progressed or other.progressed
        self.wait_until(other.next_ready_at)


@dataclass(frozen=True)
class DrainResult:
    """The sum of the polls one :meth:`drain` ran."""

    polls: int
    invocations: list[Invocation]
    failure_records: list[dict[str, Any]]


class DrainLimitReached(RuntimeError):
    """``drain`` hit its invocation bound with work still pending (e.g. a poison
    record retried forever with ``MaximumRetryAttempts = -1``)."""

    def __init__(self, message: str, result: DrainResult) -> None:
        super().__init__(message)
        self.result = result


@dataclass
class StreamStats:
    """Running counters of a :class:`StreamMapping`."""

    invocations: int = 0
    records_delivered: int = 0
    retries: int = 0
    bisections: int = 0
    records_filtered: int = 0
    records_trimmed: int = 0
    batches_discarded: int = 0
    records_discarded: int = 0
    failures_sent: int = 0
    #: batches delivered once more after they succeeded (AWS's at-least-once, opt-in)
    duplicate_deliveries: int = 0
    #: the most invocations in flight at once (lanes of all shards, see ParallelizationFactor)
    peak_concurrency: int = 0
    #: invocations that ran at the same time as at least one other
    concurrent_invocations: int = 0
    #: thread switches between concurrent invocations (see :mod:`.concurrency`)
    interleaving_switches: int = 0


@dataclass
class SqsStats:
    """Running counters of an :class:`SqsMapping`."""

    invocations: int = 0
    messages_delivered: int = 0
    messages_deleted: int = 0
    messages_failed: int = 0
    messages_filtered: int = 0
    visibility_expirations: int = 0
    delete_errors: int = 0
    #: handled messages put back instead of deleted (AWS's at-least-once, opt-in)
    duplicate_deliveries: int = 0
    #: the most invocations in flight at once (see ``concurrency``)
    peak_concurrency: int = 0
    #: invocations that ran at the same time as at least one other
    concurrent_invocations: int = 0
    #: thread switches between concurrent invocations (see :mod:`.concurrency`)
    interleaving_switches: int = 0
