"""Every size limit between the writer and a consumer's queue, stated once.

An event crosses hops that each count bytes their own way::

    writer ──► PutEvents entry ──► bus ──► rule ──► SQS target (consumer queue) ─┐
           └─► PublishBatch entry ──► topic ──► subscription ──► SQS queue ──────┤
                                                       target / subscription DLQ ◄┘

What the writer accepts must fit every hop after it, on every path, or an event
is accepted by PutEvents or Publish (so the outbox item is deleted) and then
refused by the queue: on AWS a silent loss. So the writer (and the publisher's
quarantine, for items written without it) checks two sizes:

* the entry the API counts (:data:`PUT_EVENTS_MAX_REQUEST_BYTES`,
  :data:`SNS_MAX_MESSAGE_BYTES`), and
* the worst-case message a queue receives (:func:`eventbridge_delivery_bytes`,
  :func:`sns_delivery_bytes`) plus what a DLQ adds to it
  (:data:`DLQ_ATTRIBUTES_ALLOWANCE_BYTES`), within :data:`QUEUE_MAX_MESSAGE_BYTES`.

The AWS facts, with the pages they come from:

* SQS "Amazon SQS message quotas" and ``SetQueueAttributes``:
  ``MaximumMessageSize`` is 1,024 to 1,048,576 bytes, and a message's
  attributes (name, type and value of each) count toward it; message *system*
  attributes (``AWSTraceHeader``) do not. ``hashicorp/aws`` 5.100 refuses a
  ``max_message_size`` above 262,144 at validate ("expected max_message_size to
  be in the range (1024 - 262144)", checked against the provider mirror), so the
  module sets 262,144 on every queue it creates (Terraform cannot import this
  file: ``tests/terraform/test_terraform_static.py`` pins the agreement).
* EventBridge "Event structure reference": a rule's SQS target receives the
  whole event, ``version``, ``id`` (a UUID), ``detail-type``, ``source``,
  ``account`` (12 digits), ``time``, ``region``, ``resources``, ``detail``
  (the JSON object itself), and ``replay-name`` on a replayed event;
  "Calculating PutEvents entry size" counts none of that wrapper.
* EventBridge ``Replay`` API: ``ReplayName`` is 1-64 characters of
  ``[.-_A-Za-z0-9]``.
* EventBridge "Event retry policy and using dead-letter queues": an event the
  target could not take goes to the target's DLQ with the attributes
  ``ERROR_CODE``, ``ERROR_MESSAGE``, ``EXHAUSTED_RETRY_CONDITION``,
  ``RETRY_ATTEMPTS``, ``RULE_ARN``, ``TARGET_ARN``; without a DLQ it is dropped.
* SNS "Amazon SNS raw message delivery": with raw delivery the SQS message is
  the published message as is, its message attributes become SQS message
  attributes; without it SNS delivers its JSON notification ("HTTP/HTTPS
  notification JSON format": ``Type``, ``MessageId``, ``TopicArn``,
  ``Subject`` if given, ``Message``, ``Timestamp``, ``SignatureVersion``,
  ``Signature``, ``SigningCertURL``, ``UnsubscribeURL``, and
  ``MessageAttributes`` as ``{"Type": …, "Value": …}``; FIFO topics add
  ``SequenceNumber``), in which ``Message`` is a JSON string: escaping can
  make it longer than the message.
* SNS ``CreateTopic``: a topic name is up to 256 characters; ``PublishBatch``:
  256 KiB per message "including each message's body and attributes".

Where AWS documents no bound the safe allowance is taken and named below
(region and partition names, error messages, signature and URL lengths), and
JSON strings are counted as if every non-ASCII character were escaped
(``\\uXXXX``), the longest form any serializer writes.
"""

from __future__ import annotations

import functools
import json
from typing import Final

__all__ = [
    "ACCOUNT_ID_LENGTH",
    "DLQ_ATTRIBUTES_ALLOWANCE_BYTES",
    "EVENTBRIDGE_TARGET_DLQ_ATTRIBUTES",
    "FIFO_SUFFIX",
    "PUT_EVENTS_MAX_REQUEST_BYTES",
    "QUEUE_DELIVERY_BUDGET_BYTES",
    "QUEUE_MAX_MESSAGE_BYTES",
    "REPLAY_NAME_MAX_LENGTH",
    "SNS_MAX_MESSAGE_BYTES",
    "SQS_MAX_MESSAGE_BYTES_CEILING",
    "eventbridge_delivery_bytes",
    "is_fifo",
    "json_string_bytes",
    "json_text_bytes",
    "sns_delivery_bytes",
    "sns_notification_bytes",
    "sqs_message_bytes",
]

# ------------------------------------------------------------------ AWS limits

