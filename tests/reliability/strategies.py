"""Hypothesis strategies for inputs nobody listed: events, outbox items, stream records, bodies.

They cover the whole input space, not a hand-picked corpus: arbitrary JSON
(deep nesting, huge and tiny numbers, floats JSON has no spelling for, empty
keys), every Unicode category (lone surrogates, noncharacters, NUL), times
across the whole datetime and UTC-offset range, sizes at every sink limit and
one byte either side, attributes missing, extra or of the wrong type, REMOVE
and MODIFY records, records without a NewImage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.event_ids import event_id_at, new_event_id
from dynamodb_outbox.outbox_item import (
    ATTR_ENVELOPE,
    ATTR_PENDING_SHARD,
    ATTR_STATUS,
    OUTBOX_SK_PREFIX,
    STATUS_PENDING,
)
from dynamodb_outbox.sinks import OutboundEvent, rules_for

# ------------------------------------------------------------------------ scalars

#: Characters the code has special rules for, drawn more often than chance would.
SPECIAL_CHARACTERS = (
    "\x00",
    "\x01",
    "\x1f",
    "\x7f",
    "\ud800",  # lone surrogates: no UTF-8 spelling
    "\udfff",
    "\ufffe",  # noncharacters SQS refuses
    "\uffff",
    "\ufdd0",  # noncharacter SQS accepts
    "\u2028",
    "\U0001f4e6",  # two UTF-16 units
    "\U0010ffff",
    '"',
    "\\",
)
characters = st.one_of(
    st.characters(exclude_categories=()),  # every category, surrogates included
    st.sampled_from(SPECIAL_CHARACTERS),
)
texts = st.text(characters, max_size=12)
identifiers = st.from_regex(r"[A-Za-z][A-Za-z0-9._-]{0,20}", fullmatch=True)

INT64 = 2**63
integers = st.one_of(
    st.integers(-1000, 1000),
    st.sampled_from([INT64 - 1, INT64, -INT64, -INT64 - 1, 10**38, -(10**38)]),
    st.integers(-(10**40), 10**40),
)
floats = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)
scalars = st.one_of(st.none(), st.booleans(), integers, floats, texts)

#: Decoded JSON-ish values; NaN and the infinities are in, on purpose.
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(texts, children, max_size=4),  # "" is a key like any other
    ),
    max_leaves=12,
)

#: Nesting depths around every limit: DynamoDB 32, the envelope 100, PutEvents 1,000,
#: and far beyond what a recursive parser survives.
DEPTHS = (1, 31, 32, 33, 98, 99, 100, 101, 1_000, 50_000)


def nested(depth: int, leaf: Any = 0) -> Any:
    value: Any = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"n": value}
    return value


deep_values = st.sampled_from(DEPTHS).map(nested)

# -------------------------------------------------------------------------- times

OFFSETS = st.integers(-(24 * 60 - 1), 24 * 60 - 1).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
any_datetime = st.datetimes(
    min_value=datetime(1, 1, 1),
    max_value=datetime(9999, 12, 31, 23, 59, 59, 999999),
    timezones=st.one_of(st.none(), st.just(UTC), OFFSETS),
)
times = st.one_of(
    any_datetime.map(lambda moment: moment.isoformat()),
    st.sampled_from(
        [
            "0001-01-01T00:00:00+01:00",  # UTC year 0
            "9999-12-31T23:59:59-01:00",  # UTC year 10000
            "1969-12-31T23:59:59.999Z",
            "1970-01-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "yesterday",
            "",
        ]
    ),
    texts,
)

# ------------------------------------------------------------------------ events

SINKS = ("eventbridge", "sns", "sns_fifo")


@dataclass
class IntendedEvent:
    """What a producer asks the writer for: envelope fields, some of them wrong."""

    fields: dict[str, Any]
    #: an exact entry size for the sink, when the case is about a size limit
    size_for: str | None = None
    size: int | None = None


def _over_limit_text(limit: int, emoji: bool = False) -> st.SearchStrategy[str]:
    unit = "\U0001f4e6" if emoji else "x"
    width = 2 if emoji else 1
    return st.sampled_from([limit - width, limit, limit + width]).map(
        lambda units: unit * (units // width)
    )


event_types = st.one_of(
    identifiers,
    texts,
    _over_limit_text(128),
    _over_limit_text(128, emoji=True),
    st.sampled_from(["", "Order\x01Placed", "Order\ufffePlaced"]),
    st.integers(),
)
sources = st.one_of(
    identifiers,
    _over_limit_text(256),
    st.sampled_from(["aws.orders", "AWS.orders", "awsome.orders", "", "shop\x1forders"]),
    texts,
)
subjects = st.one_of(
    st.from_regex(r"ORDER#[0-9]{1,6}", fullmatch=True),
    _over_limit_text(128),
    texts,
    st.just(""),
)
event_ids = st.one_of(
    st.builds(new_event_id),
    st.builds(new_event_id).map(str.lower),
    st.sampled_from(["7" + "Z" * 25, "8" + "0" * 25, "01ARZ3NDEKTSV4RRFFQ69G5FAU", ""]),
    texts,
)
#: Text SQS can carry, and finite numbers: unusual data the writer must accept.
deliverable_texts = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\ufffe\uffff"), max_size=12
)
deliverable_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        deliverable_texts,
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(deliverable_texts, children, max_size=4)
    ),
    max_leaves=12,
)
deliverable_data = st.one_of(
    st.dictionaries(deliverable_texts, deliverable_values, max_size=6),
    st.sampled_from([32, 98, 99]).map(lambda depth: {"deep": nested(depth - 1)}),
)
data_values = st.one_of(
    st.dictionaries(texts, json_values, max_size=5),
    st.dictionaries(texts, deep_values, min_size=1, max_size=1),
    json_values,  # not always an object
)


def _usually(default: Any, other: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``default`` three times in four: enough events get through to test what follows."""
    return st.integers(0, 3).flatmap(lambda roll: other if roll == 0 else st.just(default))


