"""SNS: the rules of ``PublishBatch`` (standard, FIFO), the head cache, topic ARNs, the sink.

The patterns only an SNS sink needs are compiled at their first use, not at import.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple, cast

from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.sinks._eventbridge import _HEAD_CACHE_PAIRS, _cacheable
from dynamodb_outbox.sinks._types import (
    EntryResult,
    OutboundEvent,
    SinkRules,
    _utf8_length,
    _verdict,
)
from dynamodb_outbox.sizes import (
    FIFO_SUFFIX,
    QUEUE_DELIVERY_BUDGET_BYTES,
    SNS_MAX_MESSAGE_BYTES,
    is_fifo,
    json_string_bytes,
    sns_notification_bytes,
    sqs_message_bytes,
)

if TYPE_CHECKING:
    from dynamodb_outbox.sinks._types import (
        PublishBatchRequestEntry,
        SnsClient,
        SnsMessageAttributeValue,
    )

__all__ = [
    "POISON_SNS_CODES",
    "SNS_ATTRIBUTE_OVERHEAD_BYTES",
    "SNS_FIFO_RULES",
    "SNS_MAX_ENTRIES",
    "SNS_MAX_REQUEST_BYTES",
    "SNS_MESSAGE_ATTRIBUTES",
    "SNS_RULES",
    "SnsRules",
    "SnsSink",
    "TopicArn",
    "parse_topic_arn",
    "sns_entry_size",
]

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


SNS_RULES: Final = SnsRules()
SNS_FIFO_RULES: Final = SnsRules(fifo=True)


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
