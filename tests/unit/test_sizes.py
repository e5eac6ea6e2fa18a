"""The worst-case queue messages of dynamodb_outbox.sizes bound real ones built field by field.

Each test builds the message AWS documents for the longest values AWS allows
today (region ``us-isof-south-1``, a 64-character replay name, a 256-character
topic name, a 2,048-bit signature) and checks the bound holds, with room, and
that it grows byte for byte with the event.
"""

from __future__ import annotations

import base64
import json
import uuid

from hypothesis import given
from hypothesis import strategies as st

from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.sinks import OutboundEvent, rules_for
from dynamodb_outbox.sizes import (
    DLQ_ATTRIBUTES_ALLOWANCE_BYTES,
    EVENTBRIDGE_TARGET_DLQ_ATTRIBUTES,
    QUEUE_DELIVERY_BUDGET_BYTES,
    QUEUE_MAX_MESSAGE_BYTES,
    REPLAY_NAME_MAX_LENGTH,
    eventbridge_delivery_bytes,
    json_text_bytes,
    sqs_message_bytes,
)

REGION = "us-isof-south-1"
ENVELOPE = Envelope(
    type="OrderPlaced",
    source="shop.orders",
    subject="ORDER#1",
    data={"quote": 'a "b" \\ c', "accent": "é", "emoji": "\U0001f4e6", "control": "\x01"},
)


def test_eventbridge_bound_covers_a_replayed_event_in_the_longest_region() -> None:
    event = {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": ENVELOPE.type,
        "source": ENVELOPE.source,
        "account": "123456789012",
        "time": "2026-12-04T17:21:58.123Z",
        "region": REGION,
        "resources": [],
        "detail": json.loads(ENVELOPE.to_json()),
        "replay-name": "r" * REPLAY_NAME_MAX_LENGTH,
    }
    compact_utf8 = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    compact_ascii = json.dumps(event, separators=(",", ":"))

    bound = rules_for("eventbridge").delivery_size(OutboundEvent.of(ENVELOPE))

    assert len(compact_utf8.encode()) <= len(compact_ascii.encode()) <= bound


def test_eventbridge_bound_grows_byte_for_byte_with_the_detail() -> None:
    base = eventbridge_delivery_bytes(source="s", detail_type="t", detail='{"a":""}')
    assert eventbridge_delivery_bytes(source="s", detail_type="t", detail='{"a":"x"}') == base + 1
    assert eventbridge_delivery_bytes(source="s", detail_type="t", detail='{"a":"é"}') == base + 6


def test_sns_bound_covers_a_non_raw_notification_of_the_longest_topic() -> None:
    topic = f"arn:aws-us-gov:sns:{REGION}:123456789012:{'t' * 251}.fifo"
    body = ENVELOPE.to_json()
    notification = {
        "Type": "Notification",
        "MessageId": str(uuid.uuid4()),
        "SequenceNumber": str(2**128 - 1),
        "TopicArn": topic,
        "Message": body,
        "Timestamp": "2026-12-04T17:21:58.123Z",
        "SignatureVersion": "2",
        "Signature": base64.b64encode(bytes(256)).decode(),
        "SigningCertURL": f"https://sns.{REGION}.csp.hci.ic.gov/SimpleNotificationService-"
        f"{uuid.uuid4().hex}.pem",
        "UnsubscribeURL": f"https://sns.{REGION}.csp.hci.ic.gov/?Action=Unsubscribe"
        f"&SubscriptionArn={topic}:{uuid.uuid4()}",
        "MessageAttributes": {
            "event_type": {"Type": "String", "Value": ENVELOPE.type},
            "source": {"Type": "String", "Value": ENVELOPE.source},
        },
    }
    pretty = json.dumps(notification, indent=2, separators=(",", " : "))

    bound = rules_for("sns_fifo").delivery_size(OutboundEvent.of(ENVELOPE))

    assert len(pretty.encode()) <= bound


def test_sns_bound_is_at_least_the_raw_message_with_its_attributes() -> None:
    raw = sqs_message_bytes(
        ENVELOPE.to_json(),
        {"event_type": ("String", ENVELOPE.type), "source": ("String", ENVELOPE.source)},
    )
    assert rules_for("sns").delivery_size(OutboundEvent.of(ENVELOPE)) >= raw


def test_dlq_allowance_covers_eventbridge_attributes_at_their_longest() -> None:
    longest = {
        name: (data_type, "v" * length)
        for name, (data_type, length) in EVENTBRIDGE_TARGET_DLQ_ATTRIBUTES.items()
    }
    assert sqs_message_bytes("", longest) == DLQ_ATTRIBUTES_ALLOWANCE_BYTES
    assert QUEUE_DELIVERY_BUDGET_BYTES + DLQ_ATTRIBUTES_ALLOWANCE_BYTES == QUEUE_MAX_MESSAGE_BYTES


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_json_text_bytes_is_the_longest_escape_of_each_character(text: str) -> None:
    # The codec-based count equals the per-character rule: ASCII 1 byte,
    # other BMP units (lone surrogates too) \uXXXX, astral a surrogate pair.
    expected = sum(1 if ord(c) < 0x80 else 6 if ord(c) <= 0xFFFF else 12 for c in text)

    assert json_text_bytes(text) == expected


def test_json_text_counts_non_ascii_at_its_escaped_length() -> None:
    assert json_text_bytes("ab") == 2
    assert json_text_bytes("é") == len(json.dumps("é")) - 2 == 6
    assert json_text_bytes("\U0001f4e6") == len(json.dumps("\U0001f4e6")) - 2 == 12
