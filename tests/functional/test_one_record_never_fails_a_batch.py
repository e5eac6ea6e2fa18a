"""Whatever one record raises, it alone is set aside: its neighbours go through.

Each test pins a hole an outside review found, on moto (so botocore really
builds and serialises the requests): an envelope ``time`` whose UTC conversion
overflows, JSON nested 50,000 levels deep, a request the SDK cannot build for
one entry, a quarantine write DynamoDB refuses, and characters SQS refuses.
The bad record sits between good ones; the good ones must be published (or
processed) once, and the bad one quarantined (or failed alone) with a reason.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

from dynamodb_outbox.consumer import process_sqs_batch
from dynamodb_outbox.envelope import Envelope, InvalidEnvelope
from dynamodb_outbox.event_ids import event_id_at
from dynamodb_outbox.outbox_item import ATTR_ENVELOPE, outbox_item
from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies, PublishResult
from dynamodb_outbox.sinks import EventBridgeSink
from dynamodb_outbox.sweeper import sweep
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from dynamodb_outbox.writer import InvalidWrite, OutboxWriter
from tests.factories import make_envelope, sequence_numbers, stream_record
from tests.functional.conftest import PENDING_INDEX, EventBus, OutboxTable
from tests.functional.consumer_fixtures import eventbridge_body, failure_ids, sqs_event, sqs_record
from tests.support.aws_errors import client_error
from tests.support.lambda_context import FakeLambdaContext
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table

PK = "ORDER#1001"
OVERFLOWING_TIME = "0001-01-01T00:00:00+01:00"
DEEP = 50_000  # levels: about 100 KB of JSON


def _deep_json(levels: int) -> str:
    return "[" * levels + "]" * levels


def _hand_written(envelope_json: str, event_id: str | None = None) -> dict[str, Any]:
    """An outbox item as an older writer or a person might have put it: unchecked JSON."""
    event_id = event_id or event_id_at(int(datetime.now(UTC).timestamp() * 1000), bytes(10))
    item = outbox_item(PK, make_envelope(id=event_id))
    item[ATTR_ENVELOPE] = {"S": envelope_json}
    return item


def _envelope_json(**changes: Any) -> tuple[str, str]:
    """A valid envelope's JSON with ``changes`` spliced in (raw text), and its id."""
    data = make_envelope().to_dict()
    text = json.dumps({**data, **{name: "@@" + name for name in changes}})
    for name, raw in changes.items():
        text = text.replace(json.dumps("@@" + name), raw)
    return text, data["id"]


