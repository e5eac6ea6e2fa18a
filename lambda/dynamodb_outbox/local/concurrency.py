"""Several invocations in flight at once, interleaved reproducibly.

Lambda runs batches of one mapping at the same time: up to
``ScalingConfig.MaximumConcurrency`` for an SQS queue, up to
``ParallelizationFactor`` per shard of a DynamoDB stream. What concurrent
invocations can see of each other is what they read and write through AWS, so
:func:`run_concurrently` runs each invocation in a thread of its own but lets
only one run at a time, and switches threads at every AWS API call a handler
makes (botocore's ``BaseClient._make_api_call``), drawing the next thread from
``random_source``. Every interleaving is then reproducible from the seed, and a
test that runs many seeds explores many interleavings; real parallelism would
give the same outcomes, less often and unrepeatably.

Time: the virtual clock is shared. A handler that waits advances it for all,
so waits in concurrent invocations add up instead of overlapping: their time
runs out earlier than on AWS, never later.

Threads a handler starts itself are not scheduled: they run freely, as they
would without concurrency.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from botocore.client import BaseClient

__all__ = ["InterleavingDeadlock", "run_concurrently"]

T = TypeVar("T")

# A scheduled thread waiting longer than this for its turn means a handler
# blocks on something another, parked, invocation holds (a lock across an
# AWS call): report it instead of hanging the test run.
TURN_WAIT_LIMIT_SECONDS = 120.0


class InterleavingDeadlock(RuntimeError):
    """A concurrent invocation waited for its turn past :data:`TURN_WAIT_LIMIT_SECONDS`."""


class _Baton:
    """Which of the scheduled threads may run; passed on at every AWS call."""

    def __init__(self, count: int, random_source: random.Random) -> None:
        self._condition = threading.Condition()
        self._runnable = list(range(count))
        self._random = random_source
        self._turn: int | None = None
        self.switches = 0
        self.deadlock: str | None = None

    def start(self) -> None:
        with self._condition:
            self._choose()

    def wait_turn(self, me: int) -> None:
        with self._condition:
            if not self._condition.wait_for(lambda: self._turn == me, TURN_WAIT_LIMIT_SECONDS):
                # Raised in the handler's thread (where the invoker would take
                # it for a handler error) and again by run_concurrently.
                self.deadlock = (
                    f"invocation {me} waited {TURN_WAIT_LIMIT_SECONDS} s for its turn: a handler "
                    "holds a lock across an AWS call while another invocation needs it"
                )
                raise InterleavingDeadlock(self.deadlock)

    def pass_on(self, me: int, *, finished: bool = False) -> None:
        with self._condition:
            if finished:
                self._runnable.remove(me)
            self._choose()
            if self._turn != me:
                self.switches += 1

    def _choose(self) -> None:
        self._turn = self._random.choice(self._runnable) if self._runnable else None
        self._condition.notify_all()


_scheduled = threading.local()
_patch_lock = threading.Lock()
_patch_depth = 0
_original_make_api_call = getattr(BaseClient, "_make_api_call")  # noqa: B009 (not in the stubs)


def _make_api_call_in_turn(self: BaseClient, operation_name: str, api_params: Any) -> Any:
    baton: _Baton | None = getattr(_scheduled, "baton", None)
    if baton is not None:
        me: int = _scheduled.index
        baton.pass_on(me)
        baton.wait_turn(me)
    return _original_make_api_call(self, operation_name, api_params)


@contextmanager
def _switching_at_aws_calls() -> Iterator[None]:
    global _patch_depth
    with _patch_lock:
        if _patch_depth == 0:
            setattr(BaseClient, "_make_api_call", _make_api_call_in_turn)  # noqa: B010
        _patch_depth += 1
    try:
        yield
    finally:
        with _patch_lock:
            _patch_depth -= 1
            if _patch_depth == 0:
                setattr(BaseClient, "_make_api_call", _original_make_api_call)  # noqa: B010


def run_concurrently(
    calls: Sequence[Callable[[], T]], random_source: random.Random
) -> tuple[list[T], int]:
    """Run ``calls`` as concurrent invocations; their results in order, and the thread switches.

    One call runs directly, without a thread. An exception a call raises is
    re-raised here once all calls have ended (the invoker never raises for a
    handler's own errors, so this is the runtime's own failure).
    """
    if len(calls) == 1:
        return [calls[0]()], 0
    if getattr(_scheduled, "baton", None) is not None:
        raise RuntimeError("run_concurrently cannot be nested inside a concurrent invocation")
    baton = _Baton(len(calls), random_source)
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def run(index: int) -> None:
        _scheduled.baton, _scheduled.index = baton, index
        try:
            baton.wait_turn(index)
            results[index] = calls[index]()
        except BaseException as error:  # re-raised in the caller's thread
            errors[index] = error
        finally:
            _scheduled.baton = None
            baton.pass_on(index, finished=True)

    threads = [
        threading.Thread(target=run, args=(index,), name=f"local-invocation-{index}", daemon=True)
        for index in range(len(calls))
    ]
    with _switching_at_aws_calls():
        for thread in threads:
            thread.start()
        baton.start()
        for thread in threads:
            thread.join()
    if baton.deadlock is not None:
        raise InterleavingDeadlock(baton.deadlock)
    for error in errors:
        if error is not None:
            raise error
    return results, baton.switches
