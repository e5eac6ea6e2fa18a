"""The SNS sink without AWS: sizes, limits, Failed-entry classification, sink selection."""

from __future__ import annotations

from typing import Any

import pytest

from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies
from dynamodb_outbox.settings import ConfigurationError, sink_from_environment
from dynamodb_outbox.sinks import (
    SNS_MAX_ENTRIES,
    SNS_MAX_REQUEST_BYTES,
    EventBridgeSink,
    OutboundEvent,
    SnsSink,
    sns_entry_size,
)
from dynamodb_outbox.sizes import SQS_MAX_MESSAGE_BYTES_CEILING
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from tests.factories import make_envelope, outbox_stream_record, sequence_numbers

TOPIC_ARN = "arn:aws:sns:us-east-1:123456789012:outbox"
FIFO_TOPIC_ARN = TOPIC_ARN + ".fifo"


class FakeSns:
    """Accepts every entry unless ``answer`` says otherwise; records each call."""

    def __init__(self, answer: Any = None) -> None:
        self.calls: list[list[dict[str, Any]]] = []
        self.answer = answer

    def publish_batch(self, **kwargs: Any) -> dict[str, Any]:
        entries = list(kwargs["PublishBatchRequestEntries"])
        self.calls.append(entries)
        if self.answer is not None:
            answer: dict[str, Any] = self.answer(entries)
            return answer
        return {"Successful": [{"Id": e["Id"], "MessageId": "m"} for e in entries], "Failed": []}


class FakeDynamoDB:
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.batch_writes: list[dict[str, Any]] = []

    def update_item(self, **kwargs: Any) -> dict[str, Any]:
        self.updates.append(kwargs)
        return {}

    def batch_write_item(self, **kwargs: Any) -> dict[str, Any]:
        self.batch_writes.append(kwargs)
        return {"UnprocessedItems": {}}


def _event(**overrides: Any) -> OutboundEvent:
    envelope = make_envelope(**overrides)
    return OutboundEvent.of(envelope)


def _record_of_entry_size(size: int, seq: str) -> dict[str, Any]:
    """An outbox INSERT whose SNS entry is exactly ``size`` bytes, attributes included."""
    sink = SnsSink(FakeSns(), TOPIC_ARN)
    base = sink.rules.entry_size(_event(data={"blob": ""}))
    envelope = make_envelope(data={"blob": "x" * (size - base)})
    return outbox_stream_record(envelope, "ORDER#1", seq)


# ------------------------------------------------------------------------- sizes


def test_entry_size_counts_body_and_each_attribute_name_type_and_value_in_utf8() -> None:
    size = sns_entry_size(
        '{"a":"€"}',  # € is 3 bytes
        {"event_type": {"DataType": "String", "StringValue": "Typé"}},  # é is 2 bytes
    )
    assert size == 11 + len("event_type") + len("String") + 5


def test_sink_sizes_the_stored_json_plus_the_filter_attributes() -> None:
    event = _event(type="OrderPlaced", source="app.orders")

    size = SnsSink(FakeSns(), TOPIC_ARN).rules.entry_size(event)

    attributes = len("event_type") + 6 + len("OrderPlaced") + len("source") + 6 + len("app.orders")
    assert size == len(event.body.encode()) + attributes


def test_limits_are_ten_messages_and_256_kib_per_batch() -> None:
    sink = SnsSink(FakeSns(), TOPIC_ARN)
    assert (SNS_MAX_ENTRIES, SNS_MAX_REQUEST_BYTES) == (10, 262_144)
    assert (sink.rules.max_entries, sink.rules.max_request_bytes) == (10, 262_144)


