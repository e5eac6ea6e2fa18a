"""Prototype (benchmark only): the publisher with its deletes overlapped with the sends.

Ours sends every ``PutEvents`` of a batch, then deletes what was published
(``BatchWriteItem``, 25 keys per call). The deletes do not depend on later
sends, so they can run on a background thread as soon as 25 published keys
are known, while the next chunk is being sent. This subclass of the
publisher's private ``_Publication`` does exactly that and nothing else: same
planning, batching, failure rules and quarantine; a delete is still issued only
for an item whose event was published, and the run still waits for every
delete before returning. It reaches into private names of
``dynamodb_outbox.publisher`` on purpose (a prototype to measure, not an API).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from dynamodb_outbox import publisher
from dynamodb_outbox.publisher import (
    BATCH_WRITE_MAX_ITEMS,
    DEFAULT_DELETE_RETRIES,
    MissingSequenceNumber,
    PublishResult,
    Sink,
)
from dynamodb_outbox.stream_types import AttributeMap


class OverlappedPublication(publisher._Publication):
    """Deletes full chunks of published keys in the background while sending goes on."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="outbox-delete")
        self._futures: list[Future[None]] = []
        self._queued: dict[str, AttributeMap] = {}
        self._handed_over = 0  # published plans already looked at
        self._seen: set[str] = set()

    def _process(self, group: list[publisher._Plan]) -> publisher._Plan | None:
        failure = super()._process(group)
        for plan in self.published[self._handed_over :]:
            label = json.dumps(plan.candidate.key, sort_keys=True)
            if label not in self._seen:
                self._seen.add(label)
                self._queued[label] = plan.candidate.key
        self._handed_over = len(self.published)
        while len(self._queued) >= BATCH_WRITE_MAX_ITEMS:
            self._submit(BATCH_WRITE_MAX_ITEMS)
        return failure

    def _submit(self, count: int) -> None:
        labels = list(self._queued)[:count]
        keys = [self._queued.pop(label) for label in labels]
        self._futures.append(self._executor.submit(self._delete_chunk, keys))

    def _delete_published(self) -> None:
        self.result.published += len(self.published)
        try:
            if self._queued:
                self._submit(len(self._queued))
            for future in self._futures:
                future.result()
        finally:
            self._executor.shutdown(wait=True)


def publish_stream_batch_overlapped(
    records: Sequence[Any],
    *,
    sink: Sink,
    table_name: str,
    dynamodb_client: Any,
    delete_retries: int = DEFAULT_DELETE_RETRIES,
) -> PublishResult:
    """``publisher.publish_stream_batch``, run by :class:`OverlappedPublication`."""
    result = PublishResult(records=len(records))
    candidates: list[publisher.OutboxCandidate] = []
    for position, record in enumerate(records):
        parsed = publisher._stream_candidate(position, record)
        if isinstance(parsed, publisher._Skip):
            result.skipped += 1
        elif isinstance(parsed, publisher._Unreadable):
            result.unreadable += 1
        else:
            candidates.append(parsed)
    publication = OverlappedPublication(
        sink=sink,
        table_name=table_name,
        dynamodb_client=dynamodb_client,
        sleep=time.sleep,
        clock=publisher._utc_now,
        delete_retries=delete_retries,
        should_continue=None,
        result=result,
    )
    failure = publication.run(candidates)
    if failure is not None:
        result.failure_position = failure.candidate.position
        result.failure_checkpoint = failure.candidate.checkpoint
        if result.failure_checkpoint is None:
            raise MissingSequenceNumber("failed record has no sequence number", result)
        result.failure_sequence_number = result.failure_checkpoint
    return result
