"""EventBridge: the rules of ``PutEvents``, the head cache, the bus name check, the sink."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, NamedTuple

from dynamodb_outbox.sinks._types import (
    _ACCEPTED,
    EntryResult,
    OutboundEvent,
    SinkError,
    SinkRules,
    _utf8_length,
    _verdict,
)
from dynamodb_outbox.sizes import (
    PUT_EVENTS_MAX_REQUEST_BYTES,
    QUEUE_DELIVERY_BUDGET_BYTES,
    eventbridge_delivery_bytes,
    json_text_bytes,
)

if TYPE_CHECKING:
    from dynamodb_outbox.sinks._types import EventsClient, PutEventsRequestEntry

__all__ = [
    "EVENTBRIDGE_RULES",
    "POISON_PUT_EVENTS_CODES",
    "PUT_EVENTS_MAX_DETAIL_TYPE_LENGTH",
    "PUT_EVENTS_MAX_ENTRIES",
    "PUT_EVENTS_MAX_SOURCE_LENGTH",
    "PUT_EVENTS_TIME_BYTES",
    "EventBridgeRules",
    "EventBridgeSink",
    "put_events_entry_size",
]


PUT_EVENTS_MAX_ENTRIES: Final = 10
# Every size limit, and the queue each path ends in, is in dynamodb_outbox.sizes.
# AWS's entry size formula counts 14 bytes for an entry that carries a Time.
PUT_EVENTS_TIME_BYTES: Final = 14
# PutEvents takes Time as seconds since the epoch; AWS documents no range, so an
# event from before 1970 is sent without one (EventBridge stamps its arrival)
# rather than risk a refusal: the envelope in Detail keeps its own time.
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
# PutEventsRequestEntry: DetailType 1-128 and Source 1-256 characters; "aws." is
# reserved for AWS services. A violation fails the whole request (a
# ValidationException), not just the entry, so it must never reach a call.
PUT_EVENTS_MAX_DETAIL_TYPE_LENGTH: Final = 128
PUT_EVENTS_MAX_SOURCE_LENGTH: Final = 256
_RESERVED_SOURCE_PREFIX: Final = "aws."
# PutEvents: "For the JSON number (integer) data type, the constraints are: a
# minimum value of -9,223,372,036,854,775,808 and a maximum value of
# 9,223,372,036,854,775,807."
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
# JSON writes numbers in ASCII digits only: an integer of 19 digits or more is a
# run of 19 digits in the text. Told by mapping every digit byte to "0" and every
# other byte to "x" and looking for 19 zeros: a tenth of what a regex search
# for [0-9]{19} costs, on every event (a UTF-8 multi-byte sequence holds no
# byte below 0x80, so no digit).
_DIGITS_AS_ZEROS: Final = bytes(0x30 if 0x30 <= b <= 0x39 else 0x78 for b in range(256))
_NINETEEN_DIGITS: Final = b"0" * 19


def _has_long_digit_run(text: str) -> bool:
    """Whether ``text`` holds 19 ASCII digits in a row."""
    return _NINETEEN_DIGITS in text.encode("utf-8", "surrogatepass").translate(_DIGITS_AS_ZEROS)


# The per-entry codes that say the entry itself is malformed: quarantined.
# AccessDeniedException, InvalidAccountIdException and the two
# NotAuthorizedFor... codes, which AWS also calls non-retryable, describe the
# publisher's permissions or the bus, not the event: they are retried.
POISON_PUT_EVENTS_CODES: Final = frozenset(
    {"InvalidArgument", "MalformedDetail", "RedactionFailure"}
)


def _utf16_length(text: str) -> int:
    # AWS length constraints count characters as its Java services do: UTF-16
    # code units, two for a character outside the Basic Multilingual Plane.
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


# A JSON string (skipped), or an integer of 19 digits or more: not part of a
# fraction or an exponent (no digit, point, e or sign before; no point or e after).
@functools.cache
def _string_or_long_integer() -> re.Pattern[str]:
    return re.compile(
        r'"[^"\\]*(?:\\.[^"\\]*)*"|(?<![0-9.eE+\-])(-?[0-9]{19,})(?![0-9.eE])', re.DOTALL
    )


def _int64_overflow(text: str) -> str | None:
    """An integer of the JSON text ``text`` outside the signed 64-bit range, or None.

    The text, not its parse: all of it is sent (an unknown extension, the value
    of a duplicate key a parse drops). JSON has no leading zeros, so 20 digits
    or more are always out of range.
    """
    for match in _string_or_long_integer().finditer(text):
        digits = match.group(1)
        if digits is not None and (
            len(digits.lstrip("-")) > 19 or not _INT64_MIN <= int(digits) <= _INT64_MAX
        ):
            return digits
    return None


def put_events_entry_size(
    *, source: str, detail_type: str, detail: str, resources: Sequence[str] = (), has_time: bool
) -> int:
    """AWS's "Calculating PutEvents entry size" formula (EventBusName does not count)."""
    size = PUT_EVENTS_TIME_BYTES if has_time else 0
    size += len(source.encode("utf-8"))
    size += len(detail_type.encode("utf-8"))
    size += len(detail.encode("utf-8"))
    size += sum(len(resource.encode("utf-8")) for resource in resources)
    return size


