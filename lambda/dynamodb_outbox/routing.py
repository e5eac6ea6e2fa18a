"""Routing by event type: one queue, several event types, one function per type.

A consumer queue often carries several types (``OrderCreated``, ``OrderPaid``)
whose data have different shapes. A :class:`Router` picks the function by the
envelope's ``type`` (the CloudEvents attribute, EventBridge's ``detail-type``),
never by guessing from the data's fields, and parses the data with that
type's model::

    router = Router()

    @router.on("OrderCreated", model=OrderCreated)
    def created(event: Envelope, order: OrderCreated) -> None: ...

    @router.on("OrderPaid")
    async def paid(event: Envelope) -> None: ...

    handler = consumer.handler(router)

The rule for a type with no route: the event **fails its message**
(:class:`UnroutedEvent`), so it is retried and reaches the DLQ after
``maxReceiveCount`` receives, kept, counted in ``FailedEvents`` and alarmed,
never acknowledged unseen: the outbox promises that no event is lost, and a
type the code does not know is either a producer's new type (deploy its route,
then redrive the DLQ) or a rule wider than the code (narrow the consumer's
``event_pattern``). Types the consumer receives on purpose and has nothing to
do for are listed in ``Router(ignore=[...])``: they complete, with nothing run.

Routes are all ``def`` or all ``async def`` (the consumer awaits the latter on
the batch's event loop); mixing them is refused when the route is added.
The decorator returns the function unchanged, so it can be called directly in
a unit test.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar, cast, overload

from dynamodb_outbox._public_names import present_as
from dynamodb_outbox._typed_payload import with_payload_model
from dynamodb_outbox.envelope import Envelope

__all__ = ["Router", "UnroutedEvent"]

_Model = TypeVar("_Model")
_Function = TypeVar("_Function", bound=Callable[..., object])


class UnroutedEvent(LookupError):
    """The event's type has no route and is not ignored; its message fails (DLQ in the end)."""


def _is_async(function: Callable[..., object]) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        type(function).__call__
    )


class Router:
    """Dispatches an :class:`Envelope` to the function registered for its ``type``."""

    def __init__(self, *, ignore: Iterable[str] = ()) -> None:
        self.ignored = frozenset(ignore)
        self._routes: dict[str, Callable[[Envelope], object]] = {}
        self._async: bool | None = None
        self._frozen = False

    @property
    def types(self) -> frozenset[str]:
        """The event types with a route."""
        return frozenset(self._routes)

    @property
    def is_async(self) -> bool:
        """Whether the routes are ``async def`` (the consumer then awaits them)."""
        return bool(self._async)

    @overload
    def on(self, event_type: str) -> Callable[[_Function], _Function]: ...

    @overload
    def on(
        self, event_type: str, *, model: type[_Model]
    ) -> Callable[[Callable[[Envelope, _Model], Any]], Callable[[Envelope, _Model], Any]]: ...

    def on(
        self, event_type: str, *, model: type[Any] | None = None
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: the function for events of ``event_type``.

        With ``model=`` (a Pydantic v2 model) the function gets
        ``(envelope, model.model_validate(envelope.data))``; data the model
        refuses fails its message.
        """
        if not isinstance(event_type, str) or not event_type:
            raise ValueError(f"event_type must be a non-empty string, got {event_type!r}")
        if event_type in self._routes:
            raise ValueError(f"event type {event_type!r} already has a route")
        if event_type in self.ignored:
            raise ValueError(f"event type {event_type!r} is both ignored and routed")
        if self._frozen:
            raise RuntimeError(
                f"route {event_type!r} added after consumer.handler(router): add every route first"
            )

        def register(function: Callable[..., Any]) -> Callable[..., Any]:
            is_async = _is_async(function)
            if self._async is not None and is_async != self._async:
                raise TypeError(
                    f"route {event_type!r}: a router's functions are all `def` or all "
                    "`async def`; use one router per kind"
                )
            self._async = is_async
            route = with_payload_model(function, model) if model is not None else function
            self._routes[event_type] = route
            return function

        return register

    def route(self, envelope: Envelope) -> Callable[[Envelope], object] | None:
        """The function for ``envelope``, None when its type is ignored.

        Raises :class:`UnroutedEvent` for a type neither routed nor ignored.
        """
        route = self._routes.get(envelope.type)
        if route is not None or envelope.type in self.ignored:
            return route
        known = ", ".join(sorted(self._routes)) or "none"
        raise UnroutedEvent(
            f"no route for event type {envelope.type!r} (routes: {known}); the message fails "
            "and reaches the DLQ: add a route, list the type in Router(ignore=...), or narrow "
            "the consumer's event_pattern"
        )

    def __call__(self, envelope: Envelope) -> object:
        """Run the route of ``envelope`` (a plain router; see :meth:`process_one`)."""
        route = self.route(envelope)
        return None if route is None else route(envelope)

    def process_one(self) -> Callable[[Envelope], object]:
        """The one-event function the consumer runs: ``async def`` when the routes are.

        The routes are fixed from then on (a later :meth:`on` raises).
        """
        self._frozen = True
        if not self._async:
            return self.__call__

        async def dispatch(envelope: Envelope) -> object:
            route = self.route(envelope)
            if route is None:
                return None
            return await cast(Callable[[Envelope], Awaitable[object]], route)(envelope)

        return dispatch


# Documented as dynamodb_outbox.Router and UnroutedEvent (docs/python.md).
present_as("dynamodb_outbox", Router, UnroutedEvent)
