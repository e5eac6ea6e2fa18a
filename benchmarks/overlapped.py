"""The publisher with its delete overlap turned off, or always on: the benchmark's comparisons.

The shipped publisher deletes each full chunk of 25 published keys on a
background thread while the next ``PutEvents`` goes out, once a call was seen
waiting on the network. A :class:`~dynamodb_outbox.publishing.Publication`
that does not overlap (``overlaps_deletes = False``) gives the previous
behaviour, every delete after the last send, so the latency benchmark can show
what the overlap is worth; one that always overlaps shows what it costs in CPU
where calls answer at once (canned answers), which the shipped one then avoids.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dynamodb_outbox.publisher import read_stream_batch
from dynamodb_outbox.publishing import (
    DEFAULT_DELETE_RETRIES,
    Publication,
    PublishDependencies,
    PublishResult,
)
from dynamodb_outbox.sinks import Sink
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS


class DeletesAfterLastSend(Publication):
    overlaps_deletes = False


class AlwaysOverlaps(Publication):
    overlap_min_wait_seconds = float("-inf")  # every call counts as one that waited


def publish_stream_batch_sequential(
    records: Sequence[Any],
    *,
    sink: Sink,
    table_name: str,
    dynamodb_client: Any,
    delete_retries: int = DEFAULT_DELETE_RETRIES,
    publication: type[Publication] = DeletesAfterLastSend,
) -> PublishResult:
    """``publisher.publish_stream_batch`` with every delete after the last send.

    Or as ``publication`` says (:class:`AlwaysOverlaps`). For batches that
    publish whole: a checkpoint would not be reported.
    """
    candidates, result = read_stream_batch(records, table_keys=DEFAULT_TABLE_KEYS)
    deps = PublishDependencies(
        sink,
        table_name,
        dynamodb_client,
        delete_retries=delete_retries,
        table_keys=DEFAULT_TABLE_KEYS,
    )
    publication(deps, result=result).publish(candidates)
    if result.failure_position is not None:
        raise RuntimeError(f"benchmark batch failed at record {result.failure_position}")
    return result
