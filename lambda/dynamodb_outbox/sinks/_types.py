"""What every sink shares: the event sent, the answer per entry, the rules and the sink protocols.

Also the few helpers both sinks' rules use to tell why an event can never be sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Final, NamedTuple, Protocol

from dynamodb_outbox.envelope import Envelope

__all__ = ["EntryResult", "OutboundEvent", "Sink", "SinkError", "SinkRules"]


class OutboundEvent(NamedTuple):
    """An event ready to send: its envelope, the exact JSON the writer committed, its UTC time."""

    envelope: Envelope
    body: str
    time: datetime

    @classmethod
    def of(cls, envelope: Envelope, body: str | None = None) -> OutboundEvent:
        """The event of ``envelope``, sending ``body`` (default: the envelope's own JSON)."""
        return cls(envelope, envelope.to_json() if body is None else body, envelope.utc_time)


class EntryResult(NamedTuple):
    """What the transport said about one entry of a call."""

    error_code: str | None = None
    error_message: str | None = None
    retryable: bool = False

    @property
    def ok(self) -> bool:
        return self.error_code is None


_ACCEPTED: Final = EntryResult()


class SinkError(Exception):
    """The call failed as a whole: nothing is known about any of its entries."""


# ------------------------------------------------------------------------------ rules


class SinkRules(Protocol):
    """What one transport can carry; needs no client."""

    @property
    def name(self) -> str:
        """The API, as metrics and messages name it: ``PutEvents`` or ``PublishBatch``."""
        ...

    @property
    def max_entries(self) -> int: ...

    @property
    def max_request_bytes(self) -> int:
        """Inclusive upper bound on the sum of :meth:`entry_size` over one call (and one entry)."""
        ...

    def entry_size(self, event: OutboundEvent) -> int:
        """Bytes the transport counts for ``event``; ``UnicodeEncodeError`` if not UTF-8."""
        ...

    @property
    def max_delivery_bytes(self) -> int:
        """Inclusive upper bound on :meth:`delivery_size`: what a consumer queue can take."""
        ...

    def delivery_size(self, event: OutboundEvent) -> int:
        """The longest SQS message (with what a DLQ adds left out) ``event`` can become.

        Past the API the event is wrapped for the queue (EventBridge's event,
        SNS's notification): see :mod:`dynamodb_outbox.sizes`.
        """
        ...

    def refusal(self, event: OutboundEvent) -> str | None:
        """Why the transport would never accept ``event`` besides its size, or None."""
        ...

    def check(self, event: OutboundEvent) -> tuple[int, str | None]:
        """:meth:`entry_size`, and why ``event`` can never be sent (None if it can), at once.

        The publisher's one pass over an event: over :attr:`max_request_bytes`,
        over :attr:`max_delivery_bytes` or a :meth:`refusal`, told in that
        order, each as the reason its item is quarantined. What depends only on
        the event's source and type is worked out once per pair.
        ``UnicodeEncodeError`` as :meth:`entry_size`.
        """
        ...

    @property
    def orders_by_subject(self) -> bool:
        """Whether the transport keeps the events of one subject in order (SNS FIFO).

        The publisher then never lets a later event of a subject overtake an
        earlier one that failed (see :mod:`dynamodb_outbox.publishing`).
        """
        ...


def _utf8_length(text: str) -> int:
    # An ASCII string's length is its UTF-8 size; isascii() reads a flag, not the text.
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _verdict(
    rules: SinkRules, size: int, delivered: int, refusal: Callable[[], str | None]
) -> str | None:
    """Why an event of ``size`` entry bytes, ``delivered`` bytes at most, can never be sent."""
    if size > rules.max_request_bytes:
        return f"event too large for {rules.name}: {size} bytes, limit {rules.max_request_bytes}"
    if delivered > rules.max_delivery_bytes:
        # Sent, it would be lost between the bus or topic and the queue.
        return (
            f"event too large for the consumer queues after {rules.name}: up to {delivered} "
            f"bytes delivered, limit {rules.max_delivery_bytes}"
        )
    why = refusal()
    return None if why is None else f"{rules.name} cannot take it: {why}"


# ------------------------------------------------------------------------------ sinks


class Sink(Protocol):
    """Where events go. One :meth:`send` is one API call, in the order given."""

    @property
    def rules(self) -> SinkRules: ...

    def send(self, events: Sequence[OutboundEvent]) -> list[EntryResult]:
        """One result per event, aligned with ``events``.

        Raises :class:`SinkError` or a botocore error when the call itself
        failed; any other exception means the request could not be built from
        these events (nothing was sent).
        """
        ...
