"""What one publication did: the counts, and where Lambda resumes."""

from __future__ import annotations

from dataclasses import dataclass

from dynamodb_outbox.stream_types import PartialBatchResponse

__all__ = ["PublishResult"]


@dataclass
class PublishResult:
    """What one batch did; :meth:`response` is what Lambda gets back."""

    records: int = 0
    published: int = 0
    quarantined: int = 0
    #: poison records whose item was already gone (published and deleted elsewhere).
    quarantine_item_gone: int = 0
    #: poison records whose item DynamoDB refused to mark (left pending, logged as errors).
    quarantine_unmarkable: int = 0
    #: not outbox inserts (the mapping filter should have dropped them).
    skipped: int = 0
    #: ordered sinks: sequenced events left pending for the sweeper because a lower
    #: sequence of their subject is still pending and could not be sent first.
    deferred: int = 0
    #: ordered sinks: lower pending sequences read from the table and sent first.
    sent_first: int = 0
    #: ordered sinks: partition Queries (or reads of lower sequences) that failed.
    sequence_read_failures: int = 0
    #: records without a readable key: nothing to publish or quarantine, logged.
    unreadable: int = 0
    #: entries (or quarantine writes) that failed retryably; a failed call counts
    #: every entry it carried.
    retryable_failures: int = 0
    deleted: int = 0
    delete_leftovers: int = 0
    send_calls: int = 0
    #: calls after which some entries had to be retried.
    retried_calls: int = 0
    quarantine_calls: int = 0
    delete_calls: int = 0
    #: index in the batch of the record Lambda retries from, if any.
    failure_position: int | None = None
    #: the failed candidate's checkpoint (a stream record's sequence number).
    failure_checkpoint: str | None = None
    failure_sequence_number: str | None = None
    #: ``should_continue`` said stop: candidates from ``stopped_at_position`` on
    #: were not attempted (they stay pending).
    stopped_at_position: int | None = None

    def response(self) -> PartialBatchResponse:
        if self.failure_sequence_number is None:
            return {"batchItemFailures": []}
        return {"batchItemFailures": [{"itemIdentifier": self.failure_sequence_number}]}
