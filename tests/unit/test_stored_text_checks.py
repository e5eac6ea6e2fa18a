"""Breaker findings on the publisher's stored-envelope read (issue 28, "The hot path").

``Envelope.from_stored_json`` promises every check "on the parsed values or on
``text`` (which is what consumers receive)". Two checks still look only at the
parsed ``data`` member, while the whole stored text is what goes out: JSON
around ``data`` (an unknown extension, the value of a duplicate key the parse
dropped) escapes the nesting limit and PutEvents' int64 rule.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dynamodb_outbox.envelope import MAX_NESTING_DEPTH, Envelope, InvalidEnvelope
from dynamodb_outbox.sinks import EVENTBRIDGE_RULES, OutboundEvent

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
        "data": {"order_id": "1"},
    }
    event.update(overrides)
    return event


def nested_lists(levels: int) -> str:
    return "[" * levels + "]" * levels


def with_member(member: str, *, first: bool = False) -> str:
    """The stored text with ``member`` ("name": value) added first or last."""
    text = json.dumps(stored(), separators=(",", ":"))
    return "{" + member + "," + text[1:] if first else text[:-1] + "," + member + "}"


def depth_of(text: str) -> int:
    """Nesting of the JSON text itself (duplicates included), the outer object being 1."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


# Sent as they are (Detail / SNS Message), nesting past MAX_NESTING_DEPTH.
TOO_DEEP_OUTSIDE_DATA = {
    # an unknown extension: the constructor ignores it, the stored text carries it
    "unknown extension": with_member('"x":' + nested_lists(MAX_NESTING_DEPTH + 50)),
    # a duplicate "data": the parse keeps the last one, the text keeps both
    "dropped duplicate data": with_member(
        '"data":{"a":' + nested_lists(MAX_NESTING_DEPTH + 50) + "}", first=True
    ),
}


@pytest.mark.parametrize("text", TOO_DEEP_OUTSIDE_DATA.values(), ids=TOO_DEEP_OUTSIDE_DATA.keys())
def test_stored_text_nesting_past_the_limit_outside_data_is_refused(text: str) -> None:
    # The text the publisher would send nests deeper than the envelope's stated
    # limit ("its JSON may nest at most MAX_NESTING_DEPTH levels": EventBridge
    # processes at most 1,000, a Python consumer parses one frame per level).
    assert depth_of(text) > MAX_NESTING_DEPTH
    with pytest.raises(InvalidEnvelope, match="nests deeper"):
        Envelope.from_stored_json(text)


def test_data_at_the_nesting_limit_is_still_taken_and_one_more_level_refused() -> None:
    deepest: Any = {}
    for _ in range(MAX_NESTING_DEPTH - 2):
        deepest = {"a": deepest}
    text = json.dumps(stored(data=deepest))
    assert depth_of(text) == MAX_NESTING_DEPTH
    assert Envelope.from_stored_json(text).to_json() == text
    with pytest.raises(InvalidEnvelope, match="nests deeper"):
        Envelope.from_stored_json(json.dumps(stored(data={"a": deepest})))
    # brackets inside strings are not nesting
    many = json.dumps(stored(data={"s": "[" * 500 + "{" * 500}))
    assert Envelope.from_stored_json(many).to_json() == many


OUT_OF_INT64_OUTSIDE_DATA = {
    "unknown extension": with_member('"x":99999999999999999999'),
    "unknown extension, negative": with_member('"x":[-9223372036854775809]'),
    "dropped duplicate data": with_member('"data":{"n":99999999999999999999}', first=True),
}


@pytest.mark.parametrize(
    "text", OUT_OF_INT64_OUTSIDE_DATA.values(), ids=OUT_OF_INT64_OUTSIDE_DATA.keys()
)
def test_eventbridge_rules_refuse_an_out_of_range_integer_anywhere_in_the_sent_text(
    text: str,
) -> None:
    # PutEvents: "For the JSON number (integer) data type, ... a maximum value of
    # 9,223,372,036,854,775,807" -- for the Detail sent, which is the stored text.
    # The rule is checked before the call so that the entry cannot fail its
    # neighbours' call (sinks/_eventbridge.py); here it looks at envelope.data only.
    envelope = Envelope.from_stored_json(text)
    event = OutboundEvent.of(envelope, text)
    assert event.body == text
    refusal = EVENTBRIDGE_RULES.refusal(event)
    assert refusal is not None and "64-bit" in refusal