@st.composite
def intended_events(draw: st.DrawFn) -> IntendedEvent:
    fields: dict[str, Any] = {
        "type": draw(_usually("OrderPlaced", event_types)),
        "source": draw(_usually("app.orders", sources)),
        "subject": draw(_usually("ORDER#1001", subjects)),
        "data": draw(st.one_of(st.just({"total": 1}), deliverable_data, data_values)),
    }
    if draw(st.integers(0, 2)) == 0:
        fields["time"] = draw(st.one_of(any_datetime.map(datetime.isoformat), times))
    if draw(st.integers(0, 4)) == 0:
        fields["id"] = draw(event_ids)
    if draw(st.integers(0, 4)) == 0:
        fields["dataschema"] = draw(st.one_of(texts, st.none(), integers))
    for name in ("correlation_id", "traceparent", "tracestate"):
        if draw(st.integers(0, 5)) == 0:
            fields[name] = draw(st.one_of(texts, st.none(), integers))
    if draw(st.integers(0, 19)) == 0:  # exactly at a sink's size limit, or one byte off
        sink = draw(st.sampled_from(SINKS))
        limit = rules_for(sink).max_delivery_bytes  # the binding one (dynamodb_outbox.sizes)
        return IntendedEvent(fields, sink, limit + draw(st.sampled_from([-1, 0, 1])))
    return IntendedEvent(fields)


def envelope_of_size(fields: dict[str, Any], sink: str, size: int) -> Envelope:
    """An envelope of ``fields`` whose worst-case queue message on ``sink`` is ``size`` bytes.

    Raises what :class:`Envelope` raises when the fields themselves are invalid.
    """
    rules = rules_for(sink)
    base = Envelope(**{**fields, "data": {"blob": ""}})
    missing = size - rules.delivery_size(OutboundEvent.of(base))
    if missing < 0:
        return base  # the other fields alone are over: the writer must refuse it
    pinned = {**fields, "id": base.id, "time": base.time, "data": {"blob": "x" * missing}}
    return Envelope(**pinned)


# -------------------------------------------------------------- outbox items, records


