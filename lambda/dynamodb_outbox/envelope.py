"""The event envelope: one CloudEvents 1.0 event, what it says and how it is checked.

One envelope is one event, a CloudEvents 1.0 event in the JSON event format:

=====================  ===========================================================
attribute              what
=====================  ===========================================================
``specversion``        ``"1.0"``
``id``                 a ULID (see below)
``source``             the producer (EventBridge ``Source``)
``type``               what happened (EventBridge ``DetailType``)
``subject``            what it happened to: the aggregate, by default the entity's PK
``time``               RFC 3339, with a UTC offset
``datacontenttype``    ``"application/json"``
``dataschema``         optional URI of the data's schema
``data``               the event's body, a JSON object
``correlationid``      optional extension: the producer's correlation id
``traceparent``,       optional extensions of CloudEvents' distributed tracing
``tracestate``         extension: the producer's W3C trace context
``sequence``           optional extension (CloudEvents' sequence extension): the
                       event's place among its subject's events, a positive
                       integer written as 19 zero-padded digits so that text
                       order is number order; the producer takes it from the
                       aggregate's version, in the same transaction
=====================  ===========================================================

Extension names are lowercase letters and digits, as CloudEvents requires; the
Python fields keep readable names (``correlation_id``). Its ``id`` is a ULID:
the outbox item's sort key is ``OUTBOX#<id>``, the published event carries it,
and consumers use it as their idempotency key, so the same id follows the event
end to end.

The outbox item (:mod:`dynamodb_outbox.outbox_item`) stores the envelope as
one JSON string: the bytes the publisher sends are exactly the bytes the writer
committed, data numbers keep their JSON types, and the publisher can size an
event without re-encoding it.

An envelope is refused (:class:`InvalidEnvelope`) when no path could deliver
it, whichever sink the outbox publishes to:

* its ``time`` must be RFC 3339 (CloudEvents' rule: a UTC offset or ``Z``) and
  convertible to UTC: the SDK converts it to build the request, and a conversion
  that overflows (``0001-01-01T00:00:00+01:00``) would fail the call of every
  event sent with it;
* its JSON may nest at most :data:`MAX_NESTING_DEPTH` levels: EventBridge
  processes at most 1,000, and a consumer in Python parses with one
  interpreter frame per level, under a default limit of 1,000 frames;
* its data must have a JSON form by the rule of
  :mod:`dynamodb_outbox.payload_json` (``Decimal`` exact, aware ``datetime``
  and ``date`` as ISO 8601, ``UUID`` as a string; no NaN, infinities, bytes,
  sets or naive datetimes);
* its text may not hold U+FFFE, U+FFFF or surrogate code points: SQS refuses
  them in message bodies, so a consumer queue and its DLQ would both refuse the
  event and the bus would drop it. Escaping them in the JSON would not help,
  since the bus re-serialises the event before delivery.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, cast

from dynamodb_outbox._clock import iso_milliseconds, utc_now
from dynamodb_outbox.event_ids import (
    event_id_milliseconds,
    is_canonical_event_id,
    new_event_id,
)
from dynamodb_outbox.payload_json import PayloadNotEncodable, dumps, to_json_value

__all__ = [
    "DATA_CONTENT_TYPE",
    "MAX_NESTING_DEPTH",
    "MAX_SEQUENCE",
    "SPEC_VERSION",
    "Envelope",
    "InvalidEnvelope",
]

#: CloudEvents' ``specversion``: the version of the envelope format.
SPEC_VERSION: Final = "1.0"
#: CloudEvents' ``datacontenttype``: ``data`` is always a JSON object.
DATA_CONTENT_TYPE: Final = "application/json"


#: Nesting levels of the envelope's JSON, the envelope object itself being level 1.
MAX_NESTING_DEPTH: Final = 100

#: The largest ``sequence``: a signed 64-bit integer, 19 digits.
MAX_SEQUENCE: Final = 2**63 - 1
_SEQUENCE_DIGITS: Final = len(str(MAX_SEQUENCE))

_REQUIRED_FIELDS = ("specversion", "id", "type", "source", "time", "subject", "data")
_REQUIRED_SET: Final = frozenset(_REQUIRED_FIELDS)
# The optional attributes: the Python field of each, by its CloudEvents name.
_OPTIONAL_ATTRIBUTES: Final = (
    ("dataschema", "dataschema"),
    ("correlationid", "correlation_id"),
    ("traceparent", "traceparent"),
    ("tracestate", "tracestate"),
)
# RFC 3339's date-time (CloudEvents' Timestamp): the offset is not optional.
_RFC_3339: Final = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


# The patterns of the checks that run only on unusual events are compiled the
# first time one is needed, not at import: a cold start pays 0.1-0.5 ms for each.


# Characters outside XML 1.0's set, which is what SQS accepts in a message body
# (#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF). Controls
# below #x20 never reach SQS raw: every JSON encoder escapes them.
@functools.cache
def _undeliverable_character() -> re.Pattern[str]:
    return re.compile("[\ud800-\udfff\ufffe\uffff]")


class InvalidEnvelope(ValueError):
    """The data is not a valid event envelope; the message says which field and why."""


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def _utc_now_iso() -> str:
    return iso_milliseconds(utc_now())


@dataclass(frozen=True)
class Envelope:
    """An event: what happened (``type``), to what (``subject``), by whom (``source``).

    ``data`` is the event's body; every other field is a CloudEvents context
    attribute (:attr:`attributes`).
    """

    type: str
    source: str
    subject: str
    data: Mapping[str, Any]
    id: str = field(default_factory=new_event_id)
    time: str = field(default_factory=_utc_now_iso)
    dataschema: str | None = None
    correlation_id: str | None = None
    traceparent: str | None = None
    tracestate: str | None = None
    sequence: int | None = None
    _json: str = field(init=False, repr=False, compare=False, default="")
    _utc_time: datetime = field(init=False, repr=False, compare=False, default=_EPOCH)

    def __post_init__(self) -> None:
        _validate_fields(self)
        # Snapshot the data: a caller mutating its dict afterwards must not
        # change an event already built (a retry with the same request token
        # would then no longer match), and the data must be encodable as
        # strict JSON, or the bus would reject it forever. Decimals, datetimes
        # and UUIDs are converted by the rule of dynamodb_outbox.payload_json.
        object.__setattr__(self, "data", _json_snapshot(self.data))
        _check_depth(self.data)
        object.__setattr__(self, "_utc_time", _utc_time_of(self.time))
        text = _dumps(self.to_dict())
        undeliverable = _undeliverable_character().search(text)
        if undeliverable is not None:
            raise _undeliverable(undeliverable.group())
        object.__setattr__(self, "_json", text)

    @property
    def attributes(self) -> dict[str, str]:
        """The CloudEvents context attributes (every member but ``data``), by their names."""
        attributes = {
            "specversion": SPEC_VERSION,
            "id": self.id,
            "source": self.source,
            "type": self.type,
            "subject": self.subject,
            "time": self.time,
            "datacontenttype": DATA_CONTENT_TYPE,
        }
        for name, python_name in _OPTIONAL_ATTRIBUTES:
            value = getattr(self, python_name)
            if value is not None:
                attributes[name] = value
        if self.sequence is not None:
            attributes["sequence"] = f"{self.sequence:0{_SEQUENCE_DIGITS}d}"
        return attributes

    def to_dict(self) -> dict[str, Any]:
        """The CloudEvents JSON event format: the attributes, then ``data``."""
        data = dict(self.data) if isinstance(self.data, Mapping) else self.data
        return {**self.attributes, "data": data}

    def to_json(self) -> str:
        """Compact JSON; this string is the published event's ``Detail``."""
        return self._json

    @property
    def utc_time(self) -> datetime:
        """``time`` as an aware UTC datetime."""
        return self._utc_time

    @classmethod
    def from_dict(cls, data: Any) -> Envelope:
        """The envelope of a CloudEvents 1.0 JSON event (unknown extensions are ignored)."""
        return cls(**_fields_of(data))

    @classmethod
    def from_json(cls, text: str | bytes, *, parse_float: Callable[[str], Any] = float) -> Envelope:
        """The envelope of ``text``; ``parse_float=Decimal`` keeps data numbers exact."""
        try:
            data = json.loads(text, parse_float=parse_float)
        except RecursionError:
            raise InvalidEnvelope(
                f"envelope JSON nests deeper than {MAX_NESTING_DEPTH} levels"
            ) from None
        except (ValueError, TypeError) as exc:
            raise InvalidEnvelope(f"envelope is not valid JSON: {exc}") from exc
        return cls.from_dict(data)

    @classmethod
    def from_stored_json(cls, text: str) -> Envelope:
        """The envelope an outbox item stores, whose JSON (:meth:`to_json`) is ``text`` itself.

        The publisher and the sweeper send the stored text as it is, so it is
        parsed once and never re-encoded. Every check the constructor makes is
        made once, on the parsed values or on ``text`` (which is what consumers
        receive): the fields, the ULID, the time, the nesting depth (skipped
        when ``text`` has too few brackets to reach it), JSON's own values only
        (no NaN or infinities) and no character SQS refuses anywhere in
        ``text``. Raises :class:`InvalidEnvelope` where the constructor would.
        """
        data = _decode_stored(text)
        envelope = cls.__new__(cls)
        # A frozen dataclass keeps its fields in __dict__: set them without
        # __post_init__, whose snapshot and re-encoding the stored text makes moot.
        fields = _plain_stored_fields(data)
        if fields is None:  # something is wrong, or unusual: the constructor's checks say
            fields = _fields_of(data)
            vars(envelope).update(fields, _json=text)
            # Before the fields' checks, as ever: an envelope with both faults
            # is quarantined for its extension name on either path.
            if not data.keys() <= _KNOWN_NAMES:
                _check_extension_names(data)
            _validate_fields(envelope)
        else:
            vars(envelope).update(fields, _json=text)
            if not data.keys() <= _KNOWN_NAMES:
                _check_extension_names(data)  # sent too: consumers read the body's members
        # The text's own nesting, not the data's: all of it is sent (an unknown
        # extension, the value of a duplicate key the parse dropped).
        if text.count("{") + text.count("[") > MAX_NESTING_DEPTH:
            _check_text_depth(text)  # only then can it nest too deep
        vars(envelope)["_utc_time"] = _utc_time_of(fields["time"])
        _check_deliverable(text)
        return envelope