class EventBridgeRules(NamedTuple):
    """``PutEvents``: at most 10 entries and less than 256 KB per call."""

    max_request_bytes: int = PUT_EVENTS_MAX_REQUEST_BYTES
    name: str = "PutEvents"
    max_entries: int = PUT_EVENTS_MAX_ENTRIES
    max_delivery_bytes: int = QUEUE_DELIVERY_BUDGET_BYTES

    @property
    def orders_by_subject(self) -> bool:
        return False  # EventBridge delivers in no particular order

    def delivery_size(self, event: OutboundEvent) -> int:
        envelope = event.envelope
        head = _eventbridge_head(envelope.source, envelope.type)
        return head[1] + json_text_bytes(event.body)

    def entry_size(self, event: OutboundEvent) -> int:
        envelope = event.envelope
        head = _eventbridge_head(envelope.source, envelope.type)
        return head[0] + _utf8_length(event.body) + _time_bytes(event)

    def refusal(self, event: OutboundEvent) -> str | None:
        envelope = event.envelope
        return _eventbridge_head(envelope.source, envelope.type)[2] or _detail_refusal(event.body)

    def check(self, event: OutboundEvent) -> tuple[int, str | None]:
        envelope, body = event.envelope, event.body
        head_size, head_delivered, head_refusal = _eventbridge_head(envelope.source, envelope.type)
        size = head_size + _utf8_length(body) + _time_bytes(event)
        delivered = head_delivered + json_text_bytes(body)
        if (
            size <= self.max_request_bytes
            and delivered <= self.max_delivery_bytes
            and head_refusal is None
            and not _has_long_digit_run(body)
        ):
            return size, None  # the common case, without building a closure
        return size, _verdict(self, size, delivered, lambda: head_refusal or _detail_refusal(body))


def _time_bytes(event: OutboundEvent) -> int:
    return PUT_EVENTS_TIME_BYTES if event.time >= _EPOCH else 0


# The heads of a source and type are kept for at most this many pairs, and only
# for strings no longer than PutEvents takes (DetailType 128, Source 256): a
# writer may store a type of hundreds of KB, refused at the sink, and a cache
# keyed by it would keep every one alive across warm invocations (1,100 types of
# 120 KB held 123 MB of a 256 MB publisher). Longer strings are worked out each
# time: a refused event costs that once.
_HEAD_CACHE_PAIRS: Final = 1024
_HEAD_CACHE_MAX_SOURCE: Final = PUT_EVENTS_MAX_SOURCE_LENGTH
_HEAD_CACHE_MAX_TYPE: Final = PUT_EVENTS_MAX_DETAIL_TYPE_LENGTH


def _cacheable(source: str, event_type: str) -> bool:
    # len() counts code points, never more than UTF-16 units or UTF-8 bytes.
    return len(source) <= _HEAD_CACHE_MAX_SOURCE and len(event_type) <= _HEAD_CACHE_MAX_TYPE


def _eventbridge_head(source: str, detail_type: str) -> tuple[int, int, str | None]:
    """What a source and type add to an entry and to its delivery, and why PutEvents refuses them.

    The same for every event of that source and type: worked out once per pair
    (when both are short enough to be kept, see ``_HEAD_CACHE_PAIRS``).
    """
    if _cacheable(source, detail_type):
        return _cached_eventbridge_head(source, detail_type)
    return _work_out_eventbridge_head(source, detail_type)


def _work_out_eventbridge_head(source: str, detail_type: str) -> tuple[int, int, str | None]:
    return (
        put_events_entry_size(source=source, detail_type=detail_type, detail="", has_time=False),
        eventbridge_delivery_bytes(source=source, detail_type=detail_type, detail=""),
        _eventbridge_fields_refusal(source, detail_type),
    )


_cached_eventbridge_head = functools.lru_cache(maxsize=_HEAD_CACHE_PAIRS)(
    _work_out_eventbridge_head
)


