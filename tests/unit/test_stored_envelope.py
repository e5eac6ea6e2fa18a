"""The publisher's read of a stored envelope: every check once, the stored text sent as it is.

``Envelope.from_stored_json`` must refuse exactly what the constructor refuses
(``Envelope.from_json``), plus anything in the text that consumers would get but
the constructor never looks at (an unknown extension holding NaN or U+FFFE);
and what it accepts carries the stored text, byte for byte, as its JSON.
"""

from __future__ import annotations

import json
import random
import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamodb_outbox.envelope import MAX_NESTING_DEPTH, Envelope, InvalidEnvelope
from dynamodb_outbox.event_ids import event_id_milliseconds, is_canonical_event_id
from dynamodb_outbox.publishing._settle import _identity
from dynamodb_outbox.sinks._eventbridge import _utf16_length
from dynamodb_outbox.sizes import json_string_bytes

EVENT_ID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"


def stored(**overrides: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "specversion": "1.0",
        "id": EVENT_ID,
        "source": "app.orders",
        "type": "OrderPlaced",
        "subject": "ORDER#1",
        "time": "2026-01-02T03:04:05.678Z",
        "datacontenttype": "application/json",
        "data": {"order_id": "1", "total": 42.5, "lines": [1, 2]},
    }
    event.update(overrides)
    return {k: v for k, v in event.items() if v is not None}


def nested(levels: int) -> Any:
    value: Any = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


# Texts both readers take, and texts both refuse: the constructor is the reference.
AGREEING_TEXTS = [
    json.dumps(stored()),
    json.dumps(stored(), separators=(",", ":")),
    json.dumps(stored(), indent=2),  # whitespace is kept, not normalised
    json.dumps(stored(data={"name": "café \U0001f600"}), ensure_ascii=False),
    json.dumps(stored(data={"name": "café \U0001f600"})),  # escaped, surrogate pair included
    json.dumps(
        stored(
            sequence="0000000000000000042", traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01"
        )
    ),
    json.dumps(stored(data=nested(MAX_NESTING_DEPTH - 1))),  # the deepest data allowed
    json.dumps(stored(data=nested(MAX_NESTING_DEPTH))),
    json.dumps(stored(data={"deep": [[[[1]]]] * 40})),  # many brackets, little depth
    json.dumps(stored(data={"n": float("nan")})),
    json.dumps(stored(data={"n": float("inf")})),
    json.dumps(stored(data={"n": -float("inf")})),
    json.dumps(stored()).replace("42.5", "1e400"),
    json.dumps(stored(data={"text": "\ufffe"}), ensure_ascii=False),
    json.dumps(stored(data={"text": "\ufffe"})),  # the same, escaped
    json.dumps(stored(data={"text": "\uffff"})),
    json.dumps(stored(data={"text": "\ud800"})),  # a lone surrogate, escaped
    json.dumps(stored(data={"text": "\\ud800"})),  # a backslash then "ud800": fine
    json.dumps(stored(id=EVENT_ID.lower())),
    json.dumps(stored(id="81ARZ3NDEKTSV4RRFFQ69G5FAV")),  # past 128 bits
    json.dumps(stored(id="01ARZ3NDEKTSV4RRFFQ69G5FA")),
    json.dumps(stored(id="01ARZ3NDEKTSV4RRFFQ69G5FAI")),
    json.dumps(stored(id=12)),
    json.dumps(stored(time="2026-01-02T03:04:05")),  # no offset
    json.dumps(stored(time="0001-01-01T00:00:00+01:00")),
    json.dumps(stored(specversion="0.3")),
    json.dumps(stored(datacontenttype="text/plain")),
    json.dumps(stored(data=[1])),
    json.dumps(stored(subject="")),
    json.dumps(stored(sequence="12a")),
    json.dumps(stored(dataschema="")),
    json.dumps(stored()).replace('"subject": "ORDER#1", ', ""),
    "[1, 2]",
    "not json",
    "{" * 2000 + "}" * 2000,
]


def _outcome(read: Any, text: str) -> Any:
    try:
        return read(text)
    except InvalidEnvelope:
        return "refused"


@pytest.mark.parametrize("text", AGREEING_TEXTS)
def test_stored_read_accepts_and_refuses_exactly_what_the_constructor_does(text: str) -> None:
    reference = _outcome(Envelope.from_json, text)
    fast = _outcome(Envelope.from_stored_json, text)

    assert fast == reference  # fields compared; the JSON is not part of equality
    if reference != "refused":
        assert fast.to_json() == text  # the stored text, not a re-encoding
        assert fast.utc_time == reference.utc_time


