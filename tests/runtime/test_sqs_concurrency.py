"""SQS ``MaximumConcurrency``: several batches in flight at once.

Lambda invokes up to ``MaximumConcurrency`` batches of one queue at the same
time. The runtime receives that many batches, then runs their invocations
together, switching between them at every AWS call, reproducibly from the
mapping's random source (see ``dynamodb_outbox.local.concurrency``).
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
from runtime_helpers import Queue, make_queue

from dynamodb_outbox.local import (
    InterleavingDeadlock,
    MappingConfigError,
    SqsMapping,
    VirtualClock,
    mapping_config,
)
from dynamodb_outbox.local import concurrency as concurrency_module


class SteppingHandler:
    """Records 'start'/'end' per batch around one AWS call, and the messages in flight."""

    def __init__(self, sqs: Any, queue: Queue, fail_body: str | None = None) -> None:
        self.sqs = sqs
        self.queue = queue
        self.fail_body = fail_body
        self.steps: list[tuple[str, str]] = []
        self.in_flight_seen: list[int] = []

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        first = event["Records"][0]["body"]
        self.steps.append(("start", first))
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.queue.url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
        )["Attributes"]
        self.in_flight_seen.append(int(attributes["ApproximateNumberOfMessagesNotVisible"]))
        self.steps.append(("end", first))
        failures = [
            {"itemIdentifier": record["messageId"]}
            for record in event["Records"]
            if record["body"] == self.fail_body
        ]
        return {"batchItemFailures": failures}


def _queue_of(sqs: Any, name: str, count: int) -> Queue:
    queue = make_queue(sqs, name, VisibilityTimeout=30)
    for n in range(count):
        queue.send(f"m{n:02d}")
    return queue


def _mapping(
    queue: Queue, handler: Any, sqs: Any, clock: VirtualClock, seed: int, **kwargs: Any
) -> SqsMapping:
    return SqsMapping(
        mapping_config(
            queue.arn, batch_size=5, report_batch_item_failures=True, maximum_concurrency=3
        ),
        handler,
        sqs_client=sqs,
        clock=clock,
        random_source=random.Random(seed),
        **kwargs,
    )


def _overlapped(steps: list[tuple[str, str]]) -> bool:
    running = 0
    for kind, _ in steps:
        running += 1 if kind == "start" else -1
        if running > 1:
            return True
    return False


def test_maximum_concurrency_puts_that_many_batches_in_flight_at_once(
    sqs: Any, clock: VirtualClock
) -> None:
    queue = _queue_of(sqs, "busy", 15)
    handler = SteppingHandler(sqs, queue)
    mapping = _mapping(queue, handler, sqs, clock, seed=1)

    result = mapping.poll()

    assert mapping.concurrency == 3
    assert len(result.invocations) == 3
    # Every invocation runs while all three batches are received and not deleted.
    assert handler.in_flight_seen == [15, 15, 15]
    assert mapping.stats.peak_concurrency == 3
    assert queue.depth() == 0


def test_interleavings_are_reproducible_from_the_seed_and_vary_with_it(
    sqs: Any, clock: VirtualClock
) -> None:
    orders = []
    for seed in range(8):
        queue = _queue_of(sqs, f"seeded-{seed}", 15)
        handler = SteppingHandler(sqs, queue)
        _mapping(queue, handler, sqs, clock, seed=seed).poll()
        again = _queue_of(sqs, f"seeded-again-{seed}", 15)
        replay = SteppingHandler(sqs, again)
        _mapping(again, replay, sqs, clock, seed=seed).poll()
        assert replay.steps == handler.steps
        orders.append(tuple(handler.steps))
    assert len(set(orders)) > 1
    assert any(_overlapped(list(steps)) for steps in orders)


def test_concurrent_batches_settle_independently(sqs: Any, clock: VirtualClock) -> None:
    queue = _queue_of(sqs, "one-fails", 15)
    handler = SteppingHandler(sqs, queue, fail_body="m07")
    mapping = _mapping(queue, handler, sqs, clock, seed=3)

    result = mapping.poll()

    outcomes = sorted(invocation.outcome for invocation in result.invocations)
    assert outcomes == ["partial", "success", "success"]
    assert mapping.stats.messages_deleted == 14
    clock.advance(31)
    handler.fail_body = None
    again = mapping.poll()
    assert [r["body"] for i in again.invocations for r in i.event["Records"]] == ["m07"]
    assert queue.depth() == 0


def test_without_maximum_concurrency_batches_run_one_at_a_time(
    sqs: Any, clock: VirtualClock
) -> None:
    queue = _queue_of(sqs, "serial", 15)
    handler = SteppingHandler(sqs, queue)
    mapping = SqsMapping(
        mapping_config(queue.arn, batch_size=5, report_batch_item_failures=True),
        handler,
        sqs_client=sqs,
        clock=clock,
    )

    mapping.drain()

    assert mapping.concurrency == 1
    assert handler.in_flight_seen == [5, 5, 5]
    assert not _overlapped(handler.steps)


def test_concurrency_is_bounded_by_maximum_concurrency(sqs: Any, clock: VirtualClock) -> None:
    queue = _queue_of(sqs, "bounded", 0)
    with pytest.raises(
        MappingConfigError, match=r"concurrency=4 exceeds .*MaximumConcurrency \(3\)"
    ):
        _mapping(queue, SteppingHandler(sqs, queue), sqs, clock, seed=0, concurrency=4)
    with pytest.raises(MappingConfigError, match="at least 1"):
        _mapping(queue, SteppingHandler(sqs, queue), sqs, clock, seed=0, concurrency=0)
    assert (
        _mapping(queue, SteppingHandler(sqs, queue), sqs, clock, seed=0, concurrency=2).concurrency
        == 2
    )


def test_a_lock_held_across_an_aws_call_is_reported_not_hung(
    sqs: Any, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(concurrency_module, "TURN_WAIT_LIMIT_SECONDS", 0.5)
    queue = _queue_of(sqs, "locked", 10)
    lock = threading.Lock()

    def handler(event: dict[str, Any], context: Any) -> Any:
        with lock:
            sqs.get_queue_attributes(QueueUrl=queue.url, AttributeNames=["All"])
        return {"batchItemFailures": []}

    # A seed whose first two draws differ: the lock holder is switched away
    # from at its AWS call, and the other invocation then waits on the lock.
    seed = next(s for s in range(100) if len(set(_draws(s, 2))) == 2)
    mapping = SqsMapping(
        mapping_config(queue.arn, batch_size=5, maximum_concurrency=2),
        handler,
        sqs_client=sqs,
        clock=clock,
        random_source=random.Random(seed),
    )
    with pytest.raises(InterleavingDeadlock, match="holds a lock across an AWS call"):
        mapping.poll()


def _draws(seed: int, count: int) -> tuple[int, ...]:
    rnd = random.Random(seed)
    return tuple(rnd.choice([0, 1]) for _ in range(count))
