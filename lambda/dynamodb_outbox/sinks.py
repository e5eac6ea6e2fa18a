"""The transports events leave by, and the rules each one imposes on an event.

A sink is one API: :class:`EventBridgeSink` (``PutEvents`` on a bus) or
:class:`SnsSink` (``PublishBatch`` on a topic). What a sink can carry is
described by its :class:`SinkRules`, which need no client, so that two parts
share one definition:

* the writer refuses up front an event the sink the table publishes to would
  never accept (:func:`rules_for` turns the module's ``publish_to`` into rules);
* the publisher quarantines such an event when one reaches the table anyway
  (an older writer, a hand-written item), before any call, so that it cannot
  fail the call of its neighbours.

Per-entry failures are classified by one rule for both sinks: an entry is
poison only when its error code says the entry itself is malformed. Every other
code, including authorisation, KMS and codes AWS adds later, is retried: a
configuration mistake then blocks publishing and fires the alarms instead of
quarantining every event, and once it is fixed the events flow again.

Only the standard library, the envelope and the trace context are imported
here, so the writer can use the rules without pulling in boto3's clients or
Powertools.

The producer's trace travels with each event: in the envelope's
``traceparent`` always, and as PutEvents' per-entry ``TraceHeader`` (X-Ray
form), which EventBridge hands to its targets. SNS has no per-message
equivalent: PublishBatch entries have no trace field, SNS takes the trace from
the request's ``X-Amzn-Trace-Id`` header (one per call, shared by events of
different producers), so on SNS paths the consumer reads the trace from the
event itself.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Literal,
    NamedTuple,
    NotRequired,
    Protocol,
    TypedDict,
    cast,
    overload,
)

from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.sizes import (
    FIFO_SUFFIX,
    PUT_EVENTS_MAX_REQUEST_BYTES,
    QUEUE_DELIVERY_BUDGET_BYTES,
    SNS_MAX_MESSAGE_BYTES,
    eventbridge_delivery_bytes,
    is_fifo,
    json_string_bytes,
    json_text_bytes,
    sns_notification_bytes,
    sqs_message_bytes,
)

if TYPE_CHECKING:
    # boto3-stubs (dev only, requirements-dev.txt): the clients' real types.
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sns import SNSClient

__all__ = [
    "EVENTBRIDGE_RULES",
    "POISON_PUT_EVENTS_CODES",
    "POISON_SNS_CODES",
    "PUBLISH_TO",
    "PUBLISH_TO_EVENTBRIDGE",
    "PUBLISH_TO_SNS",
    "PUBLISH_TO_SNS_FIFO",
    "PUT_EVENTS_MAX_DETAIL_TYPE_LENGTH",
    "PUT_EVENTS_MAX_ENTRIES",
    "PUT_EVENTS_MAX_REQUEST_BYTES",
    "PUT_EVENTS_MAX_SOURCE_LENGTH",
    "PUT_EVENTS_TIME_BYTES",
    "SNS_ATTRIBUTE_OVERHEAD_BYTES",
    "SNS_FIFO_RULES",
    "SNS_MAX_ENTRIES",
    "SNS_MAX_REQUEST_BYTES",
    "SNS_MESSAGE_ATTRIBUTES",
    "SNS_RULES",
    "EntryResult",
    "EventBridgeRules",
    "EventBridgeSink",
    "EventsClient",
    "OutboundEvent",
    "PublishTo",
    "Sink",
    "SinkError",
    "SinkRules",
    "SnsClient",
    "SnsRules",
    "SnsSink",
    "TopicArn",
    "parse_publish_to",
    "parse_topic_arn",
    "put_events_entry_size",
    "rules_for",
    "sink_client",
    "sns_entry_size",
]

#: The module's ``publish_to``: which transport the events leave by.
PublishTo = Literal["eventbridge", "sns", "sns_fifo"]
PUBLISH_TO_EVENTBRIDGE: Final = "eventbridge"
PUBLISH_TO_SNS: Final = "sns"
PUBLISH_TO_SNS_FIFO: Final = "sns_fifo"
#: Every ``publish_to`` value, in the order the module's documentation lists them.
PUBLISH_TO: Final[tuple[PublishTo, ...]] = (
    PUBLISH_TO_EVENTBRIDGE,
    PUBLISH_TO_SNS,
    PUBLISH_TO_SNS_FIFO,
)


def parse_publish_to(value: object) -> PublishTo:
    """``value`` as a ``publish_to`` name (case and surrounding blanks ignored).

    The one place a ``publish_to`` value is read: the writer's argument, the
    publisher's and sweeper's ``OUTBOX_PUBLISH_TO`` and a consumer's
    ``OUTBOX_CONSUMER_TRANSPORT`` all come through here. Raises ``ValueError``
    listing the values it takes.
    """
    name = value.strip().lower() if isinstance(value, str) else None
    if name not in PUBLISH_TO:
        raise ValueError(f"publish_to must be one of {', '.join(PUBLISH_TO)}, got {value!r}")
    return name


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

SNS_MAX_ENTRIES: Final = 10
# AWS: with the topic's default MaximumMessageSize, one message and the sum of a
# batch's messages must not exceed 256 KiB, "including each message's body and
# attributes" (dynamodb_outbox.sizes).
SNS_MAX_REQUEST_BYTES: Final = SNS_MAX_MESSAGE_BYTES
SNS_STRING_DATA_TYPE: Final = "String"
_SNS_TYPE_ATTRIBUTE: Final = "event_type"
_SNS_SOURCE_ATTRIBUTE: Final = "source"
#: The message attributes set on every SNS message, the only keys a consumer's
#: filter policy can match (sns.tf's sns_message_attributes lists the same names).
SNS_MESSAGE_ATTRIBUTES: Final = (_SNS_TYPE_ATTRIBUTE, _SNS_SOURCE_ATTRIBUTE)
#: What the two message attributes add to a message besides the type and source
#: values: both names and both data types, in UTF-8 bytes.
SNS_ATTRIBUTE_OVERHEAD_BYTES: Final = (
    len(_SNS_TYPE_ATTRIBUTE) + len(_SNS_SOURCE_ATTRIBUTE) + 2 * len(SNS_STRING_DATA_TYPE)
)
# The patterns below are compiled the first time they are needed, not at import:
# compiling one costs a cold start 0.1 to 0.5 ms, and a publisher to EventBridge
# needs none of the SNS ones.


@functools.cache
def _sns_fifo_id() -> re.Pattern[str]:
    # MessageGroupId / MessageDeduplicationId: 1-128 ASCII letters, digits, punctuation.
    return re.compile(r"[!-~]{1,128}")


# Message attribute values travel to the SQS subscription as SQS message
# attributes, which take XML 1.0 characters only (no controls but tab, LF, CR).
@functools.cache
def _not_xml_character() -> re.Pattern[str]:
    return re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


# The SNS codes that say the message itself is malformed. SNS flags nearly every
# error SenderFault, throttling, authorisation and KMS errors included, so the
# flag does not tell poison from a misconfigured topic: the code does
# (ParameterValueInvalid is InvalidParameterValueException's code in the model).
POISON_SNS_CODES: Final = frozenset(
    {"InvalidParameter", "InvalidParameterValue", "ParameterValueInvalid", "ValidationException"}
)


# --------------------------------------------------------------------------- clients


# The entry shapes match boto3-stubs' (mypy_boto3_events, mypy_boto3_sns) key for
# key, so that the real clients satisfy these Protocols under mypy. For the type
# checker only: each TypedDict costs a cold start about 0.1 ms to define.
if TYPE_CHECKING:

    class PutEventsRequestEntry(TypedDict, total=False):
        Time: datetime | str
        Source: str
        Resources: Sequence[str]
        DetailType: str
        Detail: str
        EventBusName: str
        TraceHeader: str

    class SnsMessageAttributeValue(TypedDict):
        DataType: str
        StringValue: str

    class PublishBatchRequestEntry(TypedDict):
        Id: str
        Message: str
        Subject: NotRequired[str]
        MessageStructure: NotRequired[str]
        #: of :class:`SnsMessageAttributeValue` (the stubs' value type also has BinaryValue)
        MessageAttributes: NotRequired[Mapping[str, Any]]
        MessageDeduplicationId: NotRequired[str]
        MessageGroupId: NotRequired[str]


class EventsClient(Protocol):
    """The part of the boto3 EventBridge client a sink uses."""

    def put_events(self, *, Entries: list[PutEventsRequestEntry]) -> Mapping[str, Any]: ...


@overload
def sink_client(service: Literal["dynamodb"]) -> DynamoDBClient: ...
@overload
def sink_client(service: Literal["events"]) -> EventBridgeClient: ...
@overload
def sink_client(service: Literal["sns"]) -> SNSClient: ...
def sink_client(service: Literal["dynamodb", "events", "sns"]) -> object:
    """The boto3 client a sink sends with (``events`` or ``sns``): no parameter validation.

    botocore checks every request against the API's model before sending it:
    for ``PutEvents`` and ``PublishBatch`` that is types, required members and
    minimum lengths, about a tenth of the publisher's CPU per event. The sink's
    own rules (:meth:`SinkRules.check`, and the envelope's checks before them)
    already hold every entry to more than that, and a test builds the requests
    of the edge events those rules let through and passes each one through
    botocore's validator (``tests/unit/test_sink_checks_once.py``), so the check
    is made once, not twice. Region and endpoint come from the environment, as
    :func:`dynamodb_outbox.settings.boto3_client`'s do. The handlers' table
    client: :func:`dynamodb_outbox.publishing.table_client`.
    """
    import boto3
    from botocore.config import Config

    return boto3.client(service, config=Config(parameter_validation=False))


class SnsClient(Protocol):
    """The part of the boto3 SNS client a sink uses."""

    def publish_batch(
        self, *, TopicArn: str, PublishBatchRequestEntries: list[PublishBatchRequestEntry]
    ) -> Mapping[str, Any]: ...


# ----------------------------------------------------------------------------- events


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


def sns_entry_size(message: str, attributes: Mapping[str, SnsMessageAttributeValue]) -> int:
    """Bytes SNS counts for one message: the body plus each attribute's name, type and value.

    AWS counts "each message's body and attributes" without a formula for the
    attributes; counting all three parts in UTF-8 is the upper bound.
    """
    size = len(message.encode("utf-8"))
    for name, value in attributes.items():
        size += len(name.encode("utf-8"))
        size += len(value["DataType"].encode("utf-8"))
        size += len(value["StringValue"].encode("utf-8"))
    return size


def _sns_attributes(envelope: Envelope) -> dict[str, SnsMessageAttributeValue]:
    return _sns_attribute_values(envelope.type, envelope.source)


def _sns_attribute_values(event_type: str, source: str) -> dict[str, SnsMessageAttributeValue]:
    return {
        _SNS_TYPE_ATTRIBUTE: {"DataType": SNS_STRING_DATA_TYPE, "StringValue": event_type},
        _SNS_SOURCE_ATTRIBUTE: {"DataType": SNS_STRING_DATA_TYPE, "StringValue": source},
    }


class SnsRules(NamedTuple):
    """``PublishBatch``: at most 10 messages and 256 KiB per call; FIFO ids when ``fifo``."""

    fifo: bool = False
    max_request_bytes: int = SNS_MAX_REQUEST_BYTES
    name: str = "PublishBatch"
    max_entries: int = SNS_MAX_ENTRIES
    max_delivery_bytes: int = QUEUE_DELIVERY_BUDGET_BYTES

    @property
    def orders_by_subject(self) -> bool:
        return self.fifo  # the subject is the FIFO message group

    def delivery_size(self, event: OutboundEvent) -> int:
        envelope, body = event.envelope, event.body
        _, raw_head, notification_head, _ = _sns_head(envelope.source, envelope.type, self.fifo)
        return _sns_delivered(body, raw_head, notification_head)

    def entry_size(self, event: OutboundEvent) -> int:
        envelope = event.envelope
        return _sns_head(envelope.source, envelope.type, self.fifo)[0] + _utf8_length(event.body)

    def refusal(self, event: OutboundEvent) -> str | None:
        envelope = event.envelope
        return _sns_head(envelope.source, envelope.type, self.fifo)[3] or self._subject_refusal(
            envelope.subject
        )

    def check(self, event: OutboundEvent) -> tuple[int, str | None]:
        envelope, body = event.envelope, event.body
        entry_head, raw_head, notification_head, head_refusal = _sns_head(
            envelope.source, envelope.type, self.fifo
        )
        size = entry_head + _utf8_length(body)
        delivered = _sns_delivered(body, raw_head, notification_head)
        subject = envelope.subject
        return size, _verdict(
            self, size, delivered, lambda: head_refusal or self._subject_refusal(subject)
        )

    def _subject_refusal(self, subject: str) -> str | None:
        if self.fifo and not _sns_fifo_id().fullmatch(subject):
            return (
                f"subject {subject[:150]!r} cannot be a FIFO MessageGroupId "
                "(1-128 ASCII letters, digits or punctuation)"
            )
        return None


def _sns_delivered(body: str, raw_head: int, notification_head: int) -> int:
    """The longer of the raw SQS message and the notification (sizes.sns_delivery_bytes)."""
    raw = raw_head + _utf8_length(body)
    return max(raw, notification_head + json_string_bytes(body) - _EMPTY_JSON_STRING)


_EMPTY_JSON_STRING: Final = len('""')


def _sns_head(source: str, event_type: str, fifo: bool) -> tuple[int, int, int, str | None]:
    """What a source and type add to a message, its raw and notified forms, and their refusal.

    The same for every event of that source and type (``sns_entry_size``,
    ``sizes.sqs_message_bytes`` and ``sizes.sns_notification_bytes`` of an
    empty message): worked out once per pair (when both are short enough to be
    kept: the same bounds as EventBridge's, see ``_HEAD_CACHE_PAIRS``).
    """
    if _cacheable(source, event_type):
        return _cached_sns_head(source, event_type, fifo)
    return _work_out_sns_head(source, event_type, fifo)


def _work_out_sns_head(
    source: str, event_type: str, fifo: bool
) -> tuple[int, int, int, str | None]:
    attributes = _sns_attribute_values(event_type, source)
    pairs = {name: (value["DataType"], value["StringValue"]) for name, value in attributes.items()}
    refusal = None
    for name, value in (("type", event_type), ("source", source)):
        bad = _not_xml_character().search(value)
        if bad is not None:
            refusal = (
                f"{name} holds the character U+{ord(bad.group()):04X}, which an SNS message "
                "attribute (and the SQS message it becomes) cannot carry"
            )
            break
    return (
        sns_entry_size("", attributes),
        sqs_message_bytes("", pairs),
        sns_notification_bytes("", pairs, fifo=fifo),
        refusal,
    )


_cached_sns_head = functools.lru_cache(maxsize=_HEAD_CACHE_PAIRS)(_work_out_sns_head)


EVENTBRIDGE_RULES: Final = EventBridgeRules()
SNS_RULES: Final = SnsRules()
SNS_FIFO_RULES: Final = SnsRules(fifo=True)

_RULES_BY_NAME: Final[Mapping[PublishTo, SinkRules]] = {
    PUBLISH_TO_EVENTBRIDGE: EVENTBRIDGE_RULES,
    PUBLISH_TO_SNS: SNS_RULES,
    PUBLISH_TO_SNS_FIFO: SNS_FIFO_RULES,
}


def rules_for(publish_to: str) -> SinkRules:
    """The rules of the module's ``publish_to``: ``eventbridge``, ``sns`` or ``sns_fifo``.

    Raises ``ValueError`` (:func:`parse_publish_to`) for any other value.
    """
    return _RULES_BY_NAME[parse_publish_to(publish_to)]


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


#: SNS ``CreateTopic``: 1-256 ASCII letters, digits, ``_`` and ``-``, a FIFO
#: topic's ending in ``.fifo`` (counted in the 256); accounts are 12 digits.
@functools.cache
def _sns_topic_arn() -> re.Pattern[str]:
    return re.compile(
        r"arn:(aws[a-z-]*):sns:([a-z0-9-]+):(\d{12}):"
        rf"((?=[A-Za-z0-9_.-]{{1,256}}\Z)[A-Za-z0-9_-]+(?:{re.escape(FIFO_SUFFIX)})?)"
    )


class TopicArn(NamedTuple):
    """An SNS topic's ARN, read once: ``arn:<partition>:sns:<region>:<account>:<name>``."""

    arn: str
    partition: str
    region: str
    account: str
    name: str

    @property
    def fifo(self) -> bool:
        """A FIFO topic: its name ends in ``.fifo``."""
        return is_fifo(self.name)


def parse_topic_arn(arn: object) -> TopicArn:
    """``arn`` read as an SNS topic ARN; the one check of one, for every part that takes one.

    Raises ``ValueError`` showing the form expected.
    """
    found = _sns_topic_arn().fullmatch(arn) if isinstance(arn, str) else None
    if found is None:
        raise ValueError(
            f"must be an SNS topic ARN (arn:<partition>:sns:<region>:<account>:<name>), got {arn!r}"
        )
    return TopicArn(cast(str, arn), *found.groups())


class SnsSink:
    """``PublishBatch`` on one topic.

    The message is the stored envelope JSON, byte for byte. The attributes
    ``event_type`` and ``source`` let subscriptions filter without parsing the
    body. On a FIFO topic (ARN ending ``.fifo``) the envelope's subject is the
    message group, so one aggregate's events keep their order, and the event id
    is the deduplication id, so a republished event within SNS's 5-minute window
    is dropped by SNS itself.
    """

    def __init__(
        self,
        client: SnsClient,
        topic_arn: str,
        *,
        max_request_bytes: int = SNS_MAX_REQUEST_BYTES,
        max_delivery_bytes: int = QUEUE_DELIVERY_BUDGET_BYTES,
    ) -> None:
        try:
            topic = parse_topic_arn(topic_arn)
        except ValueError as exc:
            raise ValueError(f"the SNS topic {exc}") from None
        self._client = client
        self.topic_arn = topic.arn
        self.fifo = topic.fifo
        self.rules: SinkRules = SnsRules(
            fifo=self.fifo,
            max_request_bytes=max_request_bytes,
            max_delivery_bytes=max_delivery_bytes,
        )

    @staticmethod
    def message_attributes(event: OutboundEvent) -> dict[str, SnsMessageAttributeValue]:
        return _sns_attributes(event.envelope)

    def entry(self, event: OutboundEvent, entry_id: str) -> PublishBatchRequestEntry:
        entry: PublishBatchRequestEntry = {
            "Id": entry_id,
            "Message": event.body,
            "MessageAttributes": self.message_attributes(event),
        }
        if self.fifo:
            entry["MessageGroupId"] = event.envelope.subject
            entry["MessageDeduplicationId"] = event.envelope.id
        return entry

    def send(self, events: Sequence[OutboundEvent]) -> list[EntryResult]:
        # The position makes ids unique even when a stream batch carries the same
        # record twice; the event id makes them readable in logs and traces.
        ids = [f"{position}-{event.envelope.id}" for position, event in enumerate(events)]
        response = self._client.publish_batch(
            TopicArn=self.topic_arn,
            PublishBatchRequestEntries=[
                self.entry(event, entry_id) for event, entry_id in zip(events, ids, strict=True)
            ],
        )
        successful = {
            entry.get("Id")
            for entry in _list(response.get("Successful"))
            if isinstance(entry, dict)
        }
        failed = {
            entry.get("Id"): entry
            for entry in _list(response.get("Failed"))
            if isinstance(entry, dict)
        }
        results: list[EntryResult] = []
        for entry_id in ids:
            if entry_id in failed:  # listed as failed wins: never delete what may not be out
                results.append(self._failure(failed[entry_id]))
            elif entry_id in successful:
                results.append(EntryResult())
            else:
                results.append(
                    EntryResult(
                        error_code="MissingFromResponse",
                        error_message="PublishBatch listed the entry neither as Successful "
                        "nor as Failed",
                        retryable=True,
                    )
                )
        return results

    @staticmethod
    def _failure(entry: Mapping[str, Any]) -> EntryResult:
        code = str(entry.get("Code") or "Unknown")
        return EntryResult(
            error_code=code,
            error_message=str(entry.get("Message") or ""),
            retryable=code not in POISON_SNS_CODES,
        )


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []
