"""Generated input, not a hand list, through writer -> publisher -> sweeper -> consumer.

Hypothesis draws events, outbox items, stream records and SQS bodies over the
whole input space (``strategies.py``) and pushes them through the real code on
moto, which builds and serialises every request with botocore. After each
batch the invariants of the promise are checked:

1. no batch fails because of one record (AWS itself is healthy here, so no
   batch fails at all, and nothing raises);
2. every outbox record is published exactly once in the attempt, or
   quarantined with a reason, or (not an outbox insert) left alone;
3. everything the writer accepts is published, never quarantined for its
   size or shape, whichever sink it was written for;
4. nothing the writer refuses reaches the table, and it refuses with its
   own errors only (``InvalidWrite``/``InvalidEnvelope``);
5. a consumer fails exactly the messages it could not process, each at most
   once, and processes every published event exactly once.

Profiles: ``ci`` (derandomized, at least 2,000 records), ``soak`` (``make
soak``, at least 100,000, random), ``dev``. The totals are printed at the end.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dynamodb_outbox.consumer import process_sqs_batch
from dynamodb_outbox.envelope import Envelope, InvalidEnvelope
from dynamodb_outbox.event_ids import new_event_id
from dynamodb_outbox.outbox_item import (
    ATTR_PENDING_SHARD,
    ATTR_QUARANTINE_REASON,
    ATTR_STATUS,
    STATUS_QUARANTINED,
    outbox_sk,
)
from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies
from dynamodb_outbox.sweeper import sweep
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from dynamodb_outbox.writer import InvalidWrite, OutboxWriter, TransactionCancelled
from tests.factories import sequence_numbers, stream_record
from tests.functional.consumer_fixtures import FIFO_QUEUE_ARN, sqs_event, sqs_record
from tests.reliability.generated import (
    EXAMPLES,
    GENERATED,
    MIN_RECORDS,
    TABLE,
    Stack,
    generated_stack,
)
from tests.reliability.strategies import (
    BATCH_ENDING,
    RECORD_FAILURES,
    SINKS,
    IntendedEvent,
    JunkItem,
    RecordShape,
    envelope_of_size,
    exception_texts,
    intended_events,
    junk_items,
    record_shapes,
    sqs_junk_bodies,
)
from tests.support.lambda_context import FakeLambdaContext

#: Junk outbox ids are made an hour back: old enough for any sweep.
_HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def stack(reliability_profile: str) -> Iterator[Stack]:
    GENERATED.profile = reliability_profile
    with generated_stack() as made:
        yield made


def _settings(profile: str, test: str) -> settings:
    return settings(
        settings.get_profile(profile),
        max_examples=EXAMPLES[profile][test],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


class _Counter:
    """Keys unique across examples (moto's tables live for the whole campaign)."""

    value = 0

    @classmethod
    def next(cls) -> tuple[str, int]:
        """A partition key and a millisecond no other example uses, an hour or more back."""
        cls.value += 1
        return f"GEN#{cls.value}", 1_600_000_000_000 + cls.value * 1_000


#: Event ids some consumer batch already processed: a redelivery is skipped, not run.
_PROCESSED: set[str] = set()


# ------------------------------------------------------------------ writer side


def _write(stack: Stack, publish_to: str, pk: str, intended: IntendedEvent) -> Envelope | None:
    """The envelope the writer committed, or None when it refused (checked to leave nothing)."""
    calls: list[dict[str, Any]] = []

    class Recording:
        def transact_write_items(self, **kwargs: Any) -> Any:
            calls.append(kwargs)
            return stack.dynamodb.transact_write_items(**kwargs)

    writer = OutboxWriter(TABLE, Recording(), publish_to=publish_to)
    entity = {"PK": pk, "SK": f"META#{new_event_id()}"}
    try:
        if intended.size_for is not None and intended.size is not None:
            envelope = envelope_of_size(intended.fields, intended.size_for, intended.size)
        else:
            envelope = Envelope(**intended.fields)
        writer.write(entity, envelope)
    except TransactionCancelled as cancelled:
        # An id drawn twice in one batch: DynamoDB refuses to overwrite the first
        # event (the outbox Put's condition), and the whole transaction with it.
        assert [(r.role, r.code) for r in cancelled.failures] == [
            ("event", "ConditionalCheckFailed")
        ]
        assert stack.item({"S": pk}, {"S": entity["SK"]}) is None, "all or nothing"
        GENERATED.outcomes["writer: event id already written, cancelled"] += 1
        return None
    except (InvalidWrite, InvalidEnvelope) as refusal:
        assert str(refusal), "a refusal says why"
        assert calls == [], "a refused write must not reach DynamoDB"
        GENERATED.outcomes[f"writer refused: {type(refusal).__name__}"] += 1
        GENERATED.invariants["refused write reached nothing"] += 1
        return None
    assert len(calls) == 1
    GENERATED.outcomes["writer accepted"] += 1
    return envelope


def _junk_record(item: JunkItem, shape: RecordShape, seq: str) -> dict[str, Any]:
    record = stream_record(
        item.item, seq, event_name=shape.event_name or "INSERT", view_type=shape.view_type
    )
    if shape.event_name is None:
        del record["eventName"]
    for part in shape.drop:
        if part == "PK":
            record["dynamodb"]["Keys"].pop("PK", None)
        elif part == "eventName":
            record.pop("eventName", None)
        else:
            record["dynamodb"].pop(part, None)
    return record


def _is_outbox_insert(record: dict[str, Any]) -> bool:
    keys = record.get("dynamodb", {}).get("Keys")
    return (
        record.get("eventName") == "INSERT"
        and isinstance(keys, dict)
        and isinstance(keys.get("PK"), dict)
        and isinstance(keys.get("SK"), dict)
    )


def _store(stack: Stack, junk: JunkItem) -> dict[str, Any] | None:
    """The item as the table holds it, or None when it cannot be stored (record-only junk)."""
    if not junk.storable:
        return None
    try:
        stack.dynamodb.put_item(TableName=TABLE, Item=junk.item)
    except Exception:  # moto refusing an item DynamoDB would refuse
        return None
    return stack.item(junk.item["PK"], junk.item["SK"])


def _quarantined_with_reason(item: dict[str, Any] | None) -> bool:
    return (
        item is not None
        and item.get(ATTR_STATUS) == {"S": STATUS_QUARANTINED}
        and bool(item.get(ATTR_QUARANTINE_REASON, {}).get("S"))
        and ATTR_PENDING_SHARD not in item
    )


@st.composite
def _stream_batches(draw: st.DrawFn) -> dict[str, Any]:
    pk, milliseconds = _Counter.next()
    return {
        "publish_to": draw(st.sampled_from(SINKS)),
        "pk": pk,
        "intended": draw(st.lists(intended_events(), min_size=8, max_size=16)),
        "junk": draw(
            st.lists(
                st.tuples(junk_items(pk, milliseconds), record_shapes),
                min_size=6,
                max_size=12,
                unique_by=lambda pair: pair[0].event_id,
            )
        ),
        "consumer_junk": draw(st.lists(sqs_junk_bodies, min_size=1, max_size=4)),
        # A seed, not st.randoms(): drawing during the run could end the example midway.
        "order": random.Random(draw(st.integers(0, 2**32))),
        # A live change after the batch: the transport switched (None: no change).
        "switch_to": draw(st.sampled_from([None, *SINKS])),
    }


def _run_stream_batch(stack: Stack, batch: dict[str, Any]) -> None:
    publish_to, pk = batch["publish_to"], batch["pk"]
    recorder = stack.recorder(publish_to)
    before, delivered_before = recorder.accepted.copy(), len(recorder.delivered)
    GENERATED.records["events asked of the writer"] += len(batch["intended"])

    accepted = [
        envelope
        for intended in batch["intended"]
        if (envelope := _write(stack, publish_to, pk, intended)) is not None
    ]
    seqs = sequence_numbers()
    records: list[tuple[str, Any, dict[str, Any]]] = []
    for envelope in accepted:
        item = stack.item({"S": pk}, {"S": outbox_sk(envelope.id)})
        assert item is not None
        records.append(("accepted", (pk, envelope), stream_record(item, next(seqs))))
    for junk, shape in batch["junk"]:
        stored = _store(stack, junk)
        records.append(("junk", (junk, stored), _junk_record(junk, shape, next(seqs))))
    order: random.Random = batch["order"]
    order.shuffle(records)
    GENERATED.records["stream records (writer's and junk)"] += len(records)

    result = publish_stream_batch(
        [record for _, _, record in records],
        PublishDependencies(
            sink=stack.sink(publish_to),
            table_name=TABLE,
            dynamodb_client=stack.dynamodb,
            sleep=lambda _seconds: None,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )

    assert result.response() == {"batchItemFailures": []}, "no record may fail the batch"
    GENERATED.invariants["no batch failed"] += 1
    published = recorder.accepted - before
    assert all(count == 1 for count in published.values()), f"published twice: {published}"
    for kind, subject, record in records:
        if kind == "accepted":
            _check_accepted(stack, *subject, published)
        else:
            _check_junk(stack, *subject, record, published)
    _check_seams(stack, publish_to, set(published))
    _run_consumer(stack, recorder.delivered[delivered_before:], batch["consumer_junk"])
    switch_to = batch["switch_to"]
    if switch_to not in (None, publish_to):
        _again_after_a_switch(stack, switch_to, [r for kind, _, r in records if kind == "accepted"])
    _forget(stack, pk)


def _again_after_a_switch(stack: Stack, switch_to: str, records: list[dict[str, Any]]) -> None:
    """A live change: ``publish_to`` switched, and the same events come again on the new
    transport (the sweeper republishing an item whose delete had failed). The consumer
    keeps its idempotency records by consumer and event id across the switch
    (docs/live-changes.md), so every copy is a duplicate: ``_run_consumer`` fails on
    an event taking effect again."""
    recorder = stack.recorder(switch_to)
    before, delivered_before = recorder.accepted.copy(), len(recorder.delivered)
    result = publish_stream_batch(
        records,
        PublishDependencies(
            sink=stack.sink(switch_to),
            table_name=TABLE,
            dynamodb_client=stack.dynamodb,
            sleep=lambda _seconds: None,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )
    assert result.response() == {"batchItemFailures": []}, "no record may fail the batch"
    published = recorder.accepted - before
    _check_seams(stack, switch_to, set(published))
    _run_consumer(stack, recorder.delivered[delivered_before:], [])
    GENERATED.records["events again on another transport (live change)"] += len(published)
    GENERATED.invariants["live change: events again after a switch took effect once"] += 1


def _take(stack: Stack, url: str) -> list[str]:
    """Every body in a consumer queue, deleted (PurgeQueue allows one call a minute)."""
    bodies: list[str] = []
    while messages := stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get(
        "Messages", []
    ):
        bodies.extend(message["Body"] for message in messages)
        stack.sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(messages)
            ],
        )
    return bodies


def _check_seams(stack: Stack, publish_to: str, published: set[str]) -> None:
    """Every event the bus or topic accepted reached every consumer queue behind it."""
    assert not stack.seams.dropped, (
        f"accepted, then dropped on the way to a queue: {stack.seams.dropped[:1]}"
    )
    assert not stack.seams.dead_lettered, (
        f"dead-lettered on the way: {stack.seams.dead_lettered[:1]}"
    )
    for url in stack.queues[publish_to]:
        arrived = {_event_id_of(body) for body in _take(stack, url)}
        if publish_to == "sns_fifo":  # SNS and SQS FIFO drop an id seen in an earlier example
            assert arrived <= published, arrived - published
        else:
            assert arrived == published, (published - arrived, arrived - published)
    GENERATED.invariants["published events reached every consumer queue"] += 1


def _forget(stack: Stack, pk: str) -> None:
    """Delete what an example left (quarantined items): moto's index reads scan the table."""
    items = stack.dynamodb.query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": pk}},
        ProjectionExpression="PK, SK",
    )["Items"]
    for key in items:
        stack.dynamodb.delete_item(TableName=TABLE, Key=key)