@pytest.mark.parametrize(
    "extension",
    [
        '"x": NaN',
        '"x": [Infinity]',
        '"x": "\ufffe"',
        '"x": "\\ufffe"',
        '"x": "\\udfff"',
    ],
)
def test_stored_read_refuses_what_an_unknown_extension_would_carry_to_consumers(
    extension: str,
) -> None:
    # The constructor ignores unknown extensions, but the stored text is what is
    # sent: NaN breaks the consumers' JSON, U+FFFE makes SQS refuse the message.
    text = json.dumps(stored())[:-1] + ", " + extension + "}"
    Envelope.from_json(text)  # the constructor never sees it

    with pytest.raises(InvalidEnvelope):
        Envelope.from_stored_json(text)


def test_stored_read_names_the_nesting_limit() -> None:
    text = json.dumps(stored(data=nested(MAX_NESTING_DEPTH)))
    with pytest.raises(InvalidEnvelope, match="nests deeper"):
        Envelope.from_stored_json(text)


@given(st.text(alphabet=string.ascii_letters + string.digits, min_size=24, max_size=28))
def test_canonical_event_id_check_agrees_with_python_ulid(text: str) -> None:
    try:
        event_id_milliseconds(text)
        parses = True
    except ValueError:
        parses = False
    assert is_canonical_event_id(text) is parses


def test_canonical_event_id_check_takes_generated_ids_and_the_largest() -> None:
    rng = random.Random(7)
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    for _ in range(500):
        text = rng.choice("01234567") + "".join(rng.choice(alphabet) for _ in range(25))
        assert is_canonical_event_id(text)
        event_id_milliseconds(text)
    assert is_canonical_event_id("7" + "Z" * 25)
    assert not is_canonical_event_id("8" + "0" * 25)
    assert not is_canonical_event_id(None)


@pytest.mark.parametrize(
    "text", ["", "abc", "a b~", '"', "\\", "\x7f", "\x1f", "\t", "é", "\U0001f600"]
)
def test_json_string_bytes_matches_the_encoder(text: str) -> None:
    assert json_string_bytes(text) == len(json.dumps(text, ensure_ascii=True))


def test_json_string_bytes_matches_the_encoder_for_every_ascii_character() -> None:
    for code in range(128):
        text = f"a{chr(code)}b"
        assert json_string_bytes(text) == len(json.dumps(text, ensure_ascii=True)), code


@pytest.mark.parametrize("text", ["", "OrderPlaced", "é" * 3, "\U0001f600x", "a\ud800b"])
def test_utf16_length_counts_code_units_as_aws_does(text: str) -> None:
    assert _utf16_length(text) == len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def test_delete_identity_is_the_same_for_equal_keys_in_any_order() -> None:
    one = {"PK": {"S": "ORDER#1"}, "SK": {"S": "OUTBOX#1"}}
    same = {"SK": {"S": "OUTBOX#1"}, "PK": {"S": "ORDER#1"}}
    other = {"PK": {"S": "ORDER#2"}, "SK": {"S": "OUTBOX#1"}}
    number = {"PK": {"N": "1"}, "SK": {"S": "OUTBOX#1"}}

    assert _identity(one) == _identity(same)
    assert len({_identity(k) for k in (one, same, other, number)}) == 3
    assert _identity({"PK": {"L": [1]}, "SK": {"S": "x"}}) is not None  # unhashable: still keyed


@pytest.mark.parametrize(
    "fault",
    [{"source": 626}, {"id": "not-a-ulid"}, {"time": "yesterday"}, {"subject": ""}],
)
def test_an_extension_name_is_told_before_the_fields_as_before_the_hot_path(
    fault: dict[str, Any],
) -> None:
    # GIVEN a stored envelope with a field at fault and a member that is no
    # CloudEvents attribute name
    text = json.dumps({**stored(), **fault, "Upper": "x"})

    # THEN the quarantine reason is the member's, as it was before issue 28's
    # one-pass read (CHANGELOG: the same checks, the same reasons)
    with pytest.raises(InvalidEnvelope, match="'Upper' is not a CloudEvents attribute name"):
        Envelope.from_stored_json(text)


def test_the_reason_names_the_first_bad_member_in_the_text() -> None:
    # GIVEN a stored envelope with 20 members that are no attribute names
    bad = {f"Bad{n:02d}": n for n in range(20)}
    text = json.dumps({**stored(), **bad})

    # THEN the reason names the first of them, whatever the process's string
    # hashing (a set's order would name any of them)
    with pytest.raises(InvalidEnvelope, match="'Bad00' is not a CloudEvents"):
        Envelope.from_stored_json(text)
