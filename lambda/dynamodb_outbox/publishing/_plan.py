"""Planning: each candidate item is read once into an event to send or a poison to quarantine."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.outbox_item import ATTR_ENVELOPE, OUTBOX_SK_PREFIX
from dynamodb_outbox.publishing._errors import MAX_REASON_CHARS, describe_error
from dynamodb_outbox.sinks import OutboundEvent, Sink
from dynamodb_outbox.stream_types import AttributeMap, string_attribute
from dynamodb_outbox.table_keys import TableKeys

__all__ = ["OutboxCandidate"]


class OutboxCandidate(NamedTuple):
    """One outbox item to publish, whichever path found it.

    ``key`` is its table key (both key attributes); ``item`` the whole item in
    low-level JSON: a stream record's ``NewImage`` or what the sweeper read;
    ``None`` only for a stream record without ``NewImage`` (wrong stream view
    type), which is poison. ``position`` is its index in the caller's input and
    ``checkpoint`` an opaque label the caller maps a failure back to (the stream
    uses the record's sequence number).
    """

    key: AttributeMap
    item: Mapping[str, Any] | None
    position: int
    checkpoint: str | None = None


# Plain classes, not NamedTuples: a NamedTuple costs a cold start about 0.1 ms to
# define (it compiles each field's annotation), and these are never unpacked.


class _Poison:
    __slots__ = ("candidate", "reason")

    def __init__(self, candidate: OutboxCandidate, reason: str) -> None:
        self.candidate = candidate
        self.reason = reason


class _Publish:
    __slots__ = ("candidate", "event", "size")

    def __init__(self, candidate: OutboxCandidate, event: OutboundEvent, size: int) -> None:
        self.candidate = candidate
        self.event = event
        self.size = size


_Plan = _Poison | _Publish


def _plan(candidate: OutboxCandidate, sink: Sink, table_keys: TableKeys) -> _Plan:
    """Publish or quarantine; whatever reading the item raises makes it poison, alone."""
    try:
        return _plan_or_raise(candidate, sink, table_keys)
    except Exception as exc:
        return _Poison(candidate, f"unreadable item: {describe_error(exc)}"[:MAX_REASON_CHARS])


def _plan_or_raise(candidate: OutboxCandidate, sink: Sink, table_keys: TableKeys) -> _Plan:
    def poison(reason: str) -> _Poison:
        return _Poison(candidate, reason[:MAX_REASON_CHARS])

    sk = string_attribute(candidate.key, table_keys.sort)
    item = candidate.item
    if item is None:
        return poison("stream record has no NewImage (stream view type must include new images)")
    body = string_attribute(item, ATTR_ENVELOPE)
    if body is None:
        return poison(f"outbox item has no string attribute {ATTR_ENVELOPE!r}")
    try:
        envelope = Envelope.from_stored_json(body)  # the stored text is what is sent
    except ValueError as exc:  # InvalidEnvelope is a ValueError
        return poison(f"invalid envelope: {exc}")
    if OUTBOX_SK_PREFIX + envelope.id != sk:
        return poison(f"envelope id {envelope.id!r} does not match sort key {sk!r}")
    event = OutboundEvent(envelope, body, envelope.utc_time)
    try:
        size, why_not = sink.rules.check(event)  # sizes and fields, each checked once
    except UnicodeEncodeError as exc:  # a lone surrogate: no sink can ever send it
        return poison(f"envelope is not encodable as UTF-8: {exc}")
    if why_not is not None:
        return poison(why_not)
    return _Publish(candidate, event, size)