def _check_accepted(stack: Stack, pk: str, envelope: Envelope, published: Any) -> None:
    assert published[envelope.id] == 1, "what the writer accepts is published, once"
    assert stack.item({"S": pk}, {"S": outbox_sk(envelope.id)}) is None, "and deleted"
    GENERATED.outcomes["writer's events published once"] += 1
    GENERATED.invariants["accepted -> published exactly once"] += 1


def _check_junk(
    stack: Stack,
    junk: JunkItem,
    stored: dict[str, Any] | None,
    record: dict[str, Any],
    published: Any,
) -> None:
    item = stack.item(junk.item["PK"], junk.item["SK"]) if stored else None
    count = published[junk.event_id]
    if not _is_outbox_insert(record):
        assert count == 0, "a record that is not an outbox insert is never published"
        if stored:
            assert item == stored, "and its item is left as it was"
        GENERATED.outcomes["junk: not an outbox insert, left alone"] += 1
    elif count == 1:
        assert item is None, "a published item is deleted"
        GENERATED.outcomes["junk: valid after all, published once"] += 1
    else:
        assert count == 0
        if stored:
            assert _quarantined_with_reason(item), f"neither published nor quarantined: {item}"
            GENERATED.outcomes["junk: quarantined with a reason"] += 1
        else:
            GENERATED.outcomes["junk: no such item, nothing to mark"] += 1
    GENERATED.invariants["junk -> published once, quarantined, or left"] += 1