#: SQS ``MaximumMessageSize`` upper bound (1 MiB).
SQS_MAX_MESSAGE_BYTES_CEILING: Final = 1_048_576
#: What the module sets as ``max_message_size`` on every queue it creates: the
#: most ``hashicorp/aws`` 5.100 accepts (AWS's own default before 2025).
QUEUE_MAX_MESSAGE_BYTES: Final = 262_144
#: PutEvents: the entries of one request total *less than* 256 KB. The 2026
#: 1 MB payload announcement is not relied on until it is confirmed per request.
PUT_EVENTS_MAX_REQUEST_BYTES: Final = 256 * 1024 - 1
#: PublishBatch: 256 KiB per message and per batch, body and attributes.
SNS_MAX_MESSAGE_BYTES: Final = 256 * 1024
#: ``ReplayName``: 1-64 characters.
REPLAY_NAME_MAX_LENGTH: Final = 64
ACCOUNT_ID_LENGTH: Final = 12
_UUID_LENGTH: Final = 36
#: SNS ``CreateTopic``: up to 256 characters (``.fifo`` included).
_TOPIC_NAME_MAX_LENGTH: Final = 256
#: SQS ``CreateQueue`` and SNS ``CreateTopic``: a FIFO queue's or topic's name
#: ends in ``.fifo`` (and only a FIFO one's may), so its ARN and URL do too.
FIFO_SUFFIX: Final = ".fifo"


def is_fifo(name_or_arn: object) -> bool:
    """Whether a queue or topic, by name, ARN or URL, is a FIFO one: ends in ``.fifo``."""
    return isinstance(name_or_arn, str) and name_or_arn.endswith(FIFO_SUFFIX)


# ------------------------------------------ allowances where AWS states no bound

#: The longest region name today is 15 characters (``us-isof-south-1``).
_REGION_NAME_ALLOWANCE: Final = 32
#: ``aws``, ``aws-cn``, ``aws-us-gov``, ``aws-iso-b``, ``aws-eusc``…
_PARTITION_ALLOWANCE: Final = 16
#: ``amazonaws.com``, ``amazonaws.com.cn``, ``c2s.ic.gov``, ``sc2s.sgov.gov``…
_DNS_SUFFIX_ALLOWANCE: Final = 32
#: ISO 8601 with milliseconds: ``2026-12-04T17:21:58.123Z``.
_TIMESTAMP_LENGTH: Final = 24
#: A base64 RSA signature of a 4,096-bit key (SNS signs with 2,048 bits today).
_SIGNATURE_ALLOWANCE: Final = 684
#: A 128-bit SNS FIFO ``SequenceNumber`` in decimal (39 digits) and then some.
_SEQUENCE_NUMBER_ALLOWANCE: Final = 40
#: An ARN as EventBridge's API bounds it (``Rule.Arn``, ``Target.Arn``).
_ARN_MAX_LENGTH: Final = 1600
#: ``ERROR_MESSAGE`` has no documented bound.
_ERROR_MESSAGE_ALLOWANCE: Final = 2048
_ERROR_CODE_ALLOWANCE: Final = 128

#: The attributes EventBridge adds to a message it dead-letters, with the
#: longest value each may take (the SQS data type of each, then its allowance).
EVENTBRIDGE_TARGET_DLQ_ATTRIBUTES: Final[dict[str, tuple[str, int]]] = {
    "ERROR_CODE": ("String", _ERROR_CODE_ALLOWANCE),
    "ERROR_MESSAGE": ("String", _ERROR_MESSAGE_ALLOWANCE),
    "EXHAUSTED_RETRY_CONDITION": ("String", 64),
    "RETRY_ATTEMPTS": ("Number", 20),
    "RULE_ARN": ("String", _ARN_MAX_LENGTH),
    "TARGET_ARN": ("String", _ARN_MAX_LENGTH),
}
#: Room kept in every queue message for what a DLQ adds when the message is
#: dead-lettered instead (EventBridge's attributes above; reserved on SNS
#: paths too), so that an event that fits its queue also fits the DLQ.
DLQ_ATTRIBUTES_ALLOWANCE_BYTES: Final = sum(
    len(name) + len(data_type) + longest
    for name, (data_type, longest) in EVENTBRIDGE_TARGET_DLQ_ATTRIBUTES.items()
)
#: The most a consumer queue message may take before the DLQ allowance.
QUEUE_DELIVERY_BUDGET_BYTES: Final = QUEUE_MAX_MESSAGE_BYTES - DLQ_ATTRIBUTES_ALLOWANCE_BYTES

# ------------------------------------------------------------------- counting