def _fields_of(data: Any) -> dict[str, Any]:
    """The constructor's arguments for a CloudEvents 1.0 JSON event (extensions it knows)."""
    if type(data) is not dict and not isinstance(data, Mapping):  # a dict, told first
        raise InvalidEnvelope(f"envelope must be a JSON object, got {type(data).__name__}")
    if not data.keys() >= _REQUIRED_SET:
        missing = [name for name in _REQUIRED_FIELDS if name not in data]
        raise InvalidEnvelope(f"envelope is missing field(s): {', '.join(missing)}")
    if data["specversion"] != SPEC_VERSION:
        raise InvalidEnvelope(
            f"envelope field 'specversion' must be {SPEC_VERSION!r} (CloudEvents 1.0), "
            f"got {str(data['specversion'])[:32]!r}"
        )
    content_type = data.get("datacontenttype", DATA_CONTENT_TYPE)
    if content_type != DATA_CONTENT_TYPE:
        raise InvalidEnvelope(
            f"envelope field 'datacontenttype' must be {DATA_CONTENT_TYPE!r}, "
            f"got {str(content_type)[:64]!r}"
        )
    # Spelt out (the names of _OPTIONAL_ATTRIBUTES): the publisher reads every event.
    return {
        "type": data["type"],
        "source": data["source"],
        "subject": data["subject"],
        "data": data["data"],
        "id": data["id"],
        "time": data["time"],
        "dataschema": data.get("dataschema"),
        "correlation_id": data.get("correlationid"),
        "traceparent": data.get("traceparent"),
        "tracestate": data.get("tracestate"),
        "sequence": _sequence_of(data.get("sequence")),
    }


