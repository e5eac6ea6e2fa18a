"""``update``: a running mapping follows UpdateEventSourceMapping, as an apply makes it.

docs/live-changes.md: a batch size change, a pause (``enabled = false``) and a
resume are in place; Lambda applies them to the batches formed after the update
and a stream mapping resumes where it stopped. tests/terraform/live_flow.py and
the fault campaign's ``live_change`` rely on these.
"""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import Queue, Recorder, Table, make_queue, sort_keys

from dynamodb_outbox.local import (
    MappingConfigError,
    SqsMapping,
    StreamMapping,
    VirtualClock,
    mapping_config,
)


def test_a_paused_stream_mapping_reads_nothing_and_resumes_where_it_stopped(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    # GIVEN a mapping that delivered the first records
    config = mapping_config(table.stream_arn, batch_size=100)
    handler = Recorder()
    mapping = StreamMapping(config, handler, streams_client=streams, clock=clock)
    table.put_outbox(3)
    mapping.drain()

    # WHEN it is disabled, records are written, and it is enabled again with another batch size
    mapping.update({**config, "State": "Disabled"})
    table.put_outbox(5, start=3)
    paused = mapping.drain()
    mapping.update({**config, "BatchSize": 2})
    mapping.drain()

    # THEN nothing ran while paused, and the rest came once, in batches of 2
    assert paused.invocations == []
    delivered = [sort_keys(event) for event in handler.events]
    assert delivered[0] == [f"OUTBOX#{n:06d}" for n in range(3)]
    assert delivered[1:] == [
        [f"OUTBOX#{n:06d}" for n in (3, 4)],
        [f"OUTBOX#{n:06d}" for n in (5, 6)],
        ["OUTBOX#000007"],
    ]


def test_a_stream_mapping_update_cannot_move_it_to_another_source(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    config = mapping_config(table.stream_arn)
    mapping = StreamMapping(config, Recorder(), streams_client=streams, clock=clock)
    other = table.stream_arn.replace("/stream/", "/stream/other-")

    with pytest.raises(MappingConfigError, match="that is a new mapping"):
        mapping.update({**config, "EventSourceArn": other})


@pytest.fixture
def queue(sqs: Any) -> Queue:
    return make_queue(sqs, "consumer", VisibilityTimeout=30)


def test_an_sqs_mapping_takes_its_new_batch_size_for_the_next_batches(
    queue: Queue, sqs: Any, clock: VirtualClock
) -> None:
    # GIVEN a mapping of batch size 10 and 12 messages
    config = mapping_config(queue.arn, batch_size=10)
    handler = Recorder()
    mapping = SqsMapping(config, handler, sqs_client=sqs, clock=clock)
    for n in range(12):
        queue.send(f"m{n}")

    # WHEN it is updated to batch size 3 and drained
    mapping.update({**config, "BatchSize": 3})
    mapping.drain()

    # THEN every message came once, in batches of at most 3
    assert sorted(len(batch) for batch in handler.batches) == [3, 3, 3, 3]
    assert len(set(handler.delivered)) == 12
    assert queue.depth() == 0


def test_a_disabled_sqs_mapping_receives_nothing_until_enabled(
    queue: Queue, sqs: Any, clock: VirtualClock
) -> None:
    config = mapping_config(queue.arn)
    handler = Recorder()
    mapping = SqsMapping(config, handler, sqs_client=sqs, clock=clock)
    queue.send("waiting")

    mapping.update({**config, "State": "Disabled"})
    paused = mapping.drain()
    assert paused.invocations == [] and queue.depth() == 1
    assert not mapping.has_pending_work()

    mapping.update(config)
    mapping.drain()
    assert len(handler.delivered) == 1 and queue.depth() == 0