# ------------------------------------------------------------------ consumer side


def _run_consumer(stack: Stack, delivered: list[str], junk_bodies: list[str]) -> None:
    messages = [(sqs_record(body), True) for body in delivered]
    messages += [(sqs_record(body), False) for body in junk_bodies]
    random.Random(len(messages)).shuffle(messages)
    if not messages:
        return
    processed: list[str] = []

    def process(envelope: Envelope) -> None:
        processed.append(envelope.id)

    response = process_sqs_batch(
        sqs_event([record for record, _ in messages]),  # type: ignore[arg-type]
        process,
        persistence_store=stack.store,
        consumer_name="generated",
        lambda_context=FakeLambdaContext(),  # type: ignore[arg-type]
    )
    failed = {failure["itemIdentifier"] for failure in response["batchItemFailures"]}
    assert len(processed) == len(set(processed)), "an event processed twice"
    assert not set(processed) & _PROCESSED, "an event processed again in a later batch"
    for record, published in messages:
        if published:
            assert record["messageId"] not in failed, "a published event failed its consumer"
            event_id = _event_id_of(record["body"])
            assert event_id in processed or event_id in _PROCESSED, "a published event was lost"
    _PROCESSED.update(processed)
    GENERATED.records["SQS messages (delivered and junk)"] += len(messages)
    GENERATED.outcomes["consumer: messages failed alone"] += len(failed)
    GENERATED.outcomes["consumer: events processed once"] += len(processed)
    GENERATED.invariants["consumer failed only what it could not process"] += 1