_KNOWN_NAMES: Final = frozenset(
    (*_REQUIRED_FIELDS, "datacontenttype", "sequence", *(n for n, _ in _OPTIONAL_ATTRIBUTES))
)


# CloudEvents: "attribute names MUST consist of lower-case letters ('a' to 'z') or
# digits ('0' to '9') from the ASCII character set".
@functools.cache
def _attribute_name() -> re.Pattern[str]:
    return re.compile(r"[a-z0-9]+", re.ASCII)


def _check_extension_names(data: Mapping[str, Any]) -> None:
    """Every member of the stored event is a CloudEvents attribute name.

    The stored text is sent as it is; over SNS with raw delivery it is the
    consumer's message body, whose shape the consumer tells by its members
    (``replay-name``, ``Type``/``Message``, ``detail-type``/``detail``): a member
    by such a name would make it refuse the event, or read another one inside.
    """
    # In the text's order, not a set's (whose order changes with each process's
    # string hashing): the reason names the first bad member, every time.
    for name in data:
        if name not in _KNOWN_NAMES and not _attribute_name().fullmatch(name):
            raise InvalidEnvelope(
                f"envelope member {name[:40]!r} is not a CloudEvents attribute name "
                "(lower-case ASCII letters and digits): consumers could misread the event"
            )


def _refuse_constant(name: str) -> Any:
    raise InvalidEnvelope(f"envelope holds {name}, which strict JSON cannot represent")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidEnvelope(f"envelope holds the number {text[:40]}, too large for a double")
    return value