def _eventbridge_fields_refusal(source: str, detail_type: str) -> str | None:
    detail_type_length = _utf16_length(detail_type)
    if detail_type_length > PUT_EVENTS_MAX_DETAIL_TYPE_LENGTH:
        return (
            f"type is {detail_type_length} characters; PutEvents takes a DetailType of at "
            f"most {PUT_EVENTS_MAX_DETAIL_TYPE_LENGTH}"
        )
    source_length = _utf16_length(source)
    if source_length > PUT_EVENTS_MAX_SOURCE_LENGTH:
        return (
            f"source is {source_length} characters; PutEvents takes a Source of at most "
            f"{PUT_EVENTS_MAX_SOURCE_LENGTH}"
        )
    if source[: len(_RESERVED_SOURCE_PREFIX)].lower() == _RESERVED_SOURCE_PREFIX:
        return f"source {source[:64]!r} starts with 'aws.', which AWS reserves"
    return None


def _detail_refusal(detail: str) -> str | None:
    if _has_long_digit_run(detail):  # only then can an integer be out of range
        overflow = _int64_overflow(detail)
        if overflow is not None:
            return (
                f"the event holds the integer {overflow[:40]}, outside the signed 64-bit "
                "range PutEvents accepts (send it as a string)"
            )
    return None


EVENTBRIDGE_RULES: Final = EventBridgeRules()


# PutEventsRequestEntry.EventBusName in botocore's model of PutEvents.
_EVENT_BUS_NAME_MAX_LENGTH = 1600


@functools.cache
def _event_bus_name_pattern() -> re.Pattern[str]:
    return re.compile(
        rf"(?=.{{1,{_EVENT_BUS_NAME_MAX_LENGTH}}}\Z)"
        r"(arn:aws[\w-]*:events:[a-z]+-[a-z]+-[\w-]+:[0-9]{12}:event-bus/)?[.\-_A-Za-z0-9]+",
        re.DOTALL,
    )


class EventBridgeSink:
    """``PutEvents`` on one bus (name or ARN); an event's trace becomes its ``TraceHeader``."""

    def __init__(
        self,
        client: EventsClient,
        event_bus_name: str,
        *,
        max_request_bytes: int = PUT_EVENTS_MAX_REQUEST_BYTES,
        max_delivery_bytes: int = QUEUE_DELIVERY_BUDGET_BYTES,
    ) -> None:
        if not _event_bus_name_pattern().fullmatch(event_bus_name):
            # Checked here because the sink's client sends without botocore's
            # validation, and AWS refusing the name would quarantine every event.
            raise ValueError(
                f"the event bus name (or ARN) {event_bus_name!r} is not one PutEvents accepts"
                " (a name of letters, digits, '.', '-' and '_', or an event bus ARN,"
                f" at most {_EVENT_BUS_NAME_MAX_LENGTH} characters)"
            )
        self._client = client
        self.event_bus_name = event_bus_name
        self.rules: SinkRules = EventBridgeRules(
            max_request_bytes=max_request_bytes, max_delivery_bytes=max_delivery_bytes
        )

    def entry(self, event: OutboundEvent) -> PutEventsRequestEntry:
        entry: PutEventsRequestEntry = {
            "Source": event.envelope.source,
            "DetailType": event.envelope.type,
            "Detail": event.body,
            "EventBusName": self.event_bus_name,
        }
        if event.time >= _EPOCH:
            entry["Time"] = event.time
        traceparent = event.envelope.traceparent
        if traceparent is not None:
            # Imported by the first event that carries a trace, not at every cold start.
            from dynamodb_outbox.trace_context import TraceContext

            trace = TraceContext.parse(traceparent)
            if trace is not None:
                # EventBridge carries it to the targets (an SQS target's AWSTraceHeader);
                # it is not part of the entry size AWS counts.
                entry["TraceHeader"] = trace.xray_header()
        return entry

    def send(self, events: Sequence[OutboundEvent]) -> list[EntryResult]:
        response = self._client.put_events(Entries=[self.entry(event) for event in events])
        entries = response.get("Entries")
        if not isinstance(entries, list) or len(entries) != len(events):
            # Without a 1:1 answer no entry can be trusted as published.
            raise SinkError(
                f"PutEvents answered {len(entries) if isinstance(entries, list) else 'no'} "
                f"entries for {len(events)} sent"
            )
        return [self._result(entry) for entry in entries]

    @staticmethod
    def _result(entry: object) -> EntryResult:
        if type(entry) is dict and "ErrorCode" not in entry:
            return _ACCEPTED  # the common answer, told without the Mapping ABC
        code = entry.get("ErrorCode") if isinstance(entry, Mapping) else "MalformedResponse"
        if not code:
            return EntryResult()
        message = entry.get("ErrorMessage") if isinstance(entry, Mapping) else None
        return EntryResult(
            error_code=str(code),
            error_message=str(message or ""),
            retryable=str(code) not in POISON_PUT_EVENTS_CODES,
        )