def _event_id_of(body: str) -> str:
    """The id of a delivered event: EventBridge event, SNS notification or raw envelope."""
    data = json.loads(body)
    if "detail" in data:
        data = data["detail"]
    elif data.get("Type") == "Notification":
        data = json.loads(data["Message"])
    event_id: str = data["id"]
    return event_id


# -------------------------------------------------------------------------- tests


def test_generated_events_through_writer_publisher_and_consumer(
    stack: Stack, reliability_profile: str
) -> None:
    @_settings(reliability_profile, "stream")
    @given(batch=_stream_batches())
    def run(batch: dict[str, Any]) -> None:
        _run_stream_batch(stack, batch)

    run()


@st.composite
def _sweeper_batches(draw: st.DrawFn) -> dict[str, Any]:
    pk, milliseconds = _Counter.next()
    return {
        "publish_to": draw(st.sampled_from(SINKS)),
        "pk": pk,
        "junk": draw(
            st.lists(
                junk_items(pk, milliseconds),
                min_size=8,
                max_size=16,
                unique_by=lambda j: j.event_id,
            )
        ),
    }


def test_generated_outbox_items_through_the_sweeper(stack: Stack, reliability_profile: str) -> None:
    @_settings(reliability_profile, "sweeper")
    @given(batch=_sweeper_batches())
    def run(batch: dict[str, Any]) -> None:
        publish_to = batch["publish_to"]
        recorder = stack.recorder(publish_to)
        before = recorder.accepted.copy()
        stored = [(junk, item) for junk in batch["junk"] if (item := _store(stack, junk))]
        GENERATED.records["outbox items swept"] += len(stored)

        result = sweep(
            PublishDependencies(
                sink=stack.sink(publish_to),
                table_name=TABLE,
                dynamodb_client=stack.dynamodb,
                sleep=lambda _seconds: None,
                table_keys=DEFAULT_TABLE_KEYS,
            ),
            min_age_seconds=0,
        )

        assert result.failure_sk is None and result.stopped_by is None, "nothing held the sweep"
        GENERATED.invariants["no sweep stopped or raised"] += 1
        published = recorder.accepted - before
        _check_seams(stack, publish_to, set(published))
        for junk, as_stored in stored:
            item = stack.item(junk.item["PK"], junk.item["SK"])
            pending = junk.item.get(ATTR_STATUS) == {"S": "PENDING"}
            if published[junk.event_id]:
                assert published[junk.event_id] == 1 and item is None
                GENERATED.outcomes["swept: published once"] += 1
            elif pending:
                assert _quarantined_with_reason(item), f"left pending by the sweeper: {item}"
                GENERATED.outcomes["swept: quarantined with a reason"] += 1
            else:
                assert item == as_stored
                GENERATED.outcomes["swept: not pending, left alone"] += 1
            GENERATED.invariants["swept item -> published once or quarantined"] += 1
        _forget(stack, batch["pk"])

    run()


