"""Publisher rules that need no AWS: entry sizes, chunk limits, error codes, responses."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from aws_lambda_powertools import Metrics

from dynamodb_outbox import publisher
from dynamodb_outbox.publisher import (
    MissingSequenceNumber,
    publish_stream_batch,
    record_metrics,
)
from dynamodb_outbox.publishing import PublishDependencies, PublishResult
from dynamodb_outbox.sinks import (
    POISON_PUT_EVENTS_CODES,
    PUT_EVENTS_MAX_ENTRIES,
    PUT_EVENTS_MAX_REQUEST_BYTES,
    EventBridgeSink,
    OutboundEvent,
    put_events_entry_size,
)
from dynamodb_outbox.sizes import SQS_MAX_MESSAGE_BYTES_CEILING
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from tests.factories import make_envelope, outbox_stream_record, sequence_numbers
from tests.support.lambda_context import FakeLambdaContext


class FakeEvents:
    """Accepts every entry unless ``answer`` says otherwise; records each call."""

    def __init__(self, answer: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None):
        self.calls: list[list[dict[str, Any]]] = []
        self.answer = answer

    def put_events(self, **kwargs: Any) -> dict[str, Any]:
        entries = list(kwargs["Entries"])
        self.calls.append(entries)
        if self.answer is not None:
            return self.answer(entries)
        return {"FailedEntryCount": 0, "Entries": [{"EventId": str(i)} for i in entries]}


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


def _publish(
    records: list[dict[str, Any]], events: FakeEvents, dynamodb: FakeDynamoDB | None = None
) -> PublishResult:
    # The consumer queues' bound (dynamodb_outbox.sizes) is opened up to the SQS
    # ceiling so that PutEvents' own limit is the one these tests meet.
    return publish_stream_batch(
        records,  # type: ignore[arg-type]
        PublishDependencies(
            sink=EventBridgeSink(events, "bus", max_delivery_bytes=SQS_MAX_MESSAGE_BYTES_CEILING),
            table_name="t",
            dynamodb_client=dynamodb or FakeDynamoDB(),
            sleep=lambda _: None,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )


def _record_of_entry_size(size: int, seq: str) -> dict[str, Any]:
    """An outbox INSERT whose PutEvents entry is exactly ``size`` bytes by AWS's formula."""
    envelope = make_envelope(data={"blob": ""})
    base = EventBridgeSink(FakeEvents(), "bus").rules.entry_size(OutboundEvent.of(envelope))
    envelope = make_envelope(data={"blob": "x" * (size - base)})
    return outbox_stream_record(envelope, "ORDER#1", seq)


# ------------------------------------------------------------------- entry sizes


def test_entry_size_counts_utf8_bytes_and_14_for_time_but_not_the_bus_name() -> None:
    size = put_events_entry_size(
        source="app.é",  # é is 2 bytes
        detail_type="Typ",
        detail='{"a":"€"}',  # € is 3 bytes
        resources=["arn:1", "arn:22"],
        has_time=True,
    )
    assert size == 14 + 6 + 3 + 11 + 5 + 6
    assert put_events_entry_size(source="s", detail_type="t", detail="{}", has_time=False) == 4


def test_sink_sizes_the_stored_json_not_a_re_encoding() -> None:
    envelope = make_envelope(data={"note": "café"})
    stored = json.dumps(envelope.to_dict(), indent=2, ensure_ascii=False)
    event = OutboundEvent.of(envelope, stored)

    size = EventBridgeSink(FakeEvents(), "bus").rules.entry_size(event)

    assert size == 14 + len(envelope.source) + len(envelope.type) + len(stored.encode("utf-8"))