@pytest.mark.parametrize(
    "member",
    [
        '"x":9223372036854775807',
        '"x":-9223372036854775808',
        '"x":12345678901234567890.5',  # a float: not an integer
        '"x":1.12345678901234567890',
        '"x":1e-12345678901234567890',
        '"x":"99999999999999999999"',  # a string
        '"x":"\\"99999999999999999999"',
    ],
)
def test_eventbridge_rules_take_what_is_not_an_out_of_range_integer(member: str) -> None:
    text = with_member(member)
    event = OutboundEvent.of(Envelope.from_stored_json(text), text)
    assert EVENTBRIDGE_RULES.refusal(event) is None


UNDELIVERABLE_IN_A_DROPPED_DUPLICATE = {
    "lone surrogate, escaped": with_member('"data":{"t":"\\ud800"}', first=True),
    "U+FFFE, escaped": with_member('"subject":"\\ufffe"', first=True),
    "U+FFFF, escaped, in a key": with_member('"data":{"\\uffff":1}', first=True),
}


@pytest.mark.parametrize(
    "text",
    UNDELIVERABLE_IN_A_DROPPED_DUPLICATE.values(),
    ids=UNDELIVERABLE_IN_A_DROPPED_DUPLICATE.keys(),
)
def test_stored_text_with_an_undeliverable_escape_anywhere_is_refused(text: str) -> None:
    # The docstring: "no character SQS refuses anywhere in text". The check
    # re-encodes the parse, which lost the first of two equal keys; the stored
    # text (sent as is, re-serialised by the bus) still holds it.
    with pytest.raises(InvalidEnvelope, match="SQS refuses"):
        Envelope.from_stored_json(text)


@pytest.mark.parametrize(
    "member",
    ['"x":"\\ud83d\\ude00"', '"x":"\\\\ud800"', '"x":"\\\\\\ud83d\\ude00"', '"x":"\\ufffd"'],
)
def test_stored_text_with_deliverable_escapes_is_taken(member: str) -> None:
    text = with_member(member)
    assert Envelope.from_stored_json(text).to_json() == text


# --------------------------------------------------- what the consumer makes of it

TOPIC_ARN = "arn:aws:sns:eu-west-1:123456789012:outbox"
INNER = json.dumps(stored(id="01ARZ3NDEKTSV4RRFFQ69G5FAW", type="Other"), separators=(",", ":"))

# Top-level members the consumer reads to tell a body's shape (sender_checks.read_body),
# none of them a CloudEvents attribute name (lower-case letters and digits only).
SHAPE_MEMBERS = {
    "replay-name": '"replay-name":"r"',
    "SNS notification": '"Type":"Notification","Message":' + json.dumps(INNER),
    "EventBridge event": '"detail-type":"Other","detail":' + INNER,
}


@pytest.mark.parametrize("member", SHAPE_MEMBERS.values(), ids=SHAPE_MEMBERS.keys())
@pytest.mark.parametrize("expected", ["any", "sns"])
def test_what_the_publisher_sends_over_sns_raw_the_consumer_reads_as_that_event(
    member: str, expected: str
) -> None:
    # SNS raw delivery: the SQS body is the stored text itself. An extension the
    # publisher lets through decides how the consumer reads the body: refused as
    # an untrusted sender, or read as ANOTHER event (the one inside).
    from dynamodb_outbox.sender_checks import ANY_SENDER, ExpectedSender, read_body

    text = with_member(member)
    try:
        sent = Envelope.from_stored_json(text)
    except InvalidEnvelope:
        return  # quarantined: nothing reaches a consumer
    sender = ANY_SENDER if expected == "any" else ExpectedSender.sns(TOPIC_ARN)
    assert read_body(text, sender).envelope == sent


def test_extension_names_are_cloudevents_names_or_refused() -> None:
    for good in ('"x":1', '"ext1":"v"', '"partitionkey":"p"'):
        text = with_member(good)
        assert Envelope.from_stored_json(text).to_json() == text
    for bad in ('"X":1', '"my-ext":1', '"":1', '"caf\\u00e9":1'):
        with pytest.raises(InvalidEnvelope, match="attribute name"):
            Envelope.from_stored_json(with_member(bad))