@st.composite
def _consumer_batches(draw: st.DrawFn) -> dict[str, Any]:
    good = [
        Envelope(type="OrderPlaced", source="app.orders", subject=f"ORDER#{n}", data={"n": n})
        for n in range(draw(st.integers(2, 6)))
    ]
    shapes = draw(st.lists(st.sampled_from(["eventbridge", "raw", "notification"]), min_size=5))
    bodies = []
    for envelope, shape in zip(good, shapes, strict=False):
        if shape == "eventbridge":
            event = {"detail-type": envelope.type, "source": envelope.source}
            bodies.append(json.dumps({**event, "detail": envelope.to_dict()}))
        elif shape == "raw":
            bodies.append(envelope.to_json())
        else:
            bodies.append(json.dumps({"Type": "Notification", "Message": envelope.to_json()}))
    return {"good": bodies, "junk": draw(st.lists(sqs_junk_bodies, min_size=6, max_size=12))}


def test_generated_sqs_bodies_through_the_consumer(stack: Stack, reliability_profile: str) -> None:
    @_settings(reliability_profile, "consumer")
    @given(batch=_consumer_batches())
    def run(batch: dict[str, Any]) -> None:
        _run_consumer(stack, batch["good"], batch["junk"])

    run()


@st.composite
def _hostile_batches(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(2, 8))
    envelopes = [
        Envelope(
            type="OrderPaid",
            source="app.orders",
            subject=f"ORDER#{n % 3}",
            data={"n": n, "card": "4111 1111 1111 1111"},
        )
        for n in range(count)
    ]
    kinds = st.one_of(st.none(), st.sampled_from(sorted(RECORD_FAILURES)))
    plan = {e.id: (draw(kinds), draw(exception_texts)) for e in envelopes}
    ending_at = draw(st.one_of(st.none(), st.integers(0, count - 1)))
    if ending_at is not None:
        plan[envelopes[ending_at].id] = ("KeyboardInterrupt", "stop")
    return {
        "envelopes": envelopes,
        "plan": plan,
        "is_async": draw(st.booleans()),
        "fifo": draw(st.booleans()),
    }


def _hostile_records(envelopes: list[Envelope], fifo: bool) -> list[dict[str, Any]]:
    def body(envelope: Envelope) -> str:
        event = {"detail-type": envelope.type, "source": envelope.source}
        return json.dumps({**event, "detail": envelope.to_dict()})

    if not fifo:
        return [sqs_record(body(e)) for e in envelopes]
    return [
        sqs_record(body(e), queue_arn=FIFO_QUEUE_ARN, group_id=str(e.subject)) for e in envelopes
    ]