def test_an_event_from_before_1970_goes_without_time_and_14_bytes_lighter() -> None:
    """AWS takes Time as epoch seconds and documents no range: none is sent before 1970."""
    events = FakeEvents()
    old = make_envelope(time="1969-12-31T23:59:59Z")
    new = make_envelope(time="1970-01-01T00:00:00Z")
    sink = EventBridgeSink(events, "bus")

    _publish([outbox_stream_record(e, "ORDER#1", str(n)) for n, e in enumerate([old, new])], events)

    first, second = events.calls[0]
    assert "Time" not in first
    assert second["Time"] == datetime(1970, 1, 1, tzinfo=UTC)
    sizes = [sink.rules.entry_size(OutboundEvent.of(e)) for e in (old, new)]
    assert sizes[1] - sizes[0] == 14
    assert json.loads(first["Detail"])["time"] == "1969-12-31T23:59:59Z", "the envelope keeps it"


# ----------------------------------------------------------------- chunk limits


def test_two_entries_exactly_at_the_request_limit_share_one_call() -> None:
    seqs = sequence_numbers()
    half = PUT_EVENTS_MAX_REQUEST_BYTES // 2
    rest = PUT_EVENTS_MAX_REQUEST_BYTES - half
    events = FakeEvents()

    _publish(
        [_record_of_entry_size(half, next(seqs)), _record_of_entry_size(rest, next(seqs))], events
    )

    assert [len(call) for call in events.calls] == [2]


def test_one_byte_more_than_the_request_limit_splits_the_call() -> None:
    # AWS wants the request *under* 256 KB: 256 * 1024 bytes in total is already too much
    seqs = sequence_numbers()
    half = 128 * 1024
    events = FakeEvents()

    _publish(
        [_record_of_entry_size(half, next(seqs)), _record_of_entry_size(half, next(seqs))], events
    )

    assert [len(call) for call in events.calls] == [1, 1]


def test_an_entry_of_exactly_the_limit_is_sent_and_one_byte_more_is_quarantined() -> None:
    seqs = sequence_numbers()
    events, dynamodb = FakeEvents(), FakeDynamoDB()
    fits = _record_of_entry_size(PUT_EVENTS_MAX_REQUEST_BYTES, next(seqs))
    too_big = _record_of_entry_size(PUT_EVENTS_MAX_REQUEST_BYTES + 1, next(seqs))

    result = _publish([fits, too_big], events, dynamodb)

    assert [len(call) for call in events.calls] == [1]
    assert len(dynamodb.updates) == 1
    assert dynamodb.updates[0]["Key"] == too_big["dynamodb"]["Keys"]
    assert "too large" in dynamodb.updates[0]["ExpressionAttributeValues"][":reason"]["S"]
    assert result.response() == {"batchItemFailures": []}


def test_never_more_than_ten_entries_per_call() -> None:
    seqs = sequence_numbers()
    records = [outbox_stream_record(make_envelope(), "ORDER#1", next(seqs)) for _ in range(21)]
    events = FakeEvents()

    _publish(records, events)

    assert PUT_EVENTS_MAX_ENTRIES == 10
    assert [len(call) for call in events.calls] == [10, 10, 1]


# ------------------------------------------------------------------ error codes


@pytest.mark.parametrize(
    ("code", "retryable"),
    [
        ("InternalFailure", True),
        ("ThrottlingException", True),
        ("SomeCodeAwsAddsLater", True),
        # Permissions and the bus, not the event: a misconfiguration must not
        # quarantine every event (docs/decisions.md).
        ("AccessDeniedException", True),
        ("InvalidAccountIdException", True),
        ("NotAuthorizedForSourceException", True),
        ("NotAuthorizedForDetailTypeException", True),
        *[(code, False) for code in sorted(POISON_PUT_EVENTS_CODES)],
    ],
)
def test_put_events_error_codes_are_classified(code: str, retryable: bool) -> None:
    def answer(entries: list[dict[str, Any]]) -> dict[str, Any]:
        return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": code, "ErrorMessage": "x"}]}

    (result,) = EventBridgeSink(FakeEvents(answer), "bus").send(
        [OutboundEvent.of(make_envelope(), "{}")]
    )

    assert (result.ok, result.error_code, result.retryable) == (False, code, retryable)


