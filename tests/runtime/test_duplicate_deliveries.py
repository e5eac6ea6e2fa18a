"""AWS's own duplicate deliveries (at least once), opt-in with a rate.

Lambda's stream poller may deliver a batch again after it succeeded, and a
standard SQS queue may deliver a handled message again; FIFO queues do not
duplicate. With ``duplicate_delivery_rate`` the runtime does the same, each
batch (stream) or message (SQS) at most once more, so idempotency is tested by
the platform rather than by the test.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from runtime_helpers import Recorder, Table, make_queue

from dynamodb_outbox.local import (
    MappingConfigError,
    SqsMapping,
    StreamMapping,
    VirtualClock,
    mapping_config,
)


def test_a_stream_batch_that_succeeded_can_be_delivered_once_more(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(5)
    handler = Recorder()
    mapping = StreamMapping(
        mapping_config(table.stream_arn, batch_size=2),
        handler,
        streams_client=streams,
        clock=clock,
        duplicate_delivery_rate=1.0,
    )

    mapping.drain()

    assert [len(batch) for batch in handler.batches] == [2, 2, 2, 2, 1, 1]
    assert handler.batches[0] == handler.batches[1]
    assert mapping.stats.duplicate_deliveries == 3
    assert not mapping.has_pending_work()


def test_a_handled_sqs_message_can_come_again_once_on_a_standard_queue(
    sqs: Any, clock: VirtualClock
) -> None:
    queue = make_queue(sqs, "at-least-once", VisibilityTimeout=30)
    for n in range(3):
        queue.send(f"m{n}")
    handler = Recorder()
    mapping = SqsMapping(
        mapping_config(queue.arn, report_batch_item_failures=True),
        handler,
        sqs_client=sqs,
        clock=clock,
        duplicate_delivery_rate=1.0,
    )

    mapping.drain()

    delivered = [record["body"] for event in handler.events for record in event["Records"]]
    assert sorted(delivered) == ["m0", "m0", "m1", "m1", "m2", "m2"]
    assert mapping.stats.duplicate_deliveries == 3
    assert queue.depth() == 0


def test_a_fifo_queue_never_duplicates(sqs: Any, clock: VirtualClock) -> None:
    queue = make_queue(
        sqs,
        "ordered.fifo",
        FifoQueue="true",
        ContentBasedDeduplication="true",
        VisibilityTimeout=30,
    )
    for n in range(3):
        queue.send(f"m{n}", MessageGroupId="g")
    handler = Recorder()
    mapping = SqsMapping(
        mapping_config(queue.arn),
        handler,
        sqs_client=sqs,
        clock=clock,
        duplicate_delivery_rate=1.0,
    )

    mapping.drain()

    assert mapping.stats.duplicate_deliveries == 0
    assert len(handler.delivered) == 3


def test_a_rate_draws_from_the_random_source_given(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(40)
    handler = Recorder()
    mapping = StreamMapping(
        mapping_config(table.stream_arn, batch_size=1),
        handler,
        streams_client=streams,
        clock=clock,
        duplicate_delivery_rate=0.25,
        random_source=random.Random(7),
    )

    mapping.drain()

    assert 0 < mapping.stats.duplicate_deliveries < 40
    assert len(handler.batches) == 40 + mapping.stats.duplicate_deliveries


@pytest.mark.parametrize("rate", [-0.1, 1.5])
def test_a_rate_outside_zero_to_one_is_refused(
    rate: float, table: Table, streams: Any, clock: VirtualClock
) -> None:
    with pytest.raises(MappingConfigError, match="duplicate_delivery_rate"):
        StreamMapping(
            mapping_config(table.stream_arn),
            Recorder(),
            streams_client=streams,
            clock=clock,
            duplicate_delivery_rate=rate,
        )
