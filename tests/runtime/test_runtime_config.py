"""Mapping configs (built, read from the emulator, validated), the clock, and a whole flow."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import boto3
import pytest
from runtime_helpers import Queue, Recorder, Table, make_queue, sort_keys

from dynamodb_outbox.local import (
    LocalRuntime,
    MappingConfigError,
    SqsMapping,
    StreamMapping,
    StreamMappingSettings,
    VirtualClock,
    disable_emulator_mappings,
    mapping_config,
    read_mappings,
)

STREAM_ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/outbox/stream/2026-01-01T00:00:00.000"
QUEUE_ARN = "arn:aws:sqs:eu-west-1:123456789012:consumer"


# ---------------------------------------------------------------- clock


def test_the_virtual_clock_moves_only_when_told_and_only_forward() -> None:
    clock = VirtualClock(start=1_000.0)
    assert clock.now() == 1_000.0
    assert clock.advance(86_400) == 87_400.0
    assert clock.advance_to(50.0) == 87_400.0
    with pytest.raises(ValueError, match="forward"):
        clock.advance(-1)


# ---------------------------------------------------------------- built configs


def test_mapping_config_fills_in_the_aws_defaults_of_a_stream_mapping() -> None:
    config = mapping_config(STREAM_ARN)
    assert config["BatchSize"] == 100
    assert config["StartingPosition"] == "TRIM_HORIZON"
    assert config["MaximumBatchingWindowInSeconds"] == 0
    assert config["MaximumRetryAttempts"] == -1
    assert config["MaximumRecordAgeInSeconds"] == -1
    assert config["BisectBatchOnFunctionError"] is False
    assert config["ParallelizationFactor"] == 1
    assert config["FunctionResponseTypes"] == []
    assert config["DestinationConfig"] == {"OnFailure": {}}
    assert config["State"] == "Enabled"


def test_mapping_config_writes_filters_and_destination_in_the_api_shape() -> None:
    config = mapping_config(
        STREAM_ARN,
        filter_patterns=[{"eventName": ["INSERT"]}],
        on_failure_destination=QUEUE_ARN,
        report_batch_item_failures=True,
    )
    assert config["FilterCriteria"] == {"Filters": [{"Pattern": '{"eventName": ["INSERT"]}'}]}
    assert config["DestinationConfig"] == {"OnFailure": {"Destination": QUEUE_ARN}}
    assert config["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_mapping_config_of_a_queue_has_the_sqs_defaults_and_refuses_stream_settings() -> None:
    config = mapping_config(QUEUE_ARN, maximum_concurrency=5)
    assert config["BatchSize"] == 10
    assert config["ScalingConfig"] == {"MaximumConcurrency": 5}
    assert "StartingPosition" not in config
    with pytest.raises(MappingConfigError, match="stream-only"):
        mapping_config(QUEUE_ARN, maximum_retry_attempts=3)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ParallelizationFactor": 11}, "ParallelizationFactor"),
        ({"TumblingWindowInSeconds": 60}, "TumblingWindowInSeconds"),
        ({"BatchSize": 10_001}, "BatchSize"),
        ({"MaximumBatchingWindowInSeconds": 301}, "MaximumBatchingWindowInSeconds"),
        ({"MaximumRetryAttempts": 10_001}, "MaximumRetryAttempts"),
        ({"MaximumRecordAgeInSeconds": 59}, "MaximumRecordAgeInSeconds"),
        ({"StartingPosition": "AT_TIMESTAMP"}, "AT_TIMESTAMP"),
        ({"FunctionResponseTypes": ["ReportItemFailures"]}, "FunctionResponseTypes"),
        ({"State": "Disabled"}, "Disabled"),
        (
            {"DestinationConfig": {"OnFailure": {"Destination": "arn:aws:s3:::bucket"}}},
            "SQS queues only",
        ),
    ],
)
def test_a_stream_setting_the_runtime_cannot_honour_is_refused(
    change: dict[str, Any], message: str
) -> None:
    config = {**mapping_config(STREAM_ARN), **change}
    with pytest.raises(MappingConfigError, match=message):
        StreamMappingSettings.from_config(config)


def test_a_sparse_config_as_moto_lists_it_gets_the_aws_defaults() -> None:
    settings = StreamMappingSettings.from_config({"EventSourceArn": STREAM_ARN})
    assert settings.batch_size == 100
    assert settings.maximum_retry_attempts == -1
    assert settings.maximum_record_age_seconds == -1
    assert settings.report_batch_item_failures is False
    assert settings.on_failure_destination is None


# ---------------------------------------------------------------- configs read from moto


def _function(boto_session: boto3.Session, name: str) -> str:
    role = boto_session.client("iam").create_role(
        RoleName=f"{name}-role", AssumeRolePolicyDocument="{}"
    )["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return None\n")
    return str(
        boto_session.client("lambda").create_function(
            FunctionName=name,
            Runtime="python3.11",
            Role=role,
            Handler="handler.handler",
            Code={"ZipFile": code.getvalue()},
        )["FunctionArn"]
    )


def test_an_sqs_mapping_read_from_the_emulator_drives_the_queue_once_disabled_there(
    boto_session: boto3.Session, sqs: Any, clock: VirtualClock
) -> None:
    # GIVEN a consumer function and its queue mapping, created in the emulator
    function_arn = _function(boto_session, "consumer")
    queue = make_queue(sqs, "orders", VisibilityTimeout=30)
    lambda_client = boto_session.client("lambda")
    lambda_client.create_event_source_mapping(
        FunctionName="consumer",
        EventSourceArn=queue.arn,
        BatchSize=2,
        FunctionResponseTypes=["ReportBatchItemFailures"],
    )
    # WHEN the runtime reads it, and the emulator's copy is switched off
    [config] = read_mappings(lambda_client, "consumer")
    disable_emulator_mappings(lambda_client, [config])
    for n in range(3):
        queue.send(f"m{n}")
    handler = Recorder()
    mapping = SqsMapping(config, handler, sqs_client=sqs, clock=clock)
    mapping.drain()
    # THEN the runtime applies the deployed settings, and is the only receiver
    assert mapping.settings.function_arn == function_arn
    assert mapping.settings.report_batch_item_failures is True
    assert [len(e["Records"]) for e in handler.events] == [2, 1]
    assert {
        r["attributes"]["ApproximateReceiveCount"] for e in handler.events for r in e["Records"]
    } == {"1"}


def test_moto_receives_an_sqs_queue_itself_while_it_holds_an_enabled_mapping(
    boto_session: boto3.Session, sqs: Any
) -> None:
    # Why disable_emulator_mappings exists: moto "invokes" the function on every send,
    # receiving the queue's messages (and bumping their receive count).
    _function(boto_session, "consumer")
    queue = make_queue(sqs, "orders")
    boto_session.client("lambda").create_event_source_mapping(
        FunctionName="consumer", EventSourceArn=queue.arn
    )
    queue.send("m0")
    queue.send("m1")
    message = sqs.receive_message(
        QueueUrl=queue.url, MessageSystemAttributeNames=["All"], MaxNumberOfMessages=1
    )["Messages"][0]
    assert int(message["Attributes"]["ApproximateReceiveCount"]) > 1


def test_moto_discards_stream_records_while_it_holds_a_stream_mapping(
    boto_session: boto3.Session, table: Table, streams: Any, clock: VirtualClock
) -> None:
    # Why stream mappings must not be created in moto for runtime tests: even
    # disabled and deleted, moto's mapping swallows the stream's records.
    _function(boto_session, "publisher")
    lambda_client = boto_session.client("lambda")
    created = lambda_client.create_event_source_mapping(
        FunctionName="publisher", EventSourceArn=table.stream_arn, StartingPosition="TRIM_HORIZON"
    )
    configs = read_mappings(lambda_client, "publisher")
    with pytest.raises(MappingConfigError, match="discards the stream's records"):
        disable_emulator_mappings(lambda_client, configs)
    lambda_client.update_event_source_mapping(UUID=created["UUID"], Enabled=False)
    lambda_client.delete_event_source_mapping(UUID=created["UUID"])
    table.put_outbox(1)
    handler = Recorder()
    StreamMapping(configs[0], handler, streams_client=streams, clock=clock).drain()
    assert handler.events == []


# ---------------------------------------------------------------- a whole flow


def test_a_local_runtime_drains_a_flow_across_mappings_and_windows(
    table: Table, streams: Any, sqs: Any, clock: VirtualClock
) -> None:
    # GIVEN a publisher that forwards outbox inserts to a queue, and a consumer of that
    # queue; both with batching windows
    queue: Queue = make_queue(sqs, "events", VisibilityTimeout=30)

    def publisher(event: dict[str, Any], context: Any) -> None:
        for key in sort_keys(event):
            queue.send(json.dumps({"id": key}))

    consumer = Recorder()
    runtime = LocalRuntime(clock)
    runtime.add(
        StreamMapping(
            mapping_config(
                table.stream_arn,
                filter_patterns=[{"dynamodb": {"Keys": {"SK": {"S": [{"prefix": "OUTBOX#"}]}}}}],
                maximum_batching_window_seconds=2,
            ),
            publisher,
            streams_client=streams,
            clock=clock,
        )
    )
    runtime.add(
        SqsMapping(
            mapping_config(queue.arn, batch_size=50, maximum_batching_window_seconds=5),
            consumer,
            sqs_client=sqs,
            clock=clock,
        )
    )
    table.put("ORDER#1", "ORDER")
    table.put_outbox(3)
    started = clock.now()
    # WHEN the runtime drains
    runtime.drain()
    # THEN every outbox event reached the consumer, in one batch, after both windows
    assert [[json.loads(r["body"])["id"] for r in e["Records"]] for e in consumer.events] == [
        ["OUTBOX#000000", "OUTBOX#000001", "OUTBOX#000002"]
    ]
    assert clock.now() == pytest.approx(started + 2 + 5)
