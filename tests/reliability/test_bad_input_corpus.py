"""A corpus of bad inputs: each gets a clear error or a quarantine/DLQ, and loses nothing.

Every stream or SQS batch here puts the bad record between two good ones: the
good ones must be published (or processed) exactly once and the batch must not
fail as a whole. The documented exceptions are asserted explicitly:

* a stream record that must be retried but has no ``SequenceNumber`` raises
  :class:`MissingSequenceNumber` (a partial response cannot name it);
* an SQS record without a ``messageId``, or an event without ``Records``,
  raises :class:`MalformedBatch` (same reason).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

from dynamodb_outbox.consumer import MalformedBatch, process_sqs_batch
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.outbox_item import ATTR_ENVELOPE, outbox_item, outbox_sk
from dynamodb_outbox.publisher import MissingSequenceNumber, publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies, PublishResult
from dynamodb_outbox.sinks import EventBridgeSink
from dynamodb_outbox.sizes import QUEUE_MAX_MESSAGE_BYTES
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from dynamodb_outbox.writer import (
    EventTooLarge,
    InvalidWrite,
    ItemTooLarge,
    OutboxWriter,
    TooManyActions,
    TransactionTooLarge,
    put_action,
)
from dynamodb_outbox.writer._limits import MAX_TRANSACTION_ACTIONS
from tests.factories import make_envelope, sequence_numbers, stream_record
from tests.functional.consumer_fixtures import eventbridge_body, sqs_event, sqs_record
from tests.reliability.pipeline import (
    CONSUMER,
    IDEMPOTENCY_TABLE,
    MAX_RECEIVE_COUNT,
    FaultPlan,
    Pipeline,
    aws_environment,
    pipeline,
)
from tests.support.lambda_context import FakeLambdaContext
from tests.support.moto_tables import create_idempotency_table

PK = "ORDER#1001"
BIG = 300 * 1024  # over the 256 KB bus limit

# ------------------------------------------------------------------ the publisher


class FakeEvents:
    """PutEvents that accepts everything and remembers what it was sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def put_events(self, *, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.sent.extend(json.loads(entry["Detail"])["id"] for entry in Entries)
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "e"} for _ in Entries]}


