"""The publisher with its delete overlap switched off: the benchmark's comparison point.

The shipped publisher deletes each full chunk of 25 published keys on a
background thread while the next ``PutEvents`` goes out. Switching that off
(``overlap_deletes=False``) gives the previous behaviour, every delete after the
last send, so the latency benchmark can show what the overlap is worth.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import DEFAULT_DELETE_RETRIES, PublishResult
from dynamodb_outbox.sinks import Sink


def publish_stream_batch_sequential(
    records: Sequence[Any],
    *,
    sink: Sink,
    table_name: str,
    dynamodb_client: Any,
    delete_retries: int = DEFAULT_DELETE_RETRIES,
) -> PublishResult:
    """``publisher.publish_stream_batch`` with every delete after the last send."""
    return publish_stream_batch(
        records,
        sink=sink,
        table_name=table_name,
        dynamodb_client=dynamodb_client,
        delete_retries=delete_retries,
        overlap_deletes=False,
    )
