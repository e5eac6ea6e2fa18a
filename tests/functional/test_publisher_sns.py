"""The publisher with ``publish_to = "sns"`` against moto: PublishBatch, Failed entries, FIFO.

What the topic delivered is read from an SQS queue subscribed with
RawMessageDelivery, so the queue holds the exact message bodies and attributes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import EndpointConnectionError

from dynamodb_outbox import publisher
from dynamodb_outbox.outbox_item import ATTR_ENVELOPE
from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies, PublishResult
from dynamodb_outbox.settings import ConfigurationError
from dynamodb_outbox.sinks import SNS_MAX_REQUEST_BYTES, SnsSink, sns_entry_size
from dynamodb_outbox.sizes import QUEUE_DELIVERY_BUDGET_BYTES, SQS_MAX_MESSAGE_BYTES_CEILING
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from tests.factories import outbox_stream_record, sequence_numbers, stream_event
from tests.functional.outbox_helpers import (
    FIXED_NOW,
    PK,
    RecordingSns,
    assert_quarantined,
    outbox_sort_keys,
    write_outbox,
)
from tests.support.aws_errors import client_error
from tests.support.lambda_context import FakeLambdaContext

if TYPE_CHECKING:
    from tests.functional.conftest import OutboxTable, SnsTopic


def run_sns_publisher(
    records: list[dict[str, Any]],
    table: OutboxTable,
    topic: SnsTopic,
    *,
    sns: RecordingSns | None = None,
    max_request_bytes: int = SNS_MAX_REQUEST_BYTES,
    max_delivery_bytes: int = QUEUE_DELIVERY_BUDGET_BYTES,
) -> tuple[PublishResult, RecordingSns]:
    sns = sns or RecordingSns(topic.client)
    result = publish_stream_batch(
        records,  # type: ignore[arg-type]
        PublishDependencies(
            sink=SnsSink(
                sns,
                topic.arn,
                max_request_bytes=max_request_bytes,
                max_delivery_bytes=max_delivery_bytes,
            ),
            table_name=table.name,
            dynamodb_client=table.client,
            sleep=lambda _: None,
            clock=lambda: FIXED_NOW,
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )
    return result, sns


def call_sizes(sns: RecordingSns) -> list[int]:
    return [
        sum(
            sns_entry_size(
                entry["Message"],
                {name: value for name, value in entry["MessageAttributes"].items()},
            )
            for entry in call
        )
        for call in sns.calls
    ]


# ---------------------------------------------------------------------- happy paths


def test_sns_message_is_the_stored_json_with_type_and_source_attributes_for_filter_policies(
    outbox_table: OutboxTable, sns_topic: SnsTopic
) -> None:
    # GIVEN two committed outbox items
    outbox = write_outbox(outbox_table, 2)

    # WHEN their INSERT records are published to a standard topic
    result, _ = run_sns_publisher(outbox.records, outbox_table, sns_topic)

    # THEN the subscriber got the stored envelope JSON byte for byte, in order
    assert result.response() == {"batchItemFailures": []}
    received = sns_topic.received()
    assert [m.body for m in received] == [
        r["dynamodb"]["NewImage"][ATTR_ENVELOPE]["S"] for r in outbox.records
    ]
    # AND the attributes a filter policy needs, and no FIFO ids on a standard topic
    for message, envelope in zip(received, outbox.envelopes, strict=True):
        assert message.attributes == {"event_type": envelope.type, "source": envelope.source}
        assert (message.group_id, message.deduplication_id) == (None, None)
    # AND the published items are deleted
    assert outbox_sort_keys(outbox_table) == set()
    assert (result.published, result.deleted, result.send_calls) == (2, 2, 1)


def test_sns_batching_by_count_sends_25_records_as_10_10_5(
    outbox_table: OutboxTable, sns_topic: SnsTopic
) -> None:
    outbox = write_outbox(outbox_table, 25)

    result, sns = run_sns_publisher(outbox.records, outbox_table, sns_topic)

    assert result.response() == {"batchItemFailures": []}
    assert [len(call) for call in sns.calls] == [10, 10, 5]
    assert [i for call in sns.sent_ids() for i in call] == outbox.ids
    assert sorted(sns_topic.received_ids()) == sorted(outbox.ids)
    assert outbox_sort_keys(outbox_table) == set()
    # AND every entry id is unique within its call
    for call in sns.calls:
        assert len({entry["Id"] for entry in call}) == len(call)


def test_sns_batching_by_bytes_keeps_every_batch_within_256_kib_attributes_included(
    outbox_table: OutboxTable, sns_topic: SnsTopic
) -> None:
    # GIVEN five messages of about 100 KB: three would be over 256 KiB together
    outbox = write_outbox(outbox_table, 5, data_bytes=100_000)

    result, sns = run_sns_publisher(outbox.records, outbox_table, sns_topic)

    assert result.published == 5
    assert [len(call) for call in sns.calls] == [2, 2, 1]
    assert all(size <= SNS_MAX_REQUEST_BYTES for size in call_sizes(sns))
    assert sorted(sns_topic.received_ids()) == sorted(outbox.ids)
    assert outbox_sort_keys(outbox_table) == set()


def test_sns_message_over_256_kib_is_quarantined_never_sent_and_others_published(
    outbox_table: OutboxTable, sns_topic: SnsTopic
) -> None:
    seqs = sequence_numbers()
    before = write_outbox(outbox_table, 1, seqs=seqs)
    huge = write_outbox(outbox_table, 1, seqs=seqs, data_bytes=SNS_MAX_REQUEST_BYTES)
    after = write_outbox(outbox_table, 1, seqs=seqs)

    result, sns = run_sns_publisher(
        before.records + huge.records + after.records, outbox_table, sns_topic
    )

    assert result.response() == {"batchItemFailures": []}
    assert huge.ids[0] not in [i for call in sns.sent_ids() for i in call]
    assert sns_topic.received_ids() == before.ids + after.ids
    assert_quarantined(outbox_table, huge.sk(0), "too large for PublishBatch")


def test_the_same_record_twice_in_a_batch_gets_distinct_entry_ids(
    outbox_table: OutboxTable, sns_topic: SnsTopic
) -> None:
    # GIVEN a record delivered twice in one batch (at-least-once streams); SNS
    # rejects a whole call whose entry ids repeat
    outbox = write_outbox(outbox_table, 2)
    records = [*outbox.records, outbox_stream_record(outbox.envelopes[0], PK, "999")]

    result, sns = run_sns_publisher(records, outbox_table, sns_topic)

    assert result.response() == {"batchItemFailures": []}
    assert [len(call) for call in sns.calls] == [3]
    assert sorted(sns_topic.received_ids()) == sorted([*outbox.ids, outbox.ids[0]])
    assert outbox_sort_keys(outbox_table) == set()


# ------------------------------------------------------------------- Failed entries


@pytest.mark.parametrize(
    "failure",
    [
        {"Code": "InvalidParameter", "SenderFault": True},
        {"Code": "InvalidParameterValue", "SenderFault": True},
        {"Code": "ParameterValueInvalid", "SenderFault": True},
    ],
    ids=lambda failure: failure["Code"],
)
def test_failed_entry_with_sender_fault_is_quarantined_and_the_batch_goes_on(
    outbox_table: OutboxTable, sns_topic: SnsTopic, failure: dict[str, Any]
) -> None:
    # GIVEN three records; SNS refuses the second as the sender's fault
    outbox = write_outbox(outbox_table, 3)
    sns = RecordingSns(sns_topic.client, failures={outbox.ids[1]: failure})

    result, _ = run_sns_publisher(outbox.records, outbox_table, sns_topic, sns=sns)

    # THEN no checkpoint: the poison is quarantined, the others published and deleted
    assert result.response() == {"batchItemFailures": []}
    assert_quarantined(outbox_table, outbox.sk(1), failure["Code"])
    assert sorted(sns_topic.received_ids()) == sorted([outbox.ids[0], outbox.ids[2]])
    assert outbox_sort_keys(outbox_table) == {outbox.sk(1)}
    assert (result.quarantined, result.retryable_failures) == (1, 0)


def test_message_moto_itself_rejects_as_too_long_is_quarantined(
    outbox_table: OutboxTable, sns_topic: SnsTopic
) -> None:
    # GIVEN a sink told the topic takes 1 MiB (MaximumMessageSize raised) while the
    # topic still refuses more than 256 KiB: SNS answers Failed, SenderFault true
    seqs = sequence_numbers()
    good = write_outbox(outbox_table, 1, seqs=seqs)
    big = write_outbox(outbox_table, 1, seqs=seqs, data_bytes=300_000)

    result, _ = run_sns_publisher(
        good.records + big.records,
        outbox_table,
        sns_topic,
        max_request_bytes=SQS_MAX_MESSAGE_BYTES_CEILING,
        max_delivery_bytes=SQS_MAX_MESSAGE_BYTES_CEILING,
    )

    assert result.response() == {"batchItemFailures": []}
    assert sns_topic.received_ids() == good.ids
    assert_quarantined(outbox_table, big.sk(0), "InvalidParameter")


@pytest.mark.parametrize(
    "failure",
    [
        {"Code": "InternalError", "SenderFault": False},
        {"Code": "Throttled", "SenderFault": True},
        {"Code": "KMSThrottling", "SenderFault": True},
        {"Code": "KMSDisabled", "SenderFault": True},
        {"Code": "AuthorizationError", "SenderFault": True},
        {"Code": "SomethingAwsAddsLater", "SenderFault": False},
        {"Code": "NoSenderFaultField"},
    ],
    ids=lambda failure: failure["Code"],
)
def test_retryable_failed_entry_is_retried_then_checkpointed_never_quarantined(
    outbox_table: OutboxTable, sns_topic: SnsTopic, failure: dict[str, Any]
) -> None:
    # GIVEN 25 records; the 14th (second batch, 4th entry) fails retryably every time
    outbox = write_outbox(outbox_table, 25)
    sns = RecordingSns(sns_topic.client, failures={outbox.ids[13]: failure})

    result, _ = run_sns_publisher(outbox.records, outbox_table, sns_topic, sns=sns)

    # THEN it is sent again first in the next calls (five attempts), then Lambda
    # resumes at that record
    assert result.response() == {"batchItemFailures": [{"itemIdentifier": outbox.seq(13)}]}
    assert [len(call) for call in sns.calls] == [10, 10, 6, 1, 1, 1]
    # AND everything else is published and deleted; nothing is quarantined
    assert outbox_sort_keys(outbox_table) == {outbox.sk(13)}
    assert outbox_table.pending_sort_keys() == outbox_sort_keys(outbox_table)
    assert (result.retryable_failures, result.quarantine_calls) == (5, 0)


def test_entry_missing_from_the_answer_is_retried_and_not_deleted(
    outbox_table: OutboxTable, sns_topic: SnsTopic
) -> None:
    # GIVEN SNS answers for the first and third entry only
    outbox = write_outbox(outbox_table, 3)
    sns = RecordingSns(sns_topic.client, omitted={outbox.ids[1]})

    result, _ = run_sns_publisher(outbox.records, outbox_table, sns_topic, sns=sns)

    # THEN its fate is unknown: never deleted, Lambda resumes there
    assert result.response() == {"batchItemFailures": [{"itemIdentifier": outbox.seq(1)}]}
    assert outbox.sk(1) in outbox_sort_keys(outbox_table)
    assert outbox.sk(0) not in outbox_sort_keys(outbox_table)


@pytest.mark.parametrize(
    "error",
    [
        client_error("Throttled", "PublishBatch"),
        EndpointConnectionError(endpoint_url="https://sns.us-east-1.amazonaws.com"),
    ],
    ids=["client-error", "connection-error"],
)
def test_publish_batch_raising_is_retried_then_checkpointed_at_the_first_record_of_its_batch(
    outbox_table: OutboxTable, sns_topic: SnsTopic, error: Exception
) -> None:
    # GIVEN 15 records; every call after the first (records 10..14) raises
    outbox = write_outbox(outbox_table, 15)
    sns = RecordingSns(sns_topic.client, raise_on_calls=dict.fromkeys(range(1, 6), error))

    result, _ = run_sns_publisher(outbox.records, outbox_table, sns_topic, sns=sns)

    assert result.response() == {"batchItemFailures": [{"itemIdentifier": outbox.seq(10)}]}
    assert len(sns.calls) == 6, "the first call, then five attempts at the second"
    assert sorted(sns_topic.received_ids()) == sorted(outbox.ids[:10])
    assert outbox_sort_keys(outbox_table) == {outbox.sk(i) for i in range(10, 15)}


def test_publish_batch_raising_once_is_sent_again_and_everything_goes_out(
    outbox_table: OutboxTable, sns_topic: SnsTopic
) -> None:
    outbox = write_outbox(outbox_table, 15)
    failure = client_error("Throttled", "PublishBatch")
    sns = RecordingSns(sns_topic.client, raise_on_calls={1: failure})

    result, _ = run_sns_publisher(outbox.records, outbox_table, sns_topic, sns=sns)

    assert result.response() == {"batchItemFailures": []}
    assert sorted(sns_topic.received_ids()) == sorted(outbox.ids)
    assert outbox_sort_keys(outbox_table) == set()


# ----------------------------------------------------------------------------- FIFO


def test_fifo_topic_groups_by_subject_and_deduplicates_by_event_id(
    outbox_table: OutboxTable, sns_fifo_topic: SnsTopic
) -> None:
    # GIVEN events about two orders
    outbox = write_outbox(outbox_table, 4, subjects=["ORDER#1", "ORDER#2"])

    result, sns = run_sns_publisher(outbox.records, outbox_table, sns_fifo_topic)

    # THEN each entry names its aggregate as the group and its event id as the dedup id
    # (one entry per group and call: see test_publisher_ordered.py)
    assert result.response() == {"batchItemFailures": []}
    entries = [entry for call in sns.calls for entry in call]
    for entry, envelope in zip(entries, outbox.envelopes, strict=True):
        assert entry["MessageGroupId"] == envelope.subject
        assert entry["MessageDeduplicationId"] == envelope.id
    # AND the FIFO subscriber sees them with those ids, per group in write order
    received = sns_fifo_topic.received()
    assert sorted((m.group_id, m.deduplication_id) for m in received) == sorted(
        (e.subject, e.id) for e in outbox.envelopes
    )
    for subject in ("ORDER#1", "ORDER#2"):
        in_group = [m.event_id for m in received if m.group_id == subject]
        assert in_group == [e.id for e in outbox.envelopes if e.subject == subject]
    assert outbox_sort_keys(outbox_table) == set()


def test_fifo_subject_that_cannot_be_a_message_group_is_quarantined_before_sending(
    outbox_table: OutboxTable, sns_fifo_topic: SnsTopic
) -> None:
    # GIVEN a subject with a space (MessageGroupId allows no whitespace) between good ones
    seqs = sequence_numbers()
    first = write_outbox(outbox_table, 1, seqs=seqs, subjects=["ORDER#1"])
    bad = write_outbox(outbox_table, 1, seqs=seqs, subjects=["ORDER 2"])
    last = write_outbox(outbox_table, 1, seqs=seqs, subjects=["ORDER#3"])

    result, sns = run_sns_publisher(
        first.records + bad.records + last.records, outbox_table, sns_fifo_topic
    )

    assert result.response() == {"batchItemFailures": []}
    assert sns.sent_ids() == [first.ids + last.ids]
    assert_quarantined(outbox_table, bad.sk(0), "MessageGroupId")


# -------------------------------------------------------------------------- handler


@pytest.fixture
def sns_publisher_env(
    monkeypatch: pytest.MonkeyPatch, outbox_table: OutboxTable, sns_topic: SnsTopic
) -> Iterator[None]:
    monkeypatch.setenv("OUTBOX_PUBLISH_TO", "sns")
    monkeypatch.setenv("OUTBOX_TOPIC_ARN", sns_topic.arn)
    monkeypatch.delenv("OUTBOX_EVENT_BUS_NAME", raising=False)
    monkeypatch.setenv("OUTBOX_TABLE_NAME", outbox_table.name)
    publisher.default_runtime.cache_clear()
    publisher.metrics.clear_metrics()
    yield
    publisher.default_runtime.cache_clear()
    publisher.metrics.clear_metrics()


def test_handler_publishes_to_the_topic_when_the_environment_selects_sns(
    outbox_table: OutboxTable,
    sns_topic: SnsTopic,
    sns_publisher_env: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN OUTBOX_PUBLISH_TO=sns and no event bus configured at all
    outbox = write_outbox(outbox_table, 3)

    response = publisher.handler(stream_event(outbox.records), FakeLambdaContext())

    # THEN the events went to the topic and the items are gone
    assert response == {"batchItemFailures": []}
    assert sns_topic.received_ids() == outbox.ids
    assert outbox_sort_keys(outbox_table) == set()
    # AND the calls are counted under the SNS API's name
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    assert (emf[0]["PublishedEvents"], emf[0]["PublishBatchCalls"]) == ([3.0], [1.0])
    assert "PutEventsCalls" not in emf[0]


def test_handler_with_sns_selected_but_no_topic_fails_naming_the_variable(
    outbox_table: OutboxTable, sns_publisher_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OUTBOX_TOPIC_ARN")
    publisher.default_runtime.cache_clear()
    outbox = write_outbox(outbox_table, 1)

    with pytest.raises(ConfigurationError, match="OUTBOX_TOPIC_ARN"):
        publisher.handler(stream_event(outbox.records), FakeLambdaContext())

    assert outbox_sort_keys(outbox_table) == {outbox.sk(0)}