# Made once: json.loads with arguments builds a decoder at every call.
_STORED_DECODER: Final = json.JSONDecoder(
    parse_constant=_refuse_constant, parse_float=_finite_float
)

# The decoder's C scanner, called as is: the whole text is one value (the writer's
# compact JSON); anything else (blanks around it, extra data, no JSON at all)
# goes through the full decode, which says what is wrong.
# (JSONDecoder.__init__ sets scan_once, json/decoder.py; typeshed leaves it out.)
_SCAN_STORED: Final[Callable[[str, int], tuple[Any, int]]] = cast(Any, _STORED_DECODER).scan_once


def _decode_stored(text: str) -> Any:
    """The value of the JSON text ``text``, or :class:`InvalidEnvelope` saying why not."""
    try:
        try:
            data, end = _SCAN_STORED(text, 0)
        except StopIteration:
            end = -1
        if end != len(text):
            data = _STORED_DECODER.decode(text)
    except InvalidEnvelope:
        raise
    except RecursionError:
        raise InvalidEnvelope(
            f"envelope JSON nests deeper than {MAX_NESTING_DEPTH} levels"
        ) from None
    except (ValueError, TypeError) as exc:
        raise InvalidEnvelope(f"envelope is not valid JSON: {exc}") from exc
    return data


def _plain_stored_fields(data: object) -> dict[str, Any] | None:
    """The constructor's arguments of ``data``, when every check of its fields passes.

    One pass over the parsed event, for the publisher's every event; None as
    soon as anything is missing, wrong or unusual (a sequence), and then
    :func:`_fields_of` and :func:`_validate_fields` say what.
    """
    if type(data) is not dict:
        return None
    get = data.get
    event_id, event_type, source, time, subject = (
        get("id"),
        get("type"),
        get("source"),
        get("time"),
        get("subject"),
    )
    if not (
        type(event_id) is str
        and type(event_type) is str
        and type(source) is str
        and type(time) is str
        and type(subject) is str
        and event_id
        and event_type
        and source
        and time
        and subject
        and get("specversion") == SPEC_VERSION
        and get("datacontenttype", DATA_CONTENT_TYPE) == DATA_CONTENT_TYPE
        and type(get("data")) is dict
        and get("sequence") is None
        and is_canonical_event_id(event_id)
    ):
        return None
    fields = {
        "type": event_type,
        "source": source,
        "subject": subject,
        "data": data["data"],
        "id": event_id,
        "time": time,
        "dataschema": get("dataschema"),
        "correlation_id": get("correlationid"),
        "traceparent": get("traceparent"),
        "tracestate": get("tracestate"),
        "sequence": None,
    }
    for name in ("dataschema", "correlation_id", "traceparent", "tracestate"):
        value = fields[name]
        if value is not None and (type(value) is not str or not value):
            return None
    return fields


# An undeliverable character, or an escape that could stand for one; a surrogate
# pair is fine once decoded, hence the exact check after an escape is found.
@functools.cache
def _undeliverable_raw_or_escaped() -> re.Pattern[str]:
    return re.compile("[\ud800-\udfff\ufffe\uffff]" r"|\\u(?:[dD][89a-fA-F]|[fF]{3}[eEfF])")


def _check_deliverable(text: str) -> None:
    """No character SQS refuses in ``text``, raw or escaped in any of its strings.

    Each string is decoded on its own (only where an escape could stand for one
    such character): a duplicate key's value, which the parse drops, is sent too.
    """
    if text.isascii() and "\\u" not in text:
        return  # the common case, told without a regex
    if _undeliverable_raw_or_escaped().search(text) is None:
        return
    found = _undeliverable_character().search(text)
    if found is None:
        for token in _json_string().finditer(text):
            if _undeliverable_raw_or_escaped().search(token.group()) is not None:
                found = _undeliverable_character().search(json.loads(token.group()))
                if found is not None:
                    break
    if found is not None:
        raise _undeliverable(found.group())


# A JSON string token, and one of its brackets (``text`` is valid JSON: every
# quote outside a string opens one).
@functools.cache
def _json_string() -> re.Pattern[str]:
    return re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


@functools.cache
def _bracket() -> re.Pattern[str]:
    return re.compile(r"[\[\]{}]")