def json_string_bytes(text: str) -> int:
    """Bytes of ``text`` as a JSON string, quotes included, at its longest (ASCII-escaped)."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return len(text) + 2  # nothing to escape: printable ASCII is written as it is
    return len(json.dumps(text, ensure_ascii=True))


def json_text_bytes(text: str) -> int:
    """Bytes of the JSON text ``text`` embedded as is, at its longest (ASCII-escaped).

    A non-ASCII character costs ``\\uXXXX`` (6 bytes), or a surrogate pair
    (12 bytes) outside the Basic Multilingual Plane, never less than in UTF-8.
    """
    if text.isascii():
        return len(text)
    # Counted by the codecs, not a Python loop over every character: the writer
    # and every publisher plan size each event (a 190k-character body took
    # ~26 ms as a loop). ``surrogatepass`` counts a lone surrogate as one BMP unit.
    length = len(text)
    astral = len(text.encode("utf-16-le", "surrogatepass")) // 2 - length
    non_ascii = length - len(text.encode("ascii", "ignore"))
    return length + 5 * (non_ascii - astral) + 11 * astral


def sqs_message_bytes(body: str, attributes: dict[str, tuple[str, str]] | None = None) -> int:
    """What SQS counts against ``MaximumMessageSize``: the body and each attribute's parts.

    ``attributes`` maps a name to its (data type, value), all counted in UTF-8.
    """
    size = len(body.encode("utf-8"))
    for name, (data_type, value) in (attributes or {}).items():
        size += len(name.encode("utf-8")) + len(data_type.encode("utf-8"))
        size += len(value.encode("utf-8"))
    return size


def _eventbridge_wrapper_bytes() -> int:
    """The event around ``detail``, with empty source and detail-type, at its longest."""
    event: dict[str, object] = {
        "version": "0",
        "id": "0" * _UUID_LENGTH,
        "detail-type": "",
        "source": "",
        "account": "0" * ACCOUNT_ID_LENGTH,
        "time": "0" * _TIMESTAMP_LENGTH,
        "region": "r" * _REGION_NAME_ALLOWANCE,
        "resources": [],
        "detail": None,  # "null": 4 bytes taken off below
        "replay-name": "n" * REPLAY_NAME_MAX_LENGTH,
    }
    return len(json.dumps(event, separators=(",", ":"))) - len("null")


_EVENTBRIDGE_WRAPPER_BYTES: Final = _eventbridge_wrapper_bytes()
_EMPTY_JSON_STRING: Final = len('""')


def eventbridge_delivery_bytes(*, source: str, detail_type: str, detail: str) -> int:
    """The longest SQS message a rule target can receive for this event.

    The whole event (longest region, replay name, ids), with ``detail`` embedded
    as is; the publisher sends no ``resources``.
    """
    return (
        _EVENTBRIDGE_WRAPPER_BYTES
        + json_string_bytes(source)
        - _EMPTY_JSON_STRING
        + json_string_bytes(detail_type)
        - _EMPTY_JSON_STRING
        + json_text_bytes(detail)
    )


@functools.lru_cache(maxsize=8)
def _sns_notification_template(fifo: bool, attribute_names: tuple[str, ...]) -> int:
    """The notification with an empty message and empty attribute values, at its longest."""
    region = "r" * _REGION_NAME_ALLOWANCE
    endpoint = f"https://sns.{region}.{'d' * _DNS_SUFFIX_ALLOWANCE}"
    topic_arn = (
        f"arn:{'p' * _PARTITION_ALLOWANCE}:sns:{region}:{'0' * ACCOUNT_ID_LENGTH}:"
        f"{'t' * _TOPIC_NAME_MAX_LENGTH}"
    )
    notification: dict[str, object] = {
        "Type": "Notification",
        "MessageId": "0" * _UUID_LENGTH,
    }
    if fifo:
        notification["SequenceNumber"] = "0" * _SEQUENCE_NUMBER_ALLOWANCE
    notification.update(
        {
            "TopicArn": topic_arn,
            "Message": "",
            "Timestamp": "0" * _TIMESTAMP_LENGTH,
            "SignatureVersion": "2",
            "Signature": "s" * _SIGNATURE_ALLOWANCE,
            "SigningCertURL": f"{endpoint}/SimpleNotificationService-{'0' * 32}.pem",
            "UnsubscribeURL": (
                f"{endpoint}/?Action=Unsubscribe&SubscriptionArn={topic_arn}:{'0' * _UUID_LENGTH}"
            ),
            "MessageAttributes": {
                name: {"Type": "String", "Value": ""} for name in attribute_names
            },
        }
    )
    # SNS writes it indented; " : " and two spaces a level is the widest form seen.
    return len(json.dumps(notification, indent=2, separators=(",", " : ")))


def sns_notification_bytes(
    message: str, attributes: dict[str, tuple[str, str]], *, fifo: bool
) -> int:
    """The longest JSON notification an SQS subscription without raw delivery receives."""
    size = _sns_notification_template(fifo, tuple(attributes))  # the names included
    size += json_string_bytes(message) - _EMPTY_JSON_STRING
    for _data_type, value in attributes.values():
        size += json_string_bytes(value) - _EMPTY_JSON_STRING
    return size


def sns_delivery_bytes(message: str, attributes: dict[str, tuple[str, str]], *, fifo: bool) -> int:
    """The longest SQS message a subscription can receive: raw or not, whichever is longer."""
    raw = sqs_message_bytes(message, attributes)
    return max(raw, sns_notification_bytes(message, attributes, fifo=fifo))
