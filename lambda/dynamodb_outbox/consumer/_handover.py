"""How a record's worker thread hands its ``async def`` call to the process loop, and takes it back.

Each record of an async batch runs on a worker thread (its idempotency calls
block), and its coroutine runs on the process loop, where the function's
clients live: the worker hands the coroutine over and waits for its end, so
the event is COMPLETED only after it.

A ``KeyboardInterrupt`` stops the loop in the middle of a batch. The loop is
kept for the life of the process (:mod:`._loop`), so whatever was left on it
would run in the next invocation: a coroutine handed over just before the
stop would then run its event after the worker had failed it, and the
failure had deleted the record that guards it; the redelivery runs it as
well, and the event is applied twice. So a batch that stops first
:meth:`Handover.close`\\ s (no worker hands anything over from then on, and a
coroutine handed over but not started never starts), then drains the loop
(:func:`._loop.run_to_end`), and only then :meth:`Handover.release`\\ s the
workers still waiting: each finds its coroutine ended (done or cancelled)
and records that outcome.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any

from dynamodb_outbox.consumer._errors import PROCESS_ENDING
from dynamodb_outbox.envelope import Envelope

__all__ = ["Handover"]


class Handover:
    """The coroutines one batch's workers hand to the loop, stopped as one if the batch stops."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self._released: Future[None] = Future()

    def close(self) -> None:
        """Nothing is handed over from now on; what was handed over but not started never starts."""
        with self._lock:
            self._closed = True

    def release(self) -> None:
        """Wake the workers still waiting: the loop will not run their coroutines any more."""
        self.close()
        if not self._released.done():
            self._released.set_result(None)

    def awaited_on(
        self, loop: asyncio.AbstractEventLoop, process_one: Callable[[Envelope], object]
    ) -> Callable[[Envelope], None]:
        """``process_one`` as a blocking call for a worker thread, its coroutine run on ``loop``.

        Whatever the coroutine raises is raised here, in the record's worker;
        a ``KeyboardInterrupt`` is left to asyncio, which stops the loop with
        it (the batch then closes, drains the loop and releases the workers).
        """

        def run_one(envelope: Envelope) -> None:
            result = process_one(envelope)
            if not inspect.isawaitable(result):
                return
            with self._lock:
                if self._closed:
                    _close(result)
                    raise asyncio.CancelledError("the batch was stopped before this event started")
                running = asyncio.run_coroutine_threadsafe(self._guarded(result), loop)
            either: list[Future[Any]] = [running, self._released]
            wait(either, return_when=FIRST_COMPLETED)
            if running.cancelled():  # by the drain, before _guarded started it
                _close(result)
                raise asyncio.CancelledError("the batch was stopped before this event started")
            if not running.done():
                running.cancel()
                raise asyncio.CancelledError("the batch was stopped before this event ended")
            raised = running.result()
            if raised is not None:
                raise raised

        return run_one

    async def _guarded(self, awaitable: Awaitable[object]) -> BaseException | None:
        # Returned, not raised: asyncio re-raises SystemExit out of the loop, and a
        # CancelledError would cancel the future the worker waits on instead of
        # telling it what happened.
        if self._closed:
            _close(awaitable)
            return asyncio.CancelledError("the batch was stopped before this event started")
        try:
            await awaitable
        except PROCESS_ENDING:
            raise
        except BaseException as exc:
            return exc
        return None


def _close(awaitable: object) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()  # never started: no "coroutine was never awaited" warning