def _publish(records: list[dict[str, Any]], sns: FakeSns, dynamodb: FakeDynamoDB) -> Any:
    # The consumer queues' bound (dynamodb_outbox.sizes) is opened up to the SQS
    # ceiling so that PublishBatch's own limit is the one these tests meet.
    return publish_stream_batch(
        records,  # type: ignore[arg-type]
        PublishDependencies(
            sink=SnsSink(sns, TOPIC_ARN, max_delivery_bytes=SQS_MAX_MESSAGE_BYTES_CEILING),
            table_name="t",
            dynamodb_client=dynamodb,
            sleep=lambda _: None,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )


def test_two_messages_totalling_exactly_256_kib_share_one_batch_one_byte_more_splits() -> None:
    seqs = sequence_numbers()
    half = SNS_MAX_REQUEST_BYTES // 2
    exact, over = FakeSns(), FakeSns()

    _publish(
        [_record_of_entry_size(half, next(seqs)), _record_of_entry_size(half, next(seqs))],
        exact,
        FakeDynamoDB(),
    )
    _publish(
        [_record_of_entry_size(half, next(seqs)), _record_of_entry_size(half + 1, next(seqs))],
        over,
        FakeDynamoDB(),
    )

    assert [len(call) for call in exact.calls] == [2]
    assert [len(call) for call in over.calls] == [1, 1]


def test_a_message_of_exactly_256_kib_is_sent_and_one_byte_more_is_quarantined() -> None:
    seqs = sequence_numbers()
    sns, dynamodb = FakeSns(), FakeDynamoDB()
    fits = _record_of_entry_size(SNS_MAX_REQUEST_BYTES, next(seqs))
    too_big = _record_of_entry_size(SNS_MAX_REQUEST_BYTES + 1, next(seqs))

    result = _publish([fits, too_big], sns, dynamodb)

    assert [len(call) for call in sns.calls] == [1]
    (update,) = dynamodb.updates
    assert update["Key"] == too_big["dynamodb"]["Keys"]
    assert result.response() == {"batchItemFailures": []}


# ------------------------------------------------------------------ entries, answers


def test_standard_topic_entries_carry_no_fifo_ids() -> None:
    sns = FakeSns()
    event = _event()

    SnsSink(sns, TOPIC_ARN).send([event])

    (entry,) = sns.calls[0]
    assert entry["Message"] == event.body
    assert "MessageGroupId" not in entry and "MessageDeduplicationId" not in entry


def test_fifo_entries_use_the_subject_as_group_and_the_event_id_as_dedup_id() -> None:
    sns = FakeSns()
    event = _event(subject="ORDER#7")

    SnsSink(sns, FIFO_TOPIC_ARN).send([event])

    (entry,) = sns.calls[0]
    assert (entry["MessageGroupId"], entry["MessageDeduplicationId"]) == (
        "ORDER#7",
        event.envelope.id,
    )


@pytest.mark.parametrize(
    ("subject", "sendable"),
    [("ORDER#1", True), ("a" * 128, True), ("a" * 129, False), ("ORDER 1", False), ("é", False)],
    ids=["plain", "128-chars", "129-chars", "space", "non-ascii"],
)
def test_fifo_subject_must_be_a_valid_message_group_id(subject: str, sendable: bool) -> None:
    event = _event(subject=subject)

    reason = SnsSink(FakeSns(), FIFO_TOPIC_ARN).rules.refusal(event)

    assert (reason is None) == sendable
    assert SnsSink(FakeSns(), TOPIC_ARN).rules.refusal(event) is None  # standard: any subject


@pytest.mark.parametrize(
    ("failed", "retryable"),
    [
        ({"Code": "InvalidParameter", "SenderFault": True}, False),
        ({"Code": "ParameterValueInvalid", "SenderFault": True}, False),
        ({"Code": "ValidationException", "SenderFault": True}, False),
        ({"Code": "InternalError", "SenderFault": False}, True),
        ({"Code": "NewServerSideCode", "SenderFault": False}, True),
        ({"Code": "NoSenderFaultField"}, True),
        # SenderFault, but about the caller or the topic, not the message: retried,
        # so a misconfiguration never quarantines every event (docs/decisions.md).
        *[
            ({"Code": code, "SenderFault": True}, True)
            for code in [
                "AuthorizationError",
                "InvalidSecurity",
                "KMSAccessDenied",
                "KMSDisabled",
                "KMSInvalidState",
                "KMSNotFound",
                "KMSOptInRequired",
                "KMSThrottling",
                "NotFound",
                "Throttled",
                "SenderFaultAwsAddsLater",
            ]
        ],
    ],
    ids=lambda value: value["Code"] if isinstance(value, dict) else str(value),
)
def test_failed_entries_are_poison_only_when_the_message_itself_is_at_fault(
    failed: dict[str, Any], retryable: bool
) -> None:
    def answer(entries: list[dict[str, Any]]) -> dict[str, Any]:
        return {"Successful": [], "Failed": [{"Id": entries[0]["Id"], "Message": "x"} | failed]}

    (result,) = SnsSink(FakeSns(answer), TOPIC_ARN).send([_event()])

    assert (result.ok, result.error_code, result.retryable) == (False, failed["Code"], retryable)


def test_answers_are_matched_by_id_not_by_position() -> None:
    # GIVEN SNS lists the second entry as successful first and the first as failed
    def answer(entries: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "Successful": [{"Id": entries[1]["Id"], "MessageId": "m"}],
            "Failed": [{"Id": entries[0]["Id"], "Code": "InvalidParameter", "SenderFault": True}],
        }

    first, second = SnsSink(FakeSns(answer), TOPIC_ARN).send([_event(), _event()])

    assert (first.ok, first.retryable, second.ok) == (False, False, True)


def test_topic_must_be_an_sns_arn() -> None:
    with pytest.raises(ValueError, match="ARN"):
        SnsSink(FakeSns(), "outbox-topic")


# ------------------------------------------------------------------- sink selection


class Clients:
    def __init__(self) -> None:
        self.made: list[str] = []

    def __call__(self, service: str) -> Any:
        self.made.append(service)
        return FakeSns() if service == "sns" else object()


def test_eventbridge_is_the_default_sink() -> None:
    clients = Clients()

    sink = sink_from_environment({"OUTBOX_EVENT_BUS_NAME": "bus"}, clients)

    assert isinstance(sink, EventBridgeSink) and sink.event_bus_name == "bus"
    assert clients.made == ["events"]


@pytest.mark.parametrize("value", ["sns", "SNS", " sns "])
def test_sns_is_selected_by_outbox_publish_to(value: str) -> None:
    clients = Clients()

    sink = sink_from_environment(
        {"OUTBOX_PUBLISH_TO": value, "OUTBOX_TOPIC_ARN": TOPIC_ARN}, clients
    )

    assert isinstance(sink, SnsSink) and sink.topic_arn == TOPIC_ARN and not sink.fifo
    assert clients.made == ["sns"]


def test_sns_fifo_selects_a_fifo_topic_whose_sink_keeps_order_per_subject() -> None:
    clients = Clients()
    fifo_arn = TOPIC_ARN + ".fifo"

    sink = sink_from_environment(
        {"OUTBOX_PUBLISH_TO": "sns_fifo", "OUTBOX_TOPIC_ARN": fifo_arn}, clients
    )

    assert isinstance(sink, SnsSink) and sink.fifo and sink.rules.orders_by_subject
    assert clients.made == ["sns"]


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        ({"OUTBOX_PUBLISH_TO": "kafka"}, "OUTBOX_PUBLISH_TO"),
        ({"OUTBOX_PUBLISH_TO": "sns_fifo", "OUTBOX_TOPIC_ARN": TOPIC_ARN}, "OUTBOX_TOPIC_ARN"),
        ({"OUTBOX_PUBLISH_TO": "sns"}, "OUTBOX_TOPIC_ARN"),
        ({"OUTBOX_PUBLISH_TO": "sns", "OUTBOX_TOPIC_ARN": "outbox"}, "OUTBOX_TOPIC_ARN"),
        ({"OUTBOX_PUBLISH_TO": "eventbridge"}, "OUTBOX_EVENT_BUS_NAME"),
        ({}, "OUTBOX_EVENT_BUS_NAME"),
    ],
    ids=[
        "unknown-target",
        "sns-fifo-standard-topic",
        "sns-without-topic",
        "sns-topic-not-arn",
        "bus-missing",
        "default-bus-missing",
    ],
)
def test_a_missing_or_invalid_setting_is_an_error_naming_the_variable(
    environ: dict[str, str], variable: str
) -> None:
    with pytest.raises(ConfigurationError, match=variable):
        sink_from_environment(environ, Clients())