def _check_text_depth(text: str) -> None:
    """The JSON text ``text`` (valid) nests at most :data:`MAX_NESTING_DEPTH` levels."""
    depth = 0
    for bracket in _bracket().findall(_json_string().sub("", text)):
        if bracket in "[{":
            depth += 1
            if depth > MAX_NESTING_DEPTH:
                raise InvalidEnvelope(
                    f"envelope JSON nests deeper than {MAX_NESTING_DEPTH} levels "
                    "(EventBridge processes at most 1,000; consumers parse one level per frame)"
                )
        else:
            depth -= 1


def _undeliverable(character: str) -> InvalidEnvelope:
    return InvalidEnvelope(
        f"envelope holds the character U+{ord(character):04X}, which SQS refuses in message "
        "bodies (U+FFFE, U+FFFF and surrogates): no consumer queue could receive the event"
    )


def _dumps(data: Mapping[str, Any]) -> str:
    try:
        return dumps(data)
    except (TypeError, ValueError) as exc:  # e.g. an integer of 5,000 digits
        raise InvalidEnvelope(f"envelope is not encodable as JSON: {exc}") from exc


def _json_snapshot(data: Mapping[str, Any]) -> dict[str, Any]:
    try:
        snapshot: dict[str, Any] = to_json_value(data, path="data")
    except RecursionError:
        raise InvalidEnvelope(
            f"envelope field 'data' nests deeper than {MAX_NESTING_DEPTH - 1} levels"
        ) from None
    except PayloadNotEncodable as exc:
        raise InvalidEnvelope(f"envelope field 'data' is not encodable as JSON: {exc}") from exc
    return snapshot


def _check_depth(data: Mapping[str, Any]) -> None:
    """The data is level 2 of the envelope's JSON; walked without recursion."""
    stack: list[tuple[Any, int]] = [(data, 2)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING_DEPTH:
            raise InvalidEnvelope(
                f"envelope field 'data' nests deeper than {MAX_NESTING_DEPTH - 1} levels "
                f"(EventBridge processes at most 1,000; consumers parse one level per frame)"
            )
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))


def _utc_time_of(text: str) -> datetime:
    refusal = (
        "envelope field 'time' must be an RFC 3339 timestamp with its UTC offset "
        f"(CloudEvents), got {text[:64]!r}"
    )
    if not _RFC_3339.fullmatch(text):
        raise InvalidEnvelope(refusal)
    try:
        parsed = datetime.fromisoformat(text.upper())
    except ValueError as exc:
        raise InvalidEnvelope(refusal) from exc
    if parsed.tzinfo is UTC:  # "Z" and "+00:00" parse to the UTC singleton
        return parsed
    try:
        return parsed.astimezone(UTC)
    except OverflowError as exc:
        raise InvalidEnvelope(
            f"envelope field 'time' {text[:64]!r} is outside the years 1 to 9999 once converted "
            "to UTC"
        ) from exc


def _sequence_of(text: object) -> int | None:
    if text is None:
        return None
    if (
        not isinstance(text, str)
        or not text.isascii()
        or not text.isdigit()
        or len(text) > _SEQUENCE_DIGITS
    ):
        raise InvalidEnvelope(
            f"envelope field 'sequence' must be a string of at most {_SEQUENCE_DIGITS} decimal "
            f"digits, got {str(text)[:32]!r}"
        )
    return int(text)


def _validate_fields(envelope: Envelope) -> None:
    for name in ("id", "type", "source", "time", "subject"):
        value = getattr(envelope, name)
        if not isinstance(value, str) or not value:
            raise InvalidEnvelope(f"envelope field {name!r} must be a non-empty string")
    if not is_canonical_event_id(envelope.id):
        try:  # the parse says why
            event_id_milliseconds(envelope.id)
            why = "not in canonical form"
        except ValueError as exc:
            why = str(exc)
        raise InvalidEnvelope(f"envelope id {envelope.id[:64]!r} is not a ULID: {why}")
    if not isinstance(envelope.data, Mapping):
        raise InvalidEnvelope("envelope field 'data' must be a JSON object")
    for name, python_name in _OPTIONAL_ATTRIBUTES:
        value = getattr(envelope, python_name)
        if value is not None and (not isinstance(value, str) or not value):
            raise InvalidEnvelope(
                f"envelope field {name!r} must be a non-empty string when present"
            )
    sequence = envelope.sequence
    if sequence is not None and (
        isinstance(sequence, bool)
        or not isinstance(sequence, int)
        or not 1 <= sequence <= MAX_SEQUENCE
    ):
        raise InvalidEnvelope(
            f"envelope field 'sequence' must be an integer from 1 to {MAX_SEQUENCE}, "
            f"got {sequence!r}"[:200]
        )