def _publish_between_good_ones(
    table: OutboxTable, bad_item: dict[str, Any], sink: Any
) -> tuple[PublishResult, list[Envelope]]:
    seqs = sequence_numbers()
    first, last = make_envelope(), make_envelope()
    items = [outbox_item(PK, first), bad_item, outbox_item(PK, last)]
    for item in items:
        table.put(item)
    records = [stream_record(item, next(seqs)) for item in items]
    result = publish_stream_batch(
        records,
        PublishDependencies(
            sink=sink,
            table_name=table.name,
            dynamodb_client=table.client,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )
    return result, [first, last]


def _quarantine_reason(table: OutboxTable, item: dict[str, Any]) -> str:
    stored = table.get({"PK": item["PK"], "SK": item["SK"]})
    assert stored is not None, "a poison item stays in the table"
    assert stored["outbox_status"] == {"S": "QUARANTINED"}
    assert "outbox_pending_shard" not in stored
    reason: str = stored["quarantine_reason"]["S"]
    return reason


# ------------------------------------------------------------------ envelope time


def test_a_time_whose_utc_conversion_overflows_is_refused_by_the_envelope() -> None:
    with pytest.raises(InvalidEnvelope, match="outside the years 1 to 9999"):
        make_envelope(time=OVERFLOWING_TIME)
    with pytest.raises(InvalidEnvelope, match="outside the years 1 to 9999"):
        make_envelope(time="9999-12-31T23:59:59-01:00")
    assert make_envelope(time="0001-01-01T00:00:00+00:00").utc_time.year == 1


def test_publisher_quarantines_an_overflowing_time_and_the_batch_goes_on(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    text, event_id = _envelope_json(time=json.dumps(OVERFLOWING_TIME))
    bad = _hand_written(text, event_id)

    result, good = _publish_between_good_ones(
        outbox_table, bad, EventBridgeSink(event_bus.client, event_bus.name)
    )

    assert result.response() == {"batchItemFailures": []}
    assert sorted(event_bus.received_ids()) == sorted(e.id for e in good)
    assert "outside the years 1 to 9999" in _quarantine_reason(outbox_table, bad)
    assert outbox_table.sort_keys() == {bad["SK"]["S"]}, "the good ones were deleted"


def test_sweeper_quarantines_an_overflowing_time_and_recovers_everything_after_it(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    """Before: every run raised at that item, never marked it, re-sent what preceded it."""
    base = int((datetime.now(UTC) - timedelta(hours=1)).timestamp() * 1000)
    ids = [event_id_at(base + n, bytes(10)) for n in range(5)]
    bad_text, _ = _envelope_json(time=json.dumps(OVERFLOWING_TIME), id=json.dumps(ids[2]))
    good = [make_envelope(id=event_id) for event_id in ids[:2] + ids[3:]]
    for envelope in good:
        outbox_table.put(outbox_item(PK, envelope))
    bad = _hand_written(bad_text, ids[2])
    outbox_table.put(bad)

    for _ in range(2):  # a second run finds nothing left to do
        result = sweep(
            PublishDependencies(
                sink=EventBridgeSink(event_bus.client, event_bus.name),
                table_name=outbox_table.name,
                dynamodb_client=outbox_table.client,
                table_keys=DEFAULT_TABLE_KEYS,
            ),
            index_name=PENDING_INDEX,
            min_age_seconds=0,
        )
        assert result.failure_sk is None

    assert sorted(event_bus.received_ids()) == sorted(e.id for e in good), "each sent once"
    assert "outside the years 1 to 9999" in _quarantine_reason(outbox_table, bad)
    assert outbox_table.sort_keys() == {bad["SK"]["S"]}


# ------------------------------------------------------------------ deep nesting


def test_writer_refuses_data_nested_deeper_than_the_envelope_allows() -> None:
    nested: Any = {}
    for _ in range(100):
        nested = {"n": nested}
    with pytest.raises(InvalidWrite, match="nests deeper than 99 levels"):
        OutboxWriter("t", client=object(), source="app").new_event(PK, "T", nested)
    very_deep: Any = []
    for _ in range(DEEP):
        very_deep = [very_deep]
    with pytest.raises(InvalidWrite, match="nests deeper"):
        OutboxWriter("t", client=object(), source="app").new_event(PK, "T", {"v": very_deep})


def test_writer_refuses_an_entity_nested_deeper_than_dynamodb_allows() -> None:
    entity: dict[str, Any] = {"PK": PK, "SK": "META"}
    node = entity
    for _ in range(DEEP):
        node["n"] = {}
        node = node["n"]
    writer = OutboxWriter("t", client=object(), source="app")
    with pytest.raises(InvalidWrite, match="nests deeper than DynamoDB's 32 levels"):
        writer.write(entity, writer.new_event(PK, "T", {}))


def test_publisher_and_sweeper_quarantine_an_envelope_nested_50000_levels(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    text, event_id = _envelope_json(data=json.dumps({"v": "@@deep"}))
    text = text.replace('"@@deep"', _deep_json(DEEP))
    assert len(text) > 100_000
    bad = _hand_written(text, event_id)
    sink = EventBridgeSink(event_bus.client, event_bus.name)

    result, good = _publish_between_good_ones(outbox_table, bad, sink)

    assert result.response() == {"batchItemFailures": []}
    assert sorted(event_bus.received_ids()) == sorted(e.id for e in good)
    assert "nests deeper than 100 levels" in _quarantine_reason(outbox_table, bad)

    # The same item, found by the sweeper instead (stream record lost).
    bad_again = _hand_written(text.replace(event_id, event_id[:-1] + "0"), event_id[:-1] + "0")
    outbox_table.put(bad_again)
    swept = sweep(
        PublishDependencies(
            sink=sink,
            table_name=outbox_table.name,
            dynamodb_client=outbox_table.client,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
        index_name=PENDING_INDEX,
        min_age_seconds=0,
    )
    assert swept.publish.quarantined == 1 and swept.failure_sk is None
    assert "nests deeper" in _quarantine_reason(outbox_table, bad_again)


def test_consumer_fails_only_the_message_nested_50000_levels(dynamodb_client: Any) -> None:
    create_idempotency_table(dynamodb_client)
    store = DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb_client)
    first, last = make_envelope(), make_envelope()
    poison = sqs_record('{"detail-type":"T","detail":' + _deep_json(DEEP) + "}")
    records = [sqs_record(eventbridge_body(first)), poison, sqs_record(eventbridge_body(last))]
    seen: list[str] = []

    response = process_sqs_batch(
        sqs_event(records),  # type: ignore[arg-type]
        lambda envelope: seen.append(envelope.id),
        persistence_store=store,
        consumer_name="orders",
        lambda_context=FakeLambdaContext(),  # type: ignore[arg-type]
    )

    assert failure_ids(response) == [poison["messageId"]]
    assert seen == [first.id, last.id]


# ------------------------------------------------- requests that cannot be built


class SdkCannotBuild:
    """PutEvents whose request cannot be built while a given event id is among the entries.

    Stands for any exception botocore (or a bug of ours) raises on one entry
    while building the request: nothing is sent for the whole call.
    """

    def __init__(self, real: Any, poisoned_id: str, error: Exception) -> None:
        self.real = real
        self.poisoned_id = poisoned_id
        self.error = error
        self.calls = 0

    def put_events(self, *, Entries: list[dict[str, Any]]) -> Any:
        self.calls += 1
        if any(json.loads(entry["Detail"])["id"] == self.poisoned_id for entry in Entries):
            raise self.error
        return self.real.put_events(Entries=Entries)


@pytest.mark.parametrize(
    "error",
    [
        OverflowError("date value out of range"),
        RecursionError("maximum recursion depth exceeded"),
        UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"),
        TypeError("unexpected type"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_an_entry_the_request_cannot_be_built_for_is_quarantined_alone(
    outbox_table: OutboxTable, event_bus: EventBus, error: Exception
) -> None:
    victim = make_envelope()
    events = SdkCannotBuild(event_bus.client, victim.id, error)

    result, good = _publish_between_good_ones(
        outbox_table, outbox_item(PK, victim), EventBridgeSink(events, event_bus.name)
    )

    assert result.response() == {"batchItemFailures": []}
    assert sorted(event_bus.received_ids()) == sorted(e.id for e in good)
    reason = _quarantine_reason(outbox_table, outbox_item(PK, victim))
    assert f"no PutEvents request can be built for it: {type(error).__name__}" in reason
    assert events.calls == 4, "the failed call, then each of its three entries on its own"


def test_aws_answering_a_call_with_an_error_still_holds_the_batch(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    """The one whole-batch failure left: AWS itself refuses or cannot be reached."""
    refused = make_envelope()
    events = SdkCannotBuild(event_bus.client, refused.id, client_error("InternalException", "x"))

    result, _ = _publish_between_good_ones(
        outbox_table, outbox_item(PK, refused), EventBridgeSink(events, event_bus.name)
    )

    assert result.failure_position == 0, "checkpoint at the first entry of the failed call"
    assert result.quarantined == 0
    assert event_bus.received_ids() == []


# -------------------------------------------------------- quarantine DynamoDB refuses


class QuarantineRefused:
    """The table client, whose UpdateItem (the quarantine marker) DynamoDB refuses."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def update_item(self, **kwargs: Any) -> Any:
        raise client_error("ValidationException", "UpdateItem")


def test_a_quarantine_write_dynamodb_refuses_never_holds_the_batch(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    seqs = sequence_numbers()
    first, last = make_envelope(), make_envelope()
    text, event_id = _envelope_json(time=json.dumps("not a time"))
    items = [outbox_item(PK, first), _hand_written(text, event_id), outbox_item(PK, last)]
    for item in items:
        outbox_table.put(item)

    result = publish_stream_batch(
        [stream_record(item, next(seqs)) for item in items],
        PublishDependencies(
            sink=EventBridgeSink(event_bus.client, event_bus.name),
            table_name=outbox_table.name,
            dynamodb_client=QuarantineRefused(outbox_table.client),
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )

    assert result.response() == {"batchItemFailures": []}
    assert result.quarantine_unmarkable == 1
    assert sorted(event_bus.received_ids()) == sorted([first.id, last.id])
    assert items[1]["SK"]["S"] in outbox_table.pending_sort_keys(), "left for an operator"


# ------------------------------------------------------- characters SQS refuses


@pytest.mark.parametrize("character", ["\ufffe", "\uffff", "\ud800", "\udfff"])
def test_characters_sqs_refuses_are_refused_by_the_writer(character: str) -> None:
    writer = OutboxWriter("t", client=object(), source="app")
    with pytest.raises(InvalidWrite, match="SQS refuses"):
        writer.new_event(PK, "T", {"note": f"a{character}b"})
    with pytest.raises(InvalidWrite, match="SQS refuses"):
        writer.new_event(PK, "T", {f"k{character}": 1})


def test_an_escaped_noncharacter_in_a_stored_envelope_is_quarantined(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    """Escaping does not help: the bus decodes the JSON and delivers the character raw."""
    text, event_id = _envelope_json(data=json.dumps({"note": "\ufffe"}))
    assert "\\ufffe" in text
    bad = _hand_written(text, event_id)

    result, good = _publish_between_good_ones(
        outbox_table, bad, EventBridgeSink(event_bus.client, event_bus.name)
    )

    assert result.response() == {"batchItemFailures": []}
    assert sorted(event_bus.received_ids()) == sorted(e.id for e in good)
    assert "U+FFFE" in _quarantine_reason(outbox_table, bad)