class FailingEvents(FakeEvents):
    """Throttles the event ``throttled``; accepts the others."""

    def __init__(self, throttled: str) -> None:
        super().__init__()
        self.throttled = throttled

    def put_events(self, *, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        answers = []
        for entry in Entries:
            if json.loads(entry["Detail"])["id"] == self.throttled:
                answers.append({"ErrorCode": "ThrottlingException", "ErrorMessage": "slow down"})
            else:
                self.sent.append(json.loads(entry["Detail"])["id"])
                answers.append({"EventId": "e"})
        return {"FailedEntryCount": 1, "Entries": answers}


class FakeTable:
    """The publisher's DynamoDB client: records quarantines and deletes."""

    def __init__(self) -> None:
        self.quarantined: list[str] = []
        self.deleted: list[str] = []

    def update_item(self, **kwargs: Any) -> dict[str, Any]:
        self.quarantined.append(kwargs["Key"]["SK"]["S"])
        return {}

    def batch_write_item(self, **kwargs: Any) -> dict[str, Any]:
        for requests in kwargs["RequestItems"].values():
            self.deleted.extend(r["DeleteRequest"]["Key"]["SK"]["S"] for r in requests)
        return {"UnprocessedItems": {}}


def _good(seq: str, **overrides: Any) -> tuple[Envelope, dict[str, Any]]:
    envelope = make_envelope(**overrides)
    return envelope, stream_record(outbox_item(PK, envelope), seq)


def _publish(
    bad: Any, events: FakeEvents | None = None
) -> tuple[PublishResult, FakeEvents, FakeTable, list[Envelope]]:
    """Publish [good, bad, good]; returns the result and what each side saw."""
    seqs = sequence_numbers()
    first, first_record = _good(next(seqs))
    bad_record = bad(next(seqs)) if callable(bad) else bad
    last, last_record = _good(next(seqs))
    events = events or FakeEvents()
    table = FakeTable()
    result = publish_stream_batch(
        [first_record, bad_record, last_record],
        PublishDependencies(
            sink=EventBridgeSink(events, "bus"),
            table_name="outbox",
            dynamodb_client=table,
            sleep=lambda _s: None,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )
    return result, events, table, [first, last]


def _assert_good_ones_out(
    result: PublishResult, events: FakeEvents, table: FakeTable, good: list[Envelope]
) -> None:
    assert result.response() == {"batchItemFailures": []}, "the batch must not fail"
    assert events.sent == [envelope.id for envelope in good]
    assert table.deleted == [outbox_sk(envelope.id) for envelope in good]


def _outbox_record(seq: str, item: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return stream_record(item, seq, **kwargs)


def _item(**changes: Any) -> dict[str, Any]:
    envelope = make_envelope()
    item: dict[str, Any] = outbox_item(PK, envelope)
    for name, value in changes.items():
        if value is None:
            item.pop(name, None)
        else:
            item[name] = value
    return item


def _without(record: dict[str, Any], *path: str) -> dict[str, Any]:
    target = record
    for name in path[:-1]:
        target = target[name]
    del target[path[-1]]
    return record


# Records the publisher cannot even attribute to an item: skipped or counted as
# unreadable (logged), never a batch failure. (id, record builder, counter)
UNREADABLE = [
    ("no dynamodb member", lambda seq: _without(_outbox_record(seq, _item()), "dynamodb"), None),
    ("no Keys", lambda seq: _without(_outbox_record(seq, _item()), "dynamodb", "Keys"), None),
    (
        "Keys not a map",
        lambda seq: {
            **_outbox_record(seq, _item()),
            "dynamodb": {"Keys": "PK", "SequenceNumber": seq},
        },
        "unreadable",
    ),
    (
        "outbox SK without PK",
        lambda seq: _outbox_record(seq, _item(), key_names=("SK",)),
        "unreadable",
    ),
    (
        "SK mistyped as a number",
        lambda seq: _outbox_record(seq, _item(), keys={"PK": {"S": PK}, "SK": {"N": "1"}}),
        "skipped",
    ),
    (
        "eventName missing",
        lambda seq: _without(_outbox_record(seq, _item()), "eventName"),
        "skipped",
    ),
    (
        "eventName unknown",
        lambda seq: {**_outbox_record(seq, _item()), "eventName": "UPSERT"},
        "skipped",
    ),
    ("record is a string", lambda seq: "not a record", "skipped"),
    ("record is null", lambda seq: None, "skipped"),
]


@pytest.mark.parametrize(
    ("builder", "counter"), [u[1:] for u in UNREADABLE], ids=[u[0] for u in UNREADABLE]
)
def test_unattributable_stream_records_are_skipped_or_counted(
    builder: Any, counter: str | None
) -> None:
    result, events, table, good = _publish(builder)
    _assert_good_ones_out(result, events, table, good)
    assert table.quarantined == []
    if counter is not None:
        assert getattr(result, counter) == 1
    else:  # no dynamodb/Keys: INSERT without keys is unreadable
        assert result.unreadable == 1


def _poison(**changes: Any) -> Any:
    def build(seq: str) -> dict[str, Any]:
        return _outbox_record(seq, _item(**changes))

    return build


def _huge_envelope_item() -> dict[str, Any]:
    envelope = make_envelope(data={"blob": "x" * BIG})
    return outbox_item(PK, envelope)


# Records of a real outbox item that can never be published: quarantined.
POISON = [
    ("no NewImage", lambda seq: _outbox_record(seq, _item(), view_type="KEYS_ONLY")),
    ("no envelope attribute", _poison(**{ATTR_ENVELOPE: None})),
    ("envelope mistyped as a number", _poison(**{ATTR_ENVELOPE: {"N": "42"}})),
    ("envelope of an unknown type", _poison(**{ATTR_ENVELOPE: {"ZZ": "what"}})),
    (
        "envelope as non-UTF-8 binary",
        _poison(**{ATTR_ENVELOPE: {"B": base64.b64encode(b"\xff\xfe\x00bad").decode()}}),
    ),
    ("envelope not JSON", _poison(**{ATTR_ENVELOPE: {"S": "{oops"}})),
    ("envelope a JSON list", _poison(**{ATTR_ENVELOPE: {"S": "[1, 2]"}})),
    ("envelope with a field missing", _poison(**{ATTR_ENVELOPE: {"S": json.dumps({"id": "x"})}})),
    ("envelope too big for the bus", lambda seq: _outbox_record(seq, _huge_envelope_item())),
]


@pytest.mark.parametrize("builder", [p[1] for p in POISON], ids=[p[0] for p in POISON])
def test_poison_stream_records_are_quarantined(builder: Any) -> None:
    record = builder("100000000000000000000002")
    poison_sk = record["dynamodb"]["Keys"]["SK"]["S"]
    result, events, table, good = _publish(record)
    _assert_good_ones_out(result, events, table, good)
    assert table.quarantined == [poison_sk]
    assert result.quarantined == 1


def test_unknown_attribute_types_elsewhere_in_the_item_are_ignored() -> None:
    seqs = sequence_numbers()
    envelope = make_envelope()
    item = {**outbox_item(PK, envelope), "future": {"ZZ": "new type"}, "n": {"N": "not a number"}}
    events, table = FakeEvents(), FakeTable()
    result = publish_stream_batch(
        [stream_record(item, next(seqs))],
        PublishDependencies(
            sink=EventBridgeSink(events, "bus"),
            table_name="outbox",
            dynamodb_client=table,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )
    assert result.response() == {"batchItemFailures": []}
    assert events.sent == [envelope.id]


def test_empty_stream_batch_is_a_success_and_calls_nothing() -> None:
    events, table = FakeEvents(), FakeTable()
    result = publish_stream_batch(
        [],
        PublishDependencies(
            sink=EventBridgeSink(events, "bus"),
            table_name="outbox",
            dynamodb_client=table,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )
    assert result.response() == {"batchItemFailures": []}
    assert (events.sent, table.deleted, table.quarantined) == ([], [], [])


def test_record_without_sequence_number_is_fine_while_nothing_fails() -> None:
    result, events, table, _ = _publish(lambda _seq: _good(None)[1])  # type: ignore[arg-type]
    assert result.response() == {"batchItemFailures": []}
    assert len(events.sent) == 3
    assert len(table.deleted) == 3


def test_record_without_sequence_number_that_must_be_retried_raises_by_design() -> None:
    """Documented: a retryable failure on a record Lambda cannot be told about fails the batch."""
    seqs = sequence_numbers()
    first, first_record = _good(next(seqs))
    unnamed, unnamed_record = _good(None)  # type: ignore[arg-type]
    last, last_record = _good(next(seqs))
    events, table = FailingEvents(throttled=unnamed.id), FakeTable()
    with pytest.raises(MissingSequenceNumber, match=r"no dynamodb\.SequenceNumber") as raised:
        publish_stream_batch(
            [first_record, unnamed_record, last_record],
            PublishDependencies(
                sink=EventBridgeSink(events, "bus"),
                table_name="outbox",
                dynamodb_client=table,
                table_keys=DEFAULT_TABLE_KEYS,
            ),
        )
    # What went out is deleted (``last`` rode in the same call: its redelivery from
    # the checkpoint is a duplicate); the unnamed event stays pending: nothing lost.
    assert unnamed.id not in events.sent
    assert table.deleted == [outbox_sk(first.id), outbox_sk(last.id)]
    assert raised.value.result.failure_position == 1


# ------------------------------------------------------------------ the consumer


@pytest.fixture
def idempotency_store() -> Iterator[tuple[DynamoDBPersistenceLayer, Any]]:
    with aws_environment():
        import boto3

        client = boto3.client("dynamodb")
        create_idempotency_table(client, IDEMPOTENCY_TABLE)
        yield DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=client), client


BAD_BODIES = [
    ("not JSON", "this is not JSON"),
    ("JSON null", "null"),
    ("JSON string", json.dumps("an envelope?")),
    ("JSON list", json.dumps([1, 2, 3])),
    ("JSON object, not an envelope", json.dumps({"order": 1})),
    ("envelope with a bad id", json.dumps({**make_envelope().to_dict(), "id": "not-a-ulid"})),
    (
        "detail-type does not match",
        eventbridge_body(make_envelope(), detail_type="SomethingElse"),
    ),
    (
        "SNS notification with a non-string Message",
        json.dumps({"Type": "Notification", "Message": 1}),
    ),
    ("enormous, not JSON", "x" * (2 * 1024 * 1024)),
    ("enormous JSON, not an envelope", json.dumps({"blob": "y" * (1024 * 1024)})),
    ("empty", ""),
]


@pytest.mark.parametrize("body", [b[1] for b in BAD_BODIES], ids=[b[0] for b in BAD_BODIES])
def test_bad_sqs_bodies_fail_alone(
    body: str, idempotency_store: tuple[DynamoDBPersistenceLayer, Any]
) -> None:
    store, _client = idempotency_store
    good = [make_envelope(subject=f"ORDER#{n}") for n in range(2)]
    records = [
        sqs_record(eventbridge_body(good[0])),
        sqs_record(body),
        sqs_record(eventbridge_body(good[1])),
    ]
    seen: list[str] = []
    response = process_sqs_batch(
        sqs_event(records),
        lambda envelope: seen.append(envelope.id),
        persistence_store=store,
        consumer_name=CONSUMER,
        lambda_context=FakeLambdaContext(),
    )
    assert response == {"batchItemFailures": [{"itemIdentifier": records[1]["messageId"]}]}
    assert seen == [envelope.id for envelope in good]


def test_body_missing_or_not_a_string_fails_alone(
    idempotency_store: tuple[DynamoDBPersistenceLayer, Any],
) -> None:
    store, _client = idempotency_store
    good = make_envelope()
    no_body = sqs_record("x")
    del no_body["body"]
    number_body = {**sqs_record("x"), "body": 12}
    records = [no_body, number_body, sqs_record(eventbridge_body(good))]
    seen: list[str] = []
    response = process_sqs_batch(
        sqs_event(records),
        lambda envelope: seen.append(envelope.id),
        persistence_store=store,
        consumer_name=CONSUMER,
        lambda_context=FakeLambdaContext(),
    )
    assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == [
        records[0]["messageId"],
        records[1]["messageId"],
    ]
    assert seen == [good.id]


def test_empty_sqs_batch_is_a_success(
    idempotency_store: tuple[DynamoDBPersistenceLayer, Any],
) -> None:
    store, _client = idempotency_store
    response = process_sqs_batch(
        {"Records": []},
        lambda _e: None,
        persistence_store=store,
        consumer_name=CONSUMER,
        lambda_context=FakeLambdaContext(),
    )
    assert response == {"batchItemFailures": []}


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"Records": None},
        {"Records": "not a list"},
        {"Records": [{"body": "{}"}]},
        {"Records": [{"messageId": "", "body": "{}"}]},
        {"Records": ["not a record"]},
    ],
    ids=["no Records", "Records null", "Records a string", "no messageId", "empty id", "not a map"],
)
def test_sqs_batch_that_cannot_be_answered_per_record_raises_by_design(
    event: Any, idempotency_store: tuple[DynamoDBPersistenceLayer, Any]
) -> None:
    """Documented: without a messageId a record cannot be reported alone; the batch fails."""
    store, _client = idempotency_store
    ran: list[Envelope] = []
    with pytest.raises(MalformedBatch):
        process_sqs_batch(event, ran.append, persistence_store=store, consumer_name=CONSUMER)
    assert ran == []


def test_bad_messages_end_in_the_dlq_and_good_ones_take_effect_once() -> None:
    """Through the real queue, redrive and reference consumer: poison -> DLQ after 5 receives."""
    # What the queue takes (the pipeline's queues are the module's size).
    bodies = [
        body for _name, body in BAD_BODIES if body and len(body.encode()) <= QUEUE_MAX_MESSAGE_BYTES
    ]
    good = [make_envelope(subject=f"ORDER#{n}") for n in range(3)]
    with pipeline(
        FaultPlan(rates={}, rnd=__import__("random").Random(0)), stream_batch_size=100
    ) as p:
        for body in [eventbridge_body(good[0]), *bodies, eventbridge_body(good[1])]:
            p.sqs.send_message(QueueUrl=p.queue_url, MessageBody=body)
        p.sqs.send_message(QueueUrl=p.queue_url, MessageBody=eventbridge_body(good[2]))
        p.sqs.send_message(QueueUrl=p.queue_url, MessageBody=eventbridge_body(good[2]))  # dup
        p.drain()
        assert p.ledger() == {envelope.id: 1 for envelope in good}
        assert sorted(p.take_all(p.dlq_url)) == sorted(bodies)
        assert p.queue_depth(p.queue_url) == 0
        assert max(inv.attempt for inv in p.consumer.invocations) == MAX_RECEIVE_COUNT
        _assert_no_whole_batch_failure(p)


def _assert_no_whole_batch_failure(p: Pipeline) -> None:
    assert all(inv.outcome != "failure" for inv in p.consumer.invocations)


# ------------------------------------------------------------------ the writer


class NoCalls:
    """A DynamoDB client that must not be called: the writer refuses before sending."""

    def transact_write_items(self, **kwargs: Any) -> Any:
        raise AssertionError("the writer sent a request it should have refused")


def _writer() -> OutboxWriter:
    return OutboxWriter("outbox", NoCalls(), source="app.orders")


def test_oversized_entity_is_refused_before_sending() -> None:
    writer = _writer()
    entity = {"PK": PK, "SK": "META", "blob": "x" * (401 * 1024)}
    with pytest.raises(ItemTooLarge, match="over DynamoDB's item limit") as raised:
        writer.write(entity, writer.new_event(entity, "OrderPlaced", {}))
    assert raised.value.index == 0


def test_event_too_big_for_the_bus_is_refused_before_sending() -> None:
    writer = _writer()
    entity = {"PK": PK, "SK": "META"}
    with pytest.raises(EventTooLarge, match="could never be published") as raised:
        writer.write(entity, writer.new_event(entity, "OrderPlaced", {"blob": "x" * BIG}))
    assert raised.value.index == 1


def test_too_many_actions_are_refused_before_sending() -> None:
    writer = _writer()
    entity = {"PK": PK, "SK": "META"}
    extra = [put_action({"PK": f"OTHER#{n}", "SK": "X"}) for n in range(MAX_TRANSACTION_ACTIONS)]
    with pytest.raises(TooManyActions, match="at most 100") as raised:
        writer.write(entity, writer.new_event(entity, "OrderPlaced", {}), extra_actions=extra)
    assert raised.value.actual == MAX_TRANSACTION_ACTIONS + 2


def test_too_many_events_are_refused_before_sending() -> None:
    writer = _writer()
    entity = {"PK": PK, "SK": "META"}
    events = [writer.new_event(entity, "OrderPlaced", {"n": n}) for n in range(100)]
    with pytest.raises(TooManyActions):
        writer.write(entity, events)


def test_transaction_over_4_mb_is_refused_before_sending() -> None:
    writer = _writer()
    entity = {"PK": PK, "SK": "META", "blob": "x" * (390 * 1024)}
    extra = [
        put_action({"PK": f"OTHER#{n}", "SK": "X", "blob": "y" * (390 * 1024)}) for n in range(10)
    ]
    with pytest.raises(TransactionTooLarge, match="4194304"):
        writer.write(entity, writer.new_event(entity, "OrderPlaced", {}), extra_actions=extra)


@pytest.mark.parametrize(
    "entity",
    [{"SK": "META"}, {"PK": "", "SK": "META"}, {"PK": PK, "SK": "OUTBOX#1"}, "not a map"],
    ids=["no PK", "empty PK", "SK in the outbox prefix", "not a mapping"],
)
def test_malformed_entities_are_refused_before_sending(entity: Any) -> None:
    writer = _writer()
    with pytest.raises(InvalidWrite):
        writer.write(entity, make_envelope())


# DynamoDB refuses S values that are not valid UTF-8, so a real stream cannot carry
# a lone surrogate; a hand-built or replayed event can, and must not fail the batch.
def test_envelope_that_cannot_be_encoded_as_utf8_is_quarantined_not_a_batch_failure() -> None:
    envelope = make_envelope()
    body = json.dumps({**envelope.to_dict(), "data": {"note": "\udcff"}}, ensure_ascii=False)
    item = {**outbox_item(PK, envelope), ATTR_ENVELOPE: {"S": body}}
    record = _outbox_record("100000000000000000000002", item)
    result, events, table, good = _publish(record)
    _assert_good_ones_out(result, events, table, good)
    assert table.quarantined == [outbox_sk(envelope.id)]
