"""The stream publisher on the ordered path sends a subject's lower pending sequences first.

Stream records of two outbox items are ordered by nothing AWS documents (per
item only; a partition split, a batch the mapping gave up on, one
transaction's records interleaved). So before an event whose subject has a
lower ``sequence`` still pending, the publisher reads that one by key and sends
it first. Only when it cannot be read is the event left pending for the sweeper
(if one runs) or the batch stopped at it (docs/decisions.md, "What "in order
per subject" means on the ordered path").
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError

from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.outbox_item import outbox_item, outbox_sk
from dynamodb_outbox.publisher import publish_stream_batch, record_metrics
from dynamodb_outbox.publishing import PublishDependencies, PublishResult
from dynamodb_outbox.settings import (
    ENV_SWEEPER_ENABLED,
    ConfigurationError,
    sweeper_enabled_from_environment,
)
from dynamodb_outbox.sinks import EventBridgeSink, SnsSink
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from tests.factories import make_envelope, outbox_stream_record, sequence_numbers
from tests.functional.outbox_helpers import FIXED_NOW, PK, RecordingEvents, ulid_at
from tests.functional.test_settle_requests_match_policy import _record_requests

if TYPE_CHECKING:
    from tests.functional.conftest import EventBus, OutboxTable, SnsTopic

OLD = FIXED_NOW - timedelta(minutes=10)


def committed(
    table: OutboxTable, event_type: str, sequence: int | None, made_at: Any = OLD
) -> Envelope:
    envelope = make_envelope(
        type=event_type, subject=PK, id=ulid_at(made_at), data={}, sequence=sequence
    )
    table.put(outbox_item(PK, envelope))
    return envelope


def records(*envelopes: Envelope) -> list[dict[str, Any]]:
    seqs = sequence_numbers()
    return [outbox_stream_record(envelope, PK, next(seqs)) for envelope in envelopes]


def publish(
    table: OutboxTable,
    topic: SnsTopic,
    batch: list[dict[str, Any]],
    *,
    client: Any = None,
    sweeper_runs: bool = True,
) -> PublishResult:
    return publish_stream_batch(
        batch,  # type: ignore[arg-type]
        PublishDependencies(
            sink=SnsSink(topic.client, topic.arn),
            table_name=table.name,
            dynamodb_client=client or table.client,
            sleep=lambda _: None,
            clock=lambda: FIXED_NOW,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
        sweeper_runs=sweeper_runs,
    )


class Failing:
    """The table's client, with one operation answering an error (or leaving keys unread)."""

    def __init__(self, real: Any, operation: str, code: str = "ThrottlingException") -> None:
        self.real, self.operation, self.code = real, operation, code

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def query(self, **request: Any) -> Any:
        if self.operation == "query":
            raise ClientError({"Error": {"Code": self.code, "Message": "no"}}, "Query")
        return self.real.query(**request)

    def batch_get_item(self, **request: Any) -> Any:
        if self.operation == "unread":
            return {"Responses": {}, "UnprocessedKeys": request["RequestItems"]}
        return self.real.batch_get_item(**request)


def delivered_types(topic: SnsTopic) -> list[str]:
    return [json.loads(message.body)["type"] for message in topic.received()]


def test_an_event_whose_lower_sequence_was_left_behind_sends_it_first(
    outbox_table: OutboxTable, sns_fifo_topic: SnsTopic
) -> None:
    # GIVEN OrderCreated (1) pending: its stream batch was given up on; then
    # OrderPaid (2) comes down the stream
    committed(outbox_table, "OrderCreated", 1)
    paid = committed(outbox_table, "OrderPaid", 2, OLD + timedelta(seconds=1))

    result = publish(outbox_table, sns_fifo_topic, records(paid))

    # THEN OrderCreated is read by key and sent first, then OrderPaid; both settled
    assert delivered_types(sns_fifo_topic) == ["OrderCreated", "OrderPaid"]
    assert result.response() == {"batchItemFailures": []}
    assert (result.deferred, result.sent_first, result.published) == (0, 1, 2)
    assert outbox_table.pending_sort_keys() == set()


def test_records_of_one_subject_out_of_sequence_in_a_batch_go_in_sequence_order_once(
    outbox_table: OutboxTable, sns_fifo_topic: SnsTopic
) -> None:
    # One transaction's records may come in any order: 2 before 1
    created = committed(outbox_table, "OrderCreated", 1)
    paid = committed(outbox_table, "OrderPaid", 2)

    result = publish(outbox_table, sns_fifo_topic, records(paid, created))

    assert delivered_types(sns_fifo_topic) == ["OrderCreated", "OrderPaid"]
    assert (result.deferred, result.published) == (0, 2)
    assert outbox_table.pending_sort_keys() == set()


