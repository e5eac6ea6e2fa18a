"""The consumer toolkit on moto: partial batch responses, poison isolation, FIFO
order and idempotency keyed by the event id (Powertools on a real DynamoDB API).

Each test names the AWS rule or the promise it holds the code to (see
docs/aws-semantics.md, "Partial batch responses" and "Lambda ESM for SQS").
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import (
    SqsFifoPartialProcessor,
    process_partial_response,
)
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
)

from dynamodb_outbox.consumer import (
    MalformedBatch,
    OutboxConsumer,
    PartialBatchResponse,
    process_sqs_batch,
)
from dynamodb_outbox.consumer._processing import (
    METRIC_DUPLICATE,
    METRIC_FAILED,
    METRIC_PROCESSED,
)
from dynamodb_outbox.envelope import Envelope
from tests.factories import make_envelope
from tests.functional.consumer_fixtures import (
    FIFO_QUEUE_ARN,
    Recorder,
    envelopes,
    eventbridge_body,
    failure_ids,
    idempotency_records,
    redelivered,
    sns_notification_body,
    sns_raw_body,
    sqs_event,
    sqs_record,
)
from tests.support.lambda_context import FakeLambdaContext
from tests.support.moto_tables import IDEMPOTENCY_TABLE, create_idempotency_table

CONSUMER = "orders-consumer"


@pytest.fixture
def table(dynamodb_client: Any) -> str:
    return create_idempotency_table(dynamodb_client)


def new_store(dynamodb_client: Any) -> DynamoDBPersistenceLayer:
    """A persistence layer as one Lambda execution environment holds it."""
    return DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=dynamodb_client)


@pytest.fixture
def store(table: str, dynamodb_client: Any) -> DynamoDBPersistenceLayer:
    return new_store(dynamodb_client)


def run(
    store: DynamoDBPersistenceLayer,
    records: list[dict[str, Any]],
    process_one: Callable[[Envelope], object],
    *,
    consumer_name: str = CONSUMER,
    context: FakeLambdaContext | None = None,
) -> PartialBatchResponse:
    """One invocation of the consumer on ``records``, with a Lambda context."""
    return process_sqs_batch(
        sqs_event(records),  # type: ignore[arg-type]
        process_one,
        persistence_store=store,
        consumer_name=consumer_name,
        lambda_context=context or FakeLambdaContext(),  # type: ignore[arg-type]
    )


# --------------------------------------------------------------------------- poison


POISON_BODIES = {
    "not JSON": "this is not json {",
    "JSON, not an object": json.dumps(["a", "list"]),
    "object, not an envelope": json.dumps({"hello": "world"}),
    "envelope with a bad id": json.dumps({**make_envelope().to_dict(), "id": "not-a-ulid"}),
    "EventBridge event whose detail is no envelope": json.dumps(
        {"detail-type": "OrderPlaced", "detail": {"order": 1}}
    ),
}


@pytest.mark.parametrize("poison", POISON_BODIES.values(), ids=POISON_BODIES.keys())
def test_batch_of_ten_with_one_poison_message_returns_only_the_poison_and_runs_the_nine_once(
    store: DynamoDBPersistenceLayer, poison: str
) -> None:
    # GIVEN a batch of ten messages, the sixth of which is not a valid event
    events = envelopes(9)
    records = [sqs_record(eventbridge_body(event)) for event in events]
    poison_record = sqs_record(poison)
    records.insert(5, poison_record)
    recorder = Recorder()

    # WHEN the consumer handles the batch, then the poison comes back alone (as SQS does)
    first = run(store, records, recorder)
    second = run(store, [redelivered(poison_record)], recorder)

    # THEN only the poison is reported, both times, by its messageId
    assert first == {"batchItemFailures": [{"itemIdentifier": poison_record["messageId"]}]}
    assert failure_ids(second) == [poison_record["messageId"]]
    # AND each of the nine good events took effect exactly once
    assert recorder.effects == {event.id: 1 for event in events}


def test_poison_message_is_logged_with_its_message_id_and_the_reason(
    store: DynamoDBPersistenceLayer, caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN a message whose body is not JSON
    record = sqs_record("not json", receive_count=3)

    # WHEN the consumer handles it
    with caplog.at_level(logging.INFO):
        run(store, [record], Recorder())

    # THEN one structured log line names the message and says why it failed
    lines = [r for r in caplog.records if getattr(r, "message_id", None) == record["messageId"]]
    assert len(lines) == 1
    assert lines[0].levelno == logging.ERROR
    assert "not valid JSON" in lines[0].reason  # type: ignore[attr-defined]
    assert lines[0].receive_count == "3"  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- idempotency


def test_redelivered_event_is_skipped_and_reported_as_success(
    store: DynamoDBPersistenceLayer,
) -> None:
    # GIVEN an event the consumer already processed
    event = make_envelope()
    recorder = Recorder()
    assert run(store, [sqs_record(eventbridge_body(event))], recorder) == {"batchItemFailures": []}

    # WHEN the same event arrives again in another message (EventBridge retry, sweeper re-publish)
    response = run(store, [sqs_record(eventbridge_body(event))], recorder)

    # THEN the function is not called again, and the message counts as a success (deleted)
    assert recorder.calls == [event.id]
    assert response == {"batchItemFailures": []}


def test_same_event_twice_in_one_batch_runs_once(store: DynamoDBPersistenceLayer) -> None:
    # GIVEN one batch holding two messages that carry the same event
    event = make_envelope()
    records = [sqs_record(eventbridge_body(event)), sqs_record(sns_raw_body(event))]
    recorder = Recorder()

    # WHEN the consumer handles the batch
    response = run(store, records, recorder)

    # THEN the event ran once and both messages are done
    assert recorder.calls == [event.id]
    assert response == {"batchItemFailures": []}


def test_failed_attempt_is_returned_then_retried_on_redelivery_and_takes_effect_once(
    store: DynamoDBPersistenceLayer, dynamodb_client: Any
) -> None:
    # GIVEN an event whose first processing attempt raises
    event, other = make_envelope(), make_envelope()
    record = sqs_record(eventbridge_body(event))
    recorder = Recorder(fail_times={event.id: 1})

    # WHEN the consumer handles it along with a good event
    first = run(store, [record, sqs_record(eventbridge_body(other))], recorder)

    # THEN only the failed message is returned to the queue
    assert failure_ids(first) == [record["messageId"]]
    # AND Powertools deleted the failed attempt's in-progress record (only the good one remains)
    assert len(idempotency_records(dynamodb_client)) == 1

    # WHEN SQS redelivers the failed message
    second = run(store, [redelivered(record)], recorder)

    # THEN it runs again, succeeds, and every event took effect exactly once
    assert second == {"batchItemFailures": []}
    assert recorder.calls == [event.id, other.id, event.id]
    assert recorder.effects == {event.id: 1, other.id: 1}


def test_event_in_progress_in_another_invocation_fails_there_instead_of_running_twice(
    table: str, dynamodb_client: Any
) -> None:
    # GIVEN invocation A is processing an event while SQS hands a duplicate of it
    # to invocation B (another execution environment, its own persistence layer)
    event = make_envelope()
    duplicate = sqs_record(sns_raw_body(event))
    calls_in_b: list[str] = []
    seen_by_a: dict[str, PartialBatchResponse] = {}

    def in_a(envelope: Envelope) -> None:
        seen_by_a["b"] = run(
            new_store(dynamodb_client), [duplicate], lambda e: calls_in_b.append(e.id)
        )

    # WHEN both run
    response_a = run(new_store(dynamodb_client), [sqs_record(eventbridge_body(event))], in_a)

    # THEN B did not run the event and returned its message to the queue
    assert calls_in_b == []
    assert failure_ids(seen_by_a["b"]) == [duplicate["messageId"]]
    assert response_a == {"batchItemFailures": []}

    # AND when B's message comes back after A completed, it is a skipped duplicate
    again = run(
        new_store(dynamodb_client), [redelivered(duplicate)], lambda e: calls_in_b.append(e.id)
    )
    assert again == {"batchItemFailures": []}
    assert calls_in_b == []


def test_in_progress_record_expires_when_the_invocation_would_time_out(
    store: DynamoDBPersistenceLayer, dynamodb_client: Any
) -> None:
    # GIVEN an invocation with 42 s left
    event = make_envelope()
    observed: list[dict[str, Any]] = []
    before_ms = int(time.time() * 1000)

    # WHEN the event is being processed
    run(
        store,
        [sqs_record(eventbridge_body(event))],
        lambda e: observed.extend(idempotency_records(dynamodb_client)),
        context=FakeLambdaContext(remaining_millis=42_000),
    )
    after_ms = int(time.time() * 1000)

    # THEN its in-progress record expires when the invocation would (context registered)
    (record,) = observed
    assert record["status"]["S"] == "INPROGRESS"
    expiry = int(record["in_progress_expiration"]["N"])
    assert before_ms + 42_000 <= expiry <= after_ms + 42_000


class _LambdaTimedOut(KeyboardInterrupt):
    """Lambda killing the environment: no Python handler runs, nothing is cleaned up.

    A KeyboardInterrupt, the one exception the toolkit lets end the batch
    (any other fails its record only, and its in-progress record is deleted).
    """


@pytest.mark.parametrize(
    ("remaining_millis", "runs_again"),
    [(-1_000, True), (60_000, False)],
    ids=["window over: retried", "window still open: returned to the queue"],
)
def test_attempt_that_died_mid_event_is_retried_only_after_its_in_progress_window(
    store: DynamoDBPersistenceLayer, remaining_millis: int, runs_again: bool
) -> None:
    # GIVEN an invocation that died while processing an event (its record stays IN_PROGRESS)
    event = make_envelope()
    record = sqs_record(eventbridge_body(event))

    def dies(envelope: Envelope) -> None:
        raise _LambdaTimedOut

    with pytest.raises(_LambdaTimedOut):
        run(store, [record], dies, context=FakeLambdaContext(remaining_millis=remaining_millis))

    # WHEN SQS redelivers the message
    recorder = Recorder()
    response = run(store, [redelivered(record)], recorder)

    # THEN it runs again only once the dead invocation's time is over
    assert recorder.calls == ([event.id] if runs_again else [])
    assert failure_ids(response) == ([] if runs_again else [record["messageId"]])


def test_consumers_sharing_one_table_each_process_the_event_once(
    store: DynamoDBPersistenceLayer, dynamodb_client: Any
) -> None:
    # GIVEN two consumers using the same idempotency table
    event = make_envelope()
    billing, shipping = Recorder(), Recorder()

    # WHEN each receives the event twice
    for _ in range(2):
        run(store, [sqs_record(eventbridge_body(event))], billing, consumer_name="billing")
        run(
            new_store(dynamodb_client),
            [sqs_record(eventbridge_body(event))],
            shipping,
            consumer_name="shipping",
        )

    # THEN each ran it exactly once: their keys are scoped by consumer name
    assert billing.calls == [event.id]
    assert shipping.calls == [event.id]
    keys = sorted(
        item["id"]["S"].rsplit("#", 1)[0] for item in idempotency_records(dynamodb_client)
    )
    assert keys == ["idempotency#billing", "idempotency#shipping"]


def test_store_configured_for_another_function_is_refused(dynamodb_client: Any, table: str) -> None:
    # GIVEN a persistence layer Powertools already configured to hash another field
    store = new_store(dynamodb_client)
    store.configure(IdempotencyConfig(event_key_jmespath="body"))
    recorder = Recorder()

    # WHEN the consumer is given it
    # THEN it refuses before running anything (it would deduplicate on the wrong key)
    with pytest.raises(ValueError, match="event_key_jmespath"):
        run(store, [sqs_record(eventbridge_body(make_envelope()))], recorder)
    assert recorder.calls == []


# --------------------------------------------------------------------------- batch shapes


@pytest.mark.parametrize(
    "failing",
    ["function raises", "poison body"],
)
def test_fifo_failure_at_message_4_returns_4_to_10_and_does_not_process_5_to_10(
    store: DynamoDBPersistenceLayer, failing: str
) -> None:
    # GIVEN a FIFO batch of ten whose fourth message fails
    events = envelopes(10)
    recorder = Recorder(fail_times={events[3].id: 1} if failing == "function raises" else {})
    bodies = [eventbridge_body(event) for event in events]
    if failing == "poison body":
        bodies[3] = "{not json"
    records = [sqs_record(body, queue_arn=FIFO_QUEUE_ARN) for body in bodies]

    # WHEN the consumer handles it
    response = run(store, records, recorder)

    # THEN the failed message and every later one are returned, in order
    assert failure_ids(response) == [record["messageId"] for record in records[3:]]
    # AND nothing after the failure ran (it would overtake the failed message)
    assert set(recorder.effects) == {event.id for event in events[:3]}
    assert not set(recorder.calls) & {event.id for event in events[4:]}


def interleaved_fifo_batch(events: list[Envelope]) -> list[dict[str, Any]]:
    """Messages of groups A and B in turn: A0 B1 A2 B3 ..."""
    return [
        sqs_record(eventbridge_body(event), queue_arn=FIFO_QUEUE_ARN, group_id="AB"[n % 2])
        for n, event in enumerate(events)
    ]


def test_fifo_failure_stops_only_its_group_and_the_other_groups_carry_on(
    store: DynamoDBPersistenceLayer,
) -> None:
    # GIVEN a FIFO batch A0 B1 A2 B3 A4 B5 A6 B7 whose A2 fails
    events = envelopes(8)
    recorder = Recorder(fail_times={events[2].id: 1})
    records = interleaved_fifo_batch(events)

    # WHEN the consumer handles it
    response = run(store, records, recorder)

    # THEN A2 and every later message of A come back, in order, none of them run
    assert failure_ids(response) == [records[n]["messageId"] for n in (2, 4, 6)]
    assert not set(recorder.calls) & {events[n].id for n in (4, 6)}
    # AND group B went on to the end
    assert set(recorder.effects) == {events[n].id for n in (0, 1, 3, 5, 7)}


def test_fifo_group_skipping_answers_as_powertools_skip_group_on_error_does(
    store: DynamoDBPersistenceLayer,
) -> None:
    # GIVEN a FIFO batch over two groups whose A2 and B5 fail
    events = envelopes(8)
    failing = {events[2].id, events[5].id}
    records = interleaved_fifo_batch(events)

    def powertools_record_handler(record: Any) -> None:
        if json.loads(record.body)["detail"]["id"] in failing:
            raise RuntimeError("fails")

    # WHEN the toolkit and Powertools' FIFO processor handle the same batch
    ours = run(store, records, Recorder(fail_times=dict.fromkeys(failing, 1)))
    theirs = process_partial_response(
        event=sqs_event(records),
        record_handler=powertools_record_handler,
        processor=SqsFifoPartialProcessor(skip_group_on_error=True),
    )

    # THEN both return the same messages
    assert failure_ids(ours) == [item["itemIdentifier"] for item in theirs["batchItemFailures"]]
    assert failure_ids(ours) == [records[n]["messageId"] for n in (2, 4, 5, 6, 7)]


def test_fifo_message_without_a_group_id_that_fails_stops_the_whole_batch(
    store: DynamoDBPersistenceLayer,
) -> None:
    # GIVEN a FIFO batch whose records carry no MessageGroupId, the second one failing
    events = envelopes(4)
    records = interleaved_fifo_batch(events)
    for record in records:
        del record["attributes"]["MessageGroupId"]
    recorder = Recorder(fail_times={events[1].id: 1})

    response = run(store, records, recorder)

    # THEN nothing can tell the groups apart: everything from the failure on comes back
    assert failure_ids(response) == [record["messageId"] for record in records[1:]]
    assert set(recorder.effects) == {events[0].id}


def test_fifo_batch_that_succeeds_returns_no_failures(store: DynamoDBPersistenceLayer) -> None:
    events = envelopes(3)
    recorder = Recorder()
    response = run(
        store, [sqs_record(sns_raw_body(e), queue_arn=FIFO_QUEUE_ARN) for e in events], recorder
    )
    assert response == {"batchItemFailures": []}
    assert recorder.calls == [event.id for event in events]


def test_standard_queue_failure_at_message_4_returns_only_4_and_processes_the_rest(
    store: DynamoDBPersistenceLayer,
) -> None:
    # GIVEN a standard-queue batch of ten whose fourth message fails
    events = envelopes(10)
    recorder = Recorder(fail_times={events[3].id: 1})
    records = [sqs_record(eventbridge_body(event)) for event in events]

    # WHEN the consumer handles it
    response = run(store, records, recorder)

    # THEN only the fourth returns to the queue; the nine others are done (and deleted)
    assert failure_ids(response) == [records[3]["messageId"]]
    assert set(recorder.effects) == {event.id for i, event in enumerate(events) if i != 3}


def test_empty_batch_returns_an_empty_failure_list(store: DynamoDBPersistenceLayer) -> None:
    recorder = Recorder()
    assert run(store, [], recorder) == {"batchItemFailures": []}
    assert recorder.calls == []


@pytest.mark.parametrize(
    "shape",
    [eventbridge_body, sns_raw_body, sns_notification_body],
    ids=["EventBridge target", "SNS raw delivery", "SNS notification"],
)
def test_bodies_from_eventbridge_and_sns_deliver_the_same_envelope(
    store: DynamoDBPersistenceLayer, shape: Callable[[Envelope], str]
) -> None:
    # GIVEN an event delivered in one of the shapes a consumer queue receives
    event = make_envelope(correlation_id="corr-1")
    received: list[Envelope] = []

    # WHEN the consumer handles it
    response = run(store, [sqs_record(shape(event))], received.append)

    # THEN the function receives the envelope exactly as it was written
    assert response == {"batchItemFailures": []}
    assert received == [event]


@pytest.mark.parametrize(
    "bad_record",
    [
        {"body": "{}"},
        {"messageId": "", "body": "{}"},
        {"messageId": None, "body": "{}"},
    ],
    ids=["no messageId", "empty messageId", "null messageId"],
)
def test_record_without_message_id_raises_before_processing_anything(
    store: DynamoDBPersistenceLayer, bad_record: dict[str, Any]
) -> None:
    # GIVEN a batch where one record has no usable messageId (it cannot be reported
    # on its own: an empty itemIdentifier fails the whole batch anyway, and omitting
    # it would delete it as a success)
    good = sqs_record(eventbridge_body(make_envelope()))
    recorder = Recorder()

    # WHEN the consumer handles it
    # THEN it raises (Lambda retries the whole batch) and ran nothing first
    with pytest.raises(MalformedBatch, match="messageId"):
        run(store, [good, bad_record], recorder)
    assert recorder.calls == []


# --------------------------------------------------------------------------- the handler


def test_handler_decorator_answers_a_batch_and_flushes_counts_as_emf(
    table: str,
    aws_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a consumer built the documented way, with a metrics namespace in the environment
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "OutboxTests")
    consumer = OutboxConsumer(idempotency_table=IDEMPOTENCY_TABLE, name=CONSUMER)
    recorder = Recorder()

    @consumer.handler
    def handler(event: Envelope) -> None:
        recorder(event)

    done, fresh = make_envelope(), make_envelope()
    handler(sqs_event([sqs_record(eventbridge_body(done))]), FakeLambdaContext())  # type: ignore[arg-type]
    capsys.readouterr()
    poison = sqs_record("nope")

    # WHEN it handles a batch with a new event, a duplicate and a poison message
    response = handler(
        sqs_event(  # type: ignore[arg-type]
            [sqs_record(eventbridge_body(fresh)), sqs_record(eventbridge_body(done)), poison]
        ),
        FakeLambdaContext(),  # type: ignore[arg-type]
    )

    # THEN the response is a partial batch response naming the poison
    assert response == {"batchItemFailures": [{"itemIdentifier": poison["messageId"]}]}
    # AND one EMF document carries the three counts in the configured namespace
    emf = [
        json.loads(line)
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("{") and '"_aws"' in line
    ]
    assert len(emf) == 1
    assert emf[0]["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "OutboxTests"
    counts = (emf[0][METRIC_PROCESSED], emf[0][METRIC_DUPLICATE], emf[0][METRIC_FAILED])
    assert counts == ([1.0], [1.0], [1.0])
    assert emf[0]["service"] == CONSUMER


def test_handler_built_with_a_table_name_uses_powertools_dynamodb_records(
    table: str, aws_env: None, dynamodb_client: Any
) -> None:
    # GIVEN a consumer given only the table name
    consumer = OutboxConsumer(idempotency_table=IDEMPOTENCY_TABLE, name=CONSUMER)
    handler = consumer.handler(Recorder())

    # WHEN it processes an event
    handler(sqs_event([sqs_record(eventbridge_body(make_envelope()))]), FakeLambdaContext())  # type: ignore[arg-type]

    # THEN a COMPLETED record keyed by this consumer, with a TTL, is in the table
    (record,) = idempotency_records(dynamodb_client)
    assert record["id"]["S"].startswith(f"idempotency#{CONSUMER}#")
    assert record["status"]["S"] == "COMPLETED"
    assert int(record["expiration"]["N"]) > time.time() + 6 * 24 * 3600


def test_metrics_default_to_the_project_namespace_when_none_is_configured(
    table: str,
    aws_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN no POWERTOOLS_METRICS_NAMESPACE
    monkeypatch.delenv("POWERTOOLS_METRICS_NAMESPACE", raising=False)
    handler = OutboxConsumer(idempotency_table=IDEMPOTENCY_TABLE, name=CONSUMER).handler(Recorder())

    # WHEN a batch is handled
    handler(sqs_event([sqs_record(sns_raw_body(make_envelope()))]), FakeLambdaContext())  # type: ignore[arg-type]

    # THEN the counts still go out, in the namespace the publisher uses too
    (emf,) = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert emf["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "DynamoDBOutbox"


class _BrokenMetrics:
    def add_metric(self, *args: Any, **kwargs: Any) -> None:
        pass

    def flush_metrics(self) -> None:
        raise RuntimeError("metrics backend down")

    def clear_metrics(self) -> None:
        pass


def test_metrics_that_cannot_be_flushed_do_not_fail_a_processed_batch(
    store: DynamoDBPersistenceLayer,
) -> None:
    # GIVEN a consumer whose metrics flush raises
    recorder = Recorder()
    consumer = OutboxConsumer(persistence_store=store, name=CONSUMER, metrics=_BrokenMetrics())  # type: ignore[arg-type]
    event = make_envelope()

    # WHEN it handles a batch
    response = consumer.handler(recorder)(
        sqs_event([sqs_record(eventbridge_body(event))]),  # type: ignore[arg-type]
        FakeLambdaContext(),  # type: ignore[arg-type]
    )

    # THEN the batch is still answered as processed (no redelivery of done work)
    assert response == {"batchItemFailures": []}
    assert recorder.effects == {event.id: 1}


def test_context_without_remaining_time_is_ignored_rather_than_failing_every_record(
    store: DynamoDBPersistenceLayer,
) -> None:
    # GIVEN an invocation context that is not a real Lambda context (e.g. a local runner's)
    recorder = Recorder()
    event = make_envelope()

    # WHEN the batch is handled with it (Powertools warns: no in-progress expiry)
    with pytest.warns(UserWarning, match="remaining time"):
        response = process_sqs_batch(
            sqs_event([sqs_record(eventbridge_body(event))]),  # type: ignore[arg-type]
            recorder,
            persistence_store=store,
            consumer_name=CONSUMER,
            lambda_context=object(),  # type: ignore[arg-type]
        )

    # THEN the event is processed normally
    assert response == {"batchItemFailures": []}
    assert recorder.effects == {event.id: 1}