def _attribute_values(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A low-level attribute value of any type, or not one at all."""
    return st.one_of(
        value.map(lambda text: {"S": text}),
        st.sampled_from(
            [{"N": "42"}, {"NULL": True}, {"BOOL": False}, {"B": "AAEC"}, {"M": {}}, {"L": []}]
        ),
        st.sampled_from([{"ZZ": "new type"}, {"S": 1}, "plain", None, {}]),
    )


def _envelope_texts(event_id: str) -> st.SearchStrategy[str]:
    """Stored envelope JSON: valid, almost valid, or anything at all."""

    def render(data: Any) -> str:
        return json.dumps(data, ensure_ascii=False, allow_nan=True)

    valid = Envelope(type="OrderPlaced", source="app.orders", subject="ORDER#1", data={})
    good = {**valid.to_dict(), "id": event_id}
    return st.one_of(
        st.just(json.dumps(good)),
        st.dictionaries(
            st.sampled_from(sorted(good)), st.one_of(json_values, times, event_ids), max_size=4
        ).map(lambda changes: render({**good, **changes})),
        st.sampled_from(sorted(good)).map(
            lambda name: render({k: v for k, v in good.items() if k != name})
        ),
        st.sampled_from(DEPTHS).map(
            lambda depth: json.dumps(good)[:-1] + ',"deep":' + "[" * depth + "]" * depth + "}"
        ),
        json_values.map(render),
        texts,
        st.just(json.dumps(good).replace('"data": {}', '"data": {"x": NaN}')),
        st.just(json.dumps(good).replace('"data": {}', '"data": {"x": "\\ufffe"}')),
    )


@dataclass
class JunkItem:
    """An outbox item as something other than the writer might have stored it."""

    pk: str
    event_id: str
    item: dict[str, Any]
    storable: bool = field(default=True)


@st.composite
def junk_items(draw: st.DrawFn, pk: str, milliseconds: int) -> JunkItem:
    event_id = event_id_at(milliseconds, draw(st.binary(min_size=10, max_size=10)))
    item: dict[str, Any] = {
        "PK": {"S": pk},
        "SK": {"S": OUTBOX_SK_PREFIX + event_id},
        ATTR_STATUS: {"S": STATUS_PENDING},
        ATTR_PENDING_SHARD: {"S": "00"},
    }
    envelope = draw(
        st.one_of(_envelope_texts(event_id).map(lambda t: {"S": t}), _attribute_values(texts))
    )
    if envelope is not None and draw(st.integers(0, 9)):
        item[ATTR_ENVELOPE] = envelope
    for _ in range(draw(st.integers(0, 2))):  # extra attributes of any type
        item[draw(identifiers)] = draw(_attribute_values(texts))
    storable = all(
        isinstance(value, dict) and len(value) == 1 and _storable(value) for value in item.values()
    )
    return JunkItem(pk, event_id, item, storable)


def _storable(value: dict[str, Any]) -> bool:
    ((kind, data),) = value.items()
    if kind == "S":
        return isinstance(data, str) and _utf8(data)
    return kind in {"N", "NULL", "BOOL", "B", "M", "L"} and not (kind == "N" and not data)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


EVENT_NAMES = ("INSERT", "INSERT", "INSERT", "MODIFY", "REMOVE", "UPSERT", None)


@dataclass
class RecordShape:
    """How a junk item's stream record is delivered."""

    event_name: str | None
    view_type: str
    drop: tuple[str, ...]


record_shapes = st.builds(
    RecordShape,
    event_name=st.sampled_from(EVENT_NAMES),
    view_type=st.sampled_from(["NEW_IMAGE", "NEW_IMAGE", "NEW_AND_OLD_IMAGES", "KEYS_ONLY"]),
    drop=st.lists(st.sampled_from(["Keys", "NewImage", "eventName", "PK"]), max_size=1).map(tuple),
)

# ------------------------------------------------------------------------ SQS bodies

sqs_junk_bodies = st.one_of(
    json_values.map(lambda value: json.dumps(value, allow_nan=True)),
    st.sampled_from(DEPTHS).map(lambda depth: "[" * depth + "]" * depth),
    st.sampled_from(DEPTHS).map(
        lambda depth: '{"detail-type":"T","detail":' + "[" * depth + "]" * depth + "}"
    ),
    st.sampled_from(DEPTHS).map(
        lambda depth: '{"Type":"Notification","Message":"' + "[" * depth + "]" * depth + '"}'
    ),
    texts,
    st.just(""),
    st.just('{"Type":"Notification","Message":{"not":"a string"}}'),
)


# ------------------------------------------------------------------ what a consumer function raises


class _StrRaises(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ raised")


class _ReprRaises(Exception):
    def __repr__(self) -> str:
        raise RuntimeError("__repr__ raised")


class _NothingDescribes(Exception):
    def __str__(self) -> str:
        raise SystemExit("__str__ exits")

    def __repr__(self) -> str:
        raise ValueError("__repr__ raised")


def _cancelled(text: str) -> BaseException:
    import asyncio

    return asyncio.CancelledError(text)


#: Exception messages: huge, not encodable as UTF-8 (lone surrogates), or any text.
exception_texts = st.one_of(
    st.just("x" * 1_000_000),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1),
    texts,
)

#: What a consumer function raises that must fail its record only, by name.
RECORD_FAILURES: dict[str, Any] = {
    "__str__ raises": lambda text: _StrRaises(text),
    "__repr__ raises": lambda text: _ReprRaises(text),
    "__str__ and __repr__ raise": lambda text: _NothingDescribes(text),
    "ValueError with the text": ValueError,
    "CancelledError": _cancelled,
    "SystemExit": SystemExit,
    "GeneratorExit": GeneratorExit,
    "MemoryError": MemoryError,
}

#: What ends the batch instead (:data:`dynamodb_outbox.consumer._errors.PROCESS_ENDING`).
BATCH_ENDING: dict[str, Any] = {"KeyboardInterrupt": KeyboardInterrupt}