def test_generated_hostile_exceptions_through_the_consumer(
    stack: Stack, reliability_profile: str
) -> None:
    """Whatever a function raises fails its record only (a KeyboardInterrupt ends the batch).

    Raising ``__str__``/``__repr__``, huge and non-UTF-8 messages, cancellation,
    ``SystemExit``, ``GeneratorExit``, ``MemoryError``: the batch answers, the
    raising records (and on FIFO the rest of their group) come back, the
    others are done once; on redelivery the failed ones run and none twice.
    """

    @_settings(reliability_profile, "hostile")
    @given(batch=_hostile_batches())
    def run(batch: dict[str, Any]) -> None:
        envelopes: list[Envelope] = batch["envelopes"]
        plan: dict[str, tuple[str | None, str]] = batch["plan"]
        records = _hostile_records(envelopes, batch["fifo"])
        completed: Counter[str] = Counter()
        attempts: Counter[str] = Counter()

        def act(envelope: Envelope) -> None:
            attempts[envelope.id] += 1
            kind, text = plan[envelope.id]
            if kind is not None and attempts[envelope.id] == 1:
                raise {**RECORD_FAILURES, **BATCH_ENDING}[kind](text)
            completed[envelope.id] += 1

        async def act_async(envelope: Envelope) -> None:
            await asyncio.sleep(0)
            act(envelope)

        def deliver(batch_records: list[dict[str, Any]]) -> set[str] | None:
            try:
                response = process_sqs_batch(
                    sqs_event(batch_records),  # type: ignore[arg-type]
                    act_async if batch["is_async"] else act,
                    persistence_store=stack.store,
                    consumer_name="hostile",
                    lambda_context=FakeLambdaContext(),  # type: ignore[arg-type]
                )
            except KeyboardInterrupt:
                return None
            return {failure["itemIdentifier"] for failure in response["batchItemFailures"]}

        interrupted = {e.id for e in envelopes if plan[e.id][0] in BATCH_ENDING}

        def check(
            batch_records: list[dict[str, Any]], failed: set[str] | None, held: set[str]
        ) -> None:
            """A KeyboardInterrupt raised ends the batch; anything else fails its record only."""
            if failed is None:
                assert any(attempts[i] == 1 for i in interrupted), "ended by nothing"
                GENERATED.outcomes["hostile: batches ended by KeyboardInterrupt"] += 1
                return
            ids = {r["messageId"]: e for r, e in zip(records, envelopes, strict=True)}
            raised = {m for m in (r["messageId"] for r in batch_records) if m in raising}
            assert raised <= failed, "a record that raised was reported done"
            stopped = {ids[m].subject for m in raised} if batch["fifo"] else set()
            for record in batch_records:
                message_id = record["messageId"]
                if message_id in raised | held or ids[message_id].subject in stopped:
                    continue
                assert message_id not in failed, "a good record failed with a bad one"
            GENERATED.outcomes["hostile: records failed alone"] += len(raised)

        # SQS returns what failed (all of it after a KeyboardInterrupt), same
        # messageIds, until nothing fails but the interrupted record, whose
        # IN_PROGRESS record holds it until that invocation's time is over (on
        # FIFO, with the later records of its group behind it).
        def held_now() -> set[str]:
            """The interrupted record, once run, and on FIFO its group: in progress elsewhere."""
            held_groups = {e.subject for e in envelopes if e.id in interrupted and attempts[e.id]}
            return {
                r["messageId"]
                for r, e in zip(records, envelopes, strict=True)
                if (e.id in interrupted and attempts[e.id])
                or (batch["fifo"] and e.subject in held_groups)
            }

        pending = records
        held: set[str] = set()
        for _ in range(len(records) + 2):
            before = Counter(attempts)
            failed = deliver(pending)
            raising = {
                r["messageId"]
                for r, e in zip(records, envelopes, strict=True)
                if plan[e.id][0] and attempts[e.id] == 1 and before[e.id] == 0
            }
            check(pending, failed, held)
            held = held_now()
            if failed is not None:
                pending = [r for r in pending if r["messageId"] in failed]
            if {r["messageId"] for r in pending} <= held:
                break
        assert {r["messageId"] for r in pending} <= held, "a record kept failing"
        assert all(count == 1 for count in completed.values()), "an event completed twice"
        for record, envelope in zip(records, envelopes, strict=True):
            if record["messageId"] not in held:
                assert completed[envelope.id] == 1, "an event was lost"
        GENERATED.records["consumer records with hostile exceptions"] += len(records)
        GENERATED.invariants["hostile exception -> its record only, none twice"] += 1

    run()


def test_the_campaign_reached_its_size(reliability_profile: str) -> None:
    """Runs last in this file: the three campaigns above must have generated enough."""
    if GENERATED.total == 0:
        pytest.skip("the generated-input tests did not run in this session (deselected)")
    assert GENERATED.total >= MIN_RECORDS[reliability_profile], (
        f"{GENERATED.total:,} records; the {reliability_profile!r} profile needs "
        f"{MIN_RECORDS[reliability_profile]:,}: raise EXAMPLES in generated.py"
    )