def test_quarantine_update_never_recreates_and_leaves_the_pending_index() -> None:
    # GIVEN an entry PutEvents rejects as malformed
    def answer(entries: list[dict[str, Any]]) -> dict[str, Any]:
        return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "MalformedDetail"}]}

    dynamodb = FakeDynamoDB()
    envelope = make_envelope()

    _publish([outbox_stream_record(envelope, "ORDER#1", "1")], FakeEvents(answer), dynamodb)

    (update,) = dynamodb.updates
    names = update["ExpressionAttributeNames"]
    condition = update["ConditionExpression"].replace("#sk", names["#sk"])
    assert condition == "attribute_exists(SK)"
    assert "REMOVE #pending" in update["UpdateExpression"]
    assert names["#pending"] == "outbox_pending_shard"
    assert update["ExpressionAttributeValues"][":status"] == {"S": "QUARANTINED"}
    assert dynamodb.batch_writes == []  # a rejected event is never deleted


def test_answer_not_aligned_with_the_request_is_a_failed_call_and_nothing_is_deleted() -> None:
    # GIVEN PutEvents answers one entry for two sent: no entry can be trusted
    def answer(entries: list[dict[str, Any]]) -> dict[str, Any]:
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "1"}]}

    seqs = sequence_numbers()
    records = [outbox_stream_record(make_envelope(), "ORDER#1", next(seqs)) for _ in range(2)]
    dynamodb = FakeDynamoDB()

    result = _publish(records, FakeEvents(answer), dynamodb)

    assert result.response() == {
        "batchItemFailures": [{"itemIdentifier": records[0]["dynamodb"]["SequenceNumber"]}]
    }
    assert dynamodb.batch_writes == []


# ------------------------------------------------------------------- responses


def test_response_of_a_full_success_is_an_empty_list() -> None:
    assert PublishResult().response() == {"batchItemFailures": []}
    assert PublishResult(failure_sequence_number="42").response() == {
        "batchItemFailures": [{"itemIdentifier": "42"}]
    }


def test_records_without_sequence_numbers_are_fine_until_one_must_be_reported() -> None:
    envelope = make_envelope()
    record = outbox_stream_record(envelope, "ORDER#1", None)

    ok = _publish([record], FakeEvents())
    assert ok.response() == {"batchItemFailures": []}

    def throttled(entries: list[dict[str, Any]]) -> dict[str, Any]:
        return {"Entries": [{"ErrorCode": "ThrottlingException"} for _ in entries]}

    with pytest.raises(MissingSequenceNumber):
        _publish([record], FakeEvents(throttled))


def test_metrics_carry_every_count_under_its_name() -> None:
    metrics = Metrics(namespace="UnitTest")
    metrics.clear_metrics()
    result = PublishResult(
        published=7, quarantined=2, retryable_failures=1, delete_leftovers=3, send_calls=4
    )

    record_metrics(result, metrics)
    emf = metrics.serialize_metric_set()
    metrics.clear_metrics()

    values = {name: emf[name] for name in emf if not name.startswith("_")}  # type: ignore[misc]
    assert values["PublishedEvents"] == [7.0]
    assert values["QuarantinedEvents"] == [2.0]
    assert values["RetryableFailures"] == [1.0]
    assert values["DeleteLeftovers"] == [3.0]
    assert values["PutEventsCalls"] == [4.0]


# ---------------------------------------------------------------------- handler


def test_handler_without_configuration_fails_the_batch_instead_of_dropping_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OUTBOX_EVENT_BUS_NAME", raising=False)
    monkeypatch.setenv("OUTBOX_TABLE_NAME", "t")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    publisher.default_runtime.cache_clear()
    record = outbox_stream_record(make_envelope(), "ORDER#1", "1")

    try:
        with pytest.raises(RuntimeError, match="OUTBOX_EVENT_BUS_NAME"):
            publisher.handler({"Records": [record]}, FakeLambdaContext())  # type: ignore[arg-type]
    finally:
        publisher.default_runtime.cache_clear()
        publisher.metrics.clear_metrics()