@pytest.mark.parametrize("sweeper_runs", [True, False])
def test_a_lower_sequence_left_unread_defers_to_a_sweeper_or_stops_the_batch_without_one(
    outbox_table: OutboxTable, sns_fifo_topic: SnsTopic, sweeper_runs: bool
) -> None:
    # GIVEN OrderCreated (1) pending and a BatchGetItem that leaves it unprocessed
    committed(outbox_table, "OrderCreated", 1)
    plain = committed(outbox_table, "Noted", None)
    paid = committed(outbox_table, "OrderPaid", 2, OLD + timedelta(seconds=1))
    batch = records(plain, paid)

    result = publish(
        outbox_table,
        sns_fifo_topic,
        batch,
        client=Failing(outbox_table.client, "unread"),
        sweeper_runs=sweeper_runs,
    )

    # THEN the event before it goes; OrderPaid waits for the sweeper, or, with no
    # sweeper to send it ever, fails its record so the stream retries it
    assert delivered_types(sns_fifo_topic) == ["Noted"]
    assert outbox_sk(paid.id) in outbox_table.pending_sort_keys()
    if sweeper_runs:
        assert (result.deferred, result.response()) == (1, {"batchItemFailures": []})
    else:
        failed = batch[1]["dynamodb"]["SequenceNumber"]
        assert result.deferred == 0
        assert result.response() == {"batchItemFailures": [{"itemIdentifier": failed}]}


@pytest.mark.parametrize(
    "code", ["ProvisionedThroughputExceededException", "AccessDeniedException"]
)
def test_a_failed_partition_query_stops_the_batch_at_the_sequenced_record_only(
    outbox_table: OutboxTable, sns_fifo_topic: SnsTopic, code: str
) -> None:
    plain = committed(outbox_table, "Noted", None)
    sequenced = committed(outbox_table, "OrderCreated", 1)
    batch = records(plain, sequenced)

    result = publish(
        outbox_table, sns_fifo_topic, batch, client=Failing(outbox_table.client, "query", code)
    )

    # THEN the unsequenced event before it is published; Lambda retries from the other
    assert delivered_types(sns_fifo_topic) == ["Noted"]
    failed = batch[1]["dynamodb"]["SequenceNumber"]
    assert result.response() == {"batchItemFailures": [{"itemIdentifier": failed}]}
    assert result.sequence_read_failures == 1
    assert outbox_table.pending_sort_keys() == {outbox_sk(sequenced.id)}


def test_a_busy_subject_stays_on_the_stream_path_after_one_missed_event(
    outbox_table: OutboxTable, sns_fifo_topic: SnsTopic
) -> None:
    # GIVEN event 1's stream batch was given up on (it stays pending); events 2..20
    # come down the stream one by one, each while a lower one might still be pending
    committed(outbox_table, "E1", 1, OLD)
    sent_by_stream = []
    for n in range(2, 21):
        event = committed(outbox_table, f"E{n}", n, OLD + timedelta(seconds=n))
        result = publish(outbox_table, sns_fifo_topic, records(event))
        sent_by_stream.append(result.published)

    # THEN the first one sends E1 first, and every later event goes at once, in order
    assert sent_by_stream == [2] + [1] * 18
    received = [int(kind[1:]) for kind in delivered_types(sns_fifo_topic)]
    assert received == list(range(1, 21))


def test_a_subjects_events_in_sequence_order_go_out_together_for_one_query(
    outbox_table: OutboxTable, sns_fifo_topic: SnsTopic
) -> None:
    created = committed(outbox_table, "OrderCreated", 1)
    paid = committed(outbox_table, "OrderPaid", 2)
    queries = _record_requests(outbox_table.client, "Query")

    result = publish(outbox_table, sns_fifo_topic, records(created, paid))

    assert delivered_types(sns_fifo_topic) == ["OrderCreated", "OrderPaid"]
    assert (result.deferred, result.published) == (0, 2)
    assert len(queries) == 1


def test_unsequenced_events_and_unordered_sinks_read_nothing_more(
    outbox_table: OutboxTable, sns_fifo_topic: SnsTopic, event_bus: EventBus
) -> None:
    plain = committed(outbox_table, "OrderCreated", None)
    queries = _record_requests(outbox_table.client, "Query")

    assert publish(outbox_table, sns_fifo_topic, records(plain)).published == 1
    sequenced = committed(outbox_table, "OrderPaid", 2)
    committed(outbox_table, "OrderCreated", 1)
    result = publish_stream_batch(
        records(sequenced),  # type: ignore[arg-type]
        PublishDependencies(
            sink=EventBridgeSink(RecordingEvents(event_bus.client), event_bus.name),
            table_name=outbox_table.name,
            dynamodb_client=outbox_table.client,
            sleep=lambda _: None,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )

    assert (result.published, result.deferred) == (1, 0)  # EventBridge keeps no order
    assert queries == []


@pytest.mark.parametrize(
    ("value", "runs"), [("true", True), ("false", False), ("", False), (None, False)]
)
def test_the_publisher_knows_whether_a_sweeper_runs_from_its_environment(
    value: str | None, runs: bool
) -> None:
    environ = {} if value is None else {ENV_SWEEPER_ENABLED: value}
    assert sweeper_enabled_from_environment(environ) is runs


def test_a_bad_sweeper_enabled_value_is_an_error_naming_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="OUTBOX_SWEEPER_ENABLED must be true or false"):
        sweeper_enabled_from_environment({ENV_SWEEPER_ENABLED: "yes"})


def test_deferred_and_sent_first_events_are_metrics_not_only_logs() -> None:
    recorded: dict[str, float] = {}

    class Target:
        def add_metric(self, *, name: str, unit: Any, value: float) -> None:
            recorded[name] = value

    result = PublishResult(deferred=2, sent_first=3, sequence_read_failures=1)
    record_metrics(result, Target())  # type: ignore[arg-type]
    assert (
        recorded["DeferredEvents"],
        recorded["SentFirstEvents"],
        recorded["SequenceReadFailures"],
    ) == (2, 3, 1)
