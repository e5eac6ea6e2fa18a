"""A typed payload for consumer functions: the event's data parsed by a Pydantic model.

``@consumer.handler(model=OrderCreated)`` hands the function the envelope and
``OrderCreated.model_validate(envelope.data)``, as Powertools' batch
processor does with its ``model=``. Pydantic stays optional: nothing here
imports it; any class with Pydantic v2's ``model_validate`` classmethod works.

Data the model refuses fails its own message, like any exception the
function raises: it is retried, then reaches the DLQ after
``maxReceiveCount`` receives, and no idempotency record says it was done.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from dynamodb_outbox.envelope import Envelope

__all__ = ["with_payload_model"]

M = TypeVar("M")


def _validator(model: type[M]) -> Callable[[Any], M]:
    validate = getattr(model, "model_validate", None)
    if not isinstance(model, type) or not callable(validate):
        raise TypeError(
            f"model must be a Pydantic v2 model class (with model_validate), got {model!r}"
        )
    return cast(Callable[[Any], M], validate)


def with_payload_model(
    process_one: Callable[[Envelope, M], object], model: type[M]
) -> Callable[[Envelope], object]:
    """``process_one(envelope, payload)`` as a one-argument function that parses the payload.

    An ``async def`` function stays one (the consumer awaits it). Raises
    ``TypeError`` at once when ``model`` has no ``model_validate``.
    """
    validate = _validator(model)
    is_async = inspect.iscoroutinefunction(process_one) or inspect.iscoroutinefunction(
        type(process_one).__call__
    )
    if is_async:
        process_async = cast(Callable[[Envelope, M], Awaitable[object]], process_one)

        @functools.wraps(process_one)
        async def run_async(envelope: Envelope) -> object:
            return await process_async(envelope, validate(envelope.data))

        return run_async

    @functools.wraps(process_one)
    def run(envelope: Envelope) -> object:
        return process_one(envelope, validate(envelope.data))

    return run
