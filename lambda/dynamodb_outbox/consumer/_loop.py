"""The event loop ``async def`` consumers run on: one per process, kept across invocations.

Lambda's Python runtime calls the handler again and again in the same thread
of the same process (a warm sandbox). An async client made once and reused
(aiohttp, asyncpg, aioboto3) is bound to the loop it was first used on, so
that loop must outlive the invocation: a loop per batch makes every later
invocation fail with "attached to a different loop". Powertools'
``AsyncBatchProcessor`` keeps the thread's current loop for the same reason
(``asyncio.get_event_loop()``, a new one only when there is none or it was
closed); so does this module, and it sets the loop as the thread's current
one, so code that calls ``asyncio.get_event_loop()`` outside a coroutine gets
the same loop.

Called from code that already runs a loop in this thread (a test, a web
framework), blocking that loop's thread with ``run_until_complete`` is
refused by asyncio ("Cannot run the event loop while another loop is
running"): the batch then runs on the loop of one helper thread, kept for the
life of the process as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import warnings
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["process_loop", "run_to_end"]

T = TypeVar("T")

_local = threading.local()
_helper_lock = threading.Lock()
_helper: ThreadPoolExecutor | None = None


def process_loop() -> asyncio.AbstractEventLoop:
    """This thread's event loop for consumers: made (or adopted) once, then reused."""
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = _current_or_new()
        _local.loop = loop
    return loop


def _current_or_new() -> asyncio.AbstractEventLoop:
    loop: asyncio.AbstractEventLoop | None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:  # none set in this thread (and, from 3.14, never made implicitly)
        loop = None
    if loop is None or loop.is_closed() or loop.is_running():
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
    return loop


def run_to_end(
    make: Callable[[], Coroutine[Any, Any, T]], *, on_stop: Callable[[], None] | None = None
) -> T:
    """Run the coroutine ``make()`` returns to its end on the process loop; return its result.

    An exception it raises is raised here. A ``KeyboardInterrupt`` first calls
    ``on_stop`` (so nothing more is handed to the loop), then drains the loop:
    every task left on it is cancelled and run to its end, so nothing of this
    batch resumes in the next invocation, which runs on the same loop.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run_on(process_loop(), make(), on_stop)
    done: Future[T] = _helper_thread().submit(run_to_end, make, on_stop=on_stop)
    return done.result()


def _run_on(
    loop: asyncio.AbstractEventLoop,
    coroutine: Coroutine[Any, Any, T],
    on_stop: Callable[[], None] | None,
) -> T:
    task = loop.create_task(coroutine)
    while True:
        try:
            return loop.run_until_complete(task)
        except (SystemExit, RuntimeError):
            if task.done():
                return task.result()  # the batch itself raised: raise it
            # asyncio raises a SystemExit out of run_until_complete from any task
            # (a child a record started with create_task, gather or wait_for),
            # and a handler that stops the loop makes run_until_complete give
            # up: the batch is still running. The record that awaits the child
            # gets its exception and fails alone; run the loop on.
            continue
        except BaseException:
            # A KeyboardInterrupt: the process is stopping.
            if on_stop is not None:
                on_stop()
            _drain(loop)
            raise


#: How long a stopping batch waits for the tasks left on the loop to end once
#: cancelled. A task that swallows its CancelledError and awaits on is left
#: after it (it may then run in the next invocation: see docs/decisions.md);
#: without a bound the stop would hang on it.
DRAIN_SECONDS = 2.0


def _drain(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel every task on the (stopped) loop and run it until none is left, within DRAIN_SECONDS.

    A round ends early when a task raises ``KeyboardInterrupt`` or
    ``SystemExit`` (asyncio stops the loop with it, say a child task's
    ``sys.exit()`` on cancellation): rounds go on while time is left, so no
    number of them leaves a task half-run.
    """
    deadline = time.monotonic() + DRAIN_SECONDS
    while (pending := _pending(loop)) and (left := deadline - time.monotonic()) > 0:
        for task in pending:
            task.cancel()
        with contextlib.suppress(BaseException):
            loop.run_until_complete(_settled(pending, left))


def _pending(loop: asyncio.AbstractEventLoop) -> list[asyncio.Task[Any]]:
    return [task for task in asyncio.all_tasks(loop) if not task.done()]


async def _settled(pending: list[asyncio.Task[Any]], timeout: float) -> None:
    await asyncio.wait(pending, timeout=timeout)
    # Callbacks queued before the stop (a worker's hand-over) become tasks
    # only now, and end at their first step (_handover): two turns of the
    # loop run both.
    await asyncio.sleep(0)
    await asyncio.sleep(0)


def _helper_thread() -> ThreadPoolExecutor:
    global _helper
    with _helper_lock:
        if _helper is None:
            _helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="outbox-consumer-loop")
        return _helper
