"""Function timeouts and the response limit, as Lambda applies them.

The context's remaining time follows the virtual clock from the start of the
invocation; an invocation that ends past its timeout is a function error
("Task timed out"), whatever it answered: a stream batch is retried whole (or
bisected), an SQS batch returns whole to its queue. A response over 6 MB is a
function error too (``Function.ResponseSizeTooLarge``).
"""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import Queue, Recorder, Table, make_queue

from dynamodb_outbox.local import SqsMapping, StreamMapping, VirtualClock, mapping_config
from dynamodb_outbox.local.context import LambdaContext
from dynamodb_outbox.local.invoker import MAX_RESPONSE_BYTES, invoke_handler

TIMEOUT = 3.0


def test_remaining_time_follows_the_virtual_clock_from_the_start_of_the_invocation() -> None:
    clock = VirtualClock(start=1_000.0)
    context = LambdaContext(
        "arn:aws:lambda:eu-west-1:1:function:f", timeout_seconds=TIMEOUT, clock=clock
    )
    assert context.get_remaining_time_in_millis() == 3_000
    clock.advance(1.25)
    assert context.get_remaining_time_in_millis() == 1_750
    clock.advance(5)
    assert context.get_remaining_time_in_millis() == 0
    assert context.timed_out


def test_without_a_clock_the_remaining_time_is_the_whole_timeout() -> None:
    context = LambdaContext("arn:aws:lambda:eu-west-1:1:function:f", timeout_seconds=TIMEOUT)
    assert context.get_remaining_time_in_millis() == 3_000
    assert not context.timed_out


def _slow(clock: VirtualClock, seconds: float, answer: Any = None) -> Any:
    def handler(event: dict[str, Any], context: Any) -> Any:
        clock.advance(seconds)
        return answer

    return handler


@pytest.mark.parametrize("raises", [False, True], ids=["returns", "raises"])
def test_an_invocation_past_its_timeout_is_a_function_error_whatever_it_answered(
    raises: bool,
) -> None:
    clock = VirtualClock(start=0.0)
    context = LambdaContext(
        "arn:aws:lambda:eu-west-1:1:function:f", timeout_seconds=TIMEOUT, clock=clock
    )

    def handler(event: dict[str, Any], _: Any) -> Any:
        clock.advance(TIMEOUT + 0.001)
        if raises:
            raise RuntimeError("late anyway")
        return {"batchItemFailures": []}

    result = invoke_handler(handler, {"Records": []}, context)

    assert result.error == "Task timed out after 3.00 seconds"
    assert result.response is None


def test_an_invocation_that_ends_exactly_at_its_timeout_is_not_late() -> None:
    clock = VirtualClock(start=0.0)
    context = LambdaContext(
        "arn:aws:lambda:eu-west-1:1:function:f", timeout_seconds=TIMEOUT, clock=clock
    )
    result = invoke_handler(_slow(clock, TIMEOUT, {"ok": 1}), {}, context)
    assert (result.error, result.response) == (None, {"ok": 1})


def test_a_response_over_six_mib_is_a_function_error() -> None:
    clock = VirtualClock(start=0.0)
    context = LambdaContext(
        "arn:aws:lambda:eu-west-1:1:function:f", timeout_seconds=TIMEOUT, clock=clock
    )
    fits = "x" * (MAX_RESPONSE_BYTES - 2)  # plus the two quotes of the JSON string

    assert invoke_handler(lambda e, c: fits, {}, context).error is None
    too_big = invoke_handler(lambda e, c: fits + "x", {}, context)
    assert too_big.error is not None and too_big.error.startswith("Function.ResponseSizeTooLarge")


def test_a_stream_batch_that_times_out_is_retried_whole(
    table: Table, streams: Any, clock: VirtualClock
) -> None:
    table.put_outbox(3)
    handler = Recorder()
    calls: list[int] = []

    def first_too_slow(event: dict[str, Any], context: Any) -> Any:
        calls.append(len(event["Records"]))
        if len(calls) == 1:
            clock.advance(TIMEOUT + 1)  # e.g. a throttled call retried past the deadline
            return {"batchItemFailures": []}  # never seen by Lambda
        return handler(event, context)

    mapping = StreamMapping(
        mapping_config(table.stream_arn, report_batch_item_failures=True),
        first_too_slow,
        streams_client=streams,
        clock=clock,
        function_timeout_seconds=TIMEOUT,
    )
    mapping.drain()

    assert calls == [3, 3]
    assert mapping.invocations[0].outcome == "failure"
    assert mapping.invocations[0].error == "Task timed out after 3.00 seconds"
    assert mapping.invocations[1].outcome == "success"


def test_an_sqs_batch_that_times_out_returns_whole_to_the_queue(
    sqs: Any, clock: VirtualClock
) -> None:
    queue: Queue = make_queue(sqs, "slow-consumer", VisibilityTimeout=30)
    for n in range(3):
        queue.send(f"m{n}")
    mapping = SqsMapping(
        mapping_config(queue.arn, report_batch_item_failures=True),
        _slow(clock, TIMEOUT + 1, {"batchItemFailures": []}),
        sqs_client=sqs,
        clock=clock,
        function_timeout_seconds=TIMEOUT,
    )

    mapping.poll()

    assert mapping.invocations[0].outcome == "failure"
    assert mapping.stats.messages_deleted == 0
    assert queue.depth() == 3


def test_a_handler_that_exits_is_a_function_error_as_runtime_exit_error() -> None:
    # Lambda's Python runtime lets SystemExit end its process: the invocation fails.
    context = LambdaContext("arn:aws:lambda:eu-west-1:1:function:f", timeout_seconds=TIMEOUT)

    def exits(event: dict[str, Any], _: Any) -> Any:
        raise SystemExit(3)

    result = invoke_handler(exits, {"Records": []}, context)

    assert result.error == "Runtime.ExitError: Runtime exited with error: exit status 3"
    assert result.response is None
