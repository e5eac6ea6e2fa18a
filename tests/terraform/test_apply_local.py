"""Apply examples/local to a moto server once per session and check the live resources.

pytest-terraform (0.7.0) runs init/plan/apply in examples/local, with
TF_DATA_DIR and the state in a temporary directory, and destroys the stack at
the end of the session. It finds the module by name under a "module dir"; the
``local_stack`` fixture points that at examples/ and passes the emulator's URL
and the provider-mirror CLI config through the environment it runs terraform
in.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dynamodb_outbox.consumer import parse_body
from dynamodb_outbox.envelope import Envelope
from tests.terraform.tfhelpers import EXAMPLES_DIR, describe, run_terraform

pytestmark = [pytest.mark.terraform, pytest.mark.apply]

OUTBOX_FILTER = {
    "eventName": ["INSERT"],
    "dynamodb": {"Keys": {"SK": {"S": [{"prefix": "OUTBOX#"}]}}},
}
FOURTEEN_DAYS_SECONDS = 14 * 24 * 3600


def test_table_has_a_new_image_stream_pitr_and_encryption(
    aws_client: Callable[[str], Any], outputs: dict[str, Any]
) -> None:
    dynamodb = aws_client("dynamodb")

    table = dynamodb.describe_table(TableName=outputs["table_name"])["Table"]
    backups = dynamodb.describe_continuous_backups(TableName=outputs["table_name"])

    assert table["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    assert table["LatestStreamArn"] == outputs["table_stream_arn"]
    assert table["SSEDescription"]["Status"] == "ENABLED"
    assert (
        backups["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"][
            "PointInTimeRecoveryStatus"
        ]
        == "ENABLED"
    )


def test_table_has_string_pk_sk_keys_and_ttl(
    aws_client: Callable[[str], Any], outputs: dict[str, Any]
) -> None:
    dynamodb = aws_client("dynamodb")

    table = dynamodb.describe_table(TableName=outputs["table_name"])["Table"]
    ttl = dynamodb.describe_time_to_live(TableName=outputs["table_name"])

    assert {k["AttributeName"]: k["KeyType"] for k in table["KeySchema"]} == {
        "PK": "HASH",
        "SK": "RANGE",
    }
    assert {a["AttributeName"]: a["AttributeType"] for a in table["AttributeDefinitions"]} == {
        "PK": "S",
        "SK": "S",
        "outbox_pending_shard": "S",
    }
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    (pending,) = table["GlobalSecondaryIndexes"]
    assert pending["IndexName"] == "outbox-pending"
    assert {k["AttributeName"]: k["KeyType"] for k in pending["KeySchema"]} == {
        "outbox_pending_shard": "HASH",
        "SK": "RANGE",
    }
    assert pending["Projection"]["ProjectionType"] == "KEYS_ONLY"
    assert ttl["TimeToLiveDescription"] == {
        "TimeToLiveStatus": "ENABLED",
        "AttributeName": "expires_at",
    }


def test_publisher_function_runs_the_publisher_handler(
    aws_client: Callable[[str], Any], outputs: dict[str, Any]
) -> None:
    config = aws_client("lambda").get_function(FunctionName=outputs["publisher_function_name"])[
        "Configuration"
    ]

    assert config["FunctionArn"] == outputs["publisher_function_arn"]
    assert config["Handler"] == "dynamodb_outbox.publisher.handler"
    assert config["Runtime"] == "python3.13"
    assert config["Architectures"] == ["arm64"]
    assert config["Role"] == outputs["publisher_role_arn"]
    assert config["Environment"]["Variables"] == {
        "OUTBOX_TABLE_NAME": outputs["table_name"],
        "OUTBOX_PARTITION_KEY": "PK",
        "OUTBOX_SORT_KEY": "SK",
        "OUTBOX_PUBLISH_TO": "eventbridge",
        "OUTBOX_EVENT_BUS_NAME": outputs["event_bus_name"],
        "OUTBOX_SWEEPER_ENABLED": "true",
        "POWERTOOLS_SERVICE_NAME": "outbox-local",
        "POWERTOOLS_METRICS_NAMESPACE": "DynamoDBOutbox",
        "LOG_LEVEL": "INFO",
    }
    assert config.get("Layers", []) == []  # powertools_layer_arn = "" in examples/local


def test_stream_mapping_reads_outbox_inserts_from_trim_horizon_and_fails_safely(
    aws_client: Callable[[str], Any], outputs: dict[str, Any]
) -> None:
    mappings = aws_client("lambda").list_event_source_mappings(
        FunctionName=outputs["publisher_function_name"]
    )["EventSourceMappings"]

    assert len(mappings) == 1
    mapping = mappings[0]
    assert mapping["UUID"] == outputs["stream_mapping_uuid"]
    assert mapping["EventSourceArn"] == outputs["table_stream_arn"]
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    patterns = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
    assert patterns == [OUTBOX_FILTER]
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["MaximumRetryAttempts"] == 10
    assert mapping["MaximumRecordAgeInSeconds"] == 86400
    assert mapping["BatchSize"] == 100
    assert (
        mapping["DestinationConfig"]["OnFailure"]["Destination"] == outputs["on_failure_queue_arn"]
    )


def test_on_failure_queue_is_encrypted_and_keeps_messages_14_days(
    aws_client: Callable[[str], Any], outputs: dict[str, Any]
) -> None:
    attributes = aws_client("sqs").get_queue_attributes(
        QueueUrl=outputs["on_failure_queue_url"], AttributeNames=["All"]
    )["Attributes"]

    assert attributes["QueueArn"] == outputs["on_failure_queue_arn"]
    assert attributes["SqsManagedSseEnabled"] == "true"
    assert int(attributes["MessageRetentionPeriod"]) == FOURTEEN_DAYS_SECONDS


def test_event_bus_exists(aws_client: Callable[[str], Any], outputs: dict[str, Any]) -> None:
    bus = aws_client("events").describe_event_bus(Name=outputs["event_bus_name"])

    assert bus["Arn"] == outputs["event_bus_arn"]


def test_event_bus_names_its_dlq(aws_client: Callable[[str], Any], outputs: dict[str, Any]) -> None:
    """Events the bus accepted but cannot encrypt or decrypt go to its DLQ, not away."""
    bus = aws_client("events").describe_event_bus(Name=outputs["event_bus_name"])

    assert bus.get("DeadLetterConfig") == {"Arn": outputs["event_bus_dlq_arn"]}


def test_event_bus_dlq_keeps_14_days_on_sse_sqs_and_takes_no_redrives(
    aws_client: Callable[[str], Any], outputs: dict[str, Any]
) -> None:
    attributes = aws_client("sqs").get_queue_attributes(
        QueueUrl=outputs["event_bus_dlq_url"], AttributeNames=["All"]
    )["Attributes"]

    assert attributes["QueueArn"] == outputs["event_bus_dlq_arn"]
    assert attributes["SqsManagedSseEnabled"] == "true"
    assert "KmsMasterKeyId" not in attributes
    assert int(attributes["MessageRetentionPeriod"]) == FOURTEEN_DAYS_SECONDS
    assert json.loads(attributes["RedriveAllowPolicy"]) == {"redrivePermission": "denyAll"}


def test_event_bus_dlq_policy_lets_only_the_bus_send(
    aws_client: Callable[[str], Any], outputs: dict[str, Any]
) -> None:
    attributes = aws_client("sqs").get_queue_attributes(
        QueueUrl=outputs["event_bus_dlq_url"], AttributeNames=["Policy"]
    )["Attributes"]

    statements = json.loads(attributes["Policy"])["Statement"]
    assert len(statements) == 1
    statement = statements[0]
    assert statement["Effect"] == "Allow"
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert _as_list(statement["Action"]) == ["sqs:SendMessage"]
    assert _as_list(statement["Resource"]) == [outputs["event_bus_dlq_arn"]]
    assert statement["Condition"] == {"ArnEquals": {"aws:SourceArn": outputs["event_bus_arn"]}}


def test_event_bus_dlq_alarm_fires_on_any_message(
    aws_client: Callable[[str], Any], outputs: dict[str, Any]
) -> None:
    queue_name = outputs["event_bus_dlq_arn"].rsplit(":", 1)[1]
    alarms = aws_client("cloudwatch").describe_alarms(AlarmNames=[f"{queue_name}-depth"])[
        "MetricAlarms"
    ]

    assert [
        (a["Namespace"], a["MetricName"], a["ComparisonOperator"], a["Threshold"], a["Dimensions"])
        for a in alarms
    ] == [
        (
            "AWS/SQS",
            "ApproximateNumberOfMessagesVisible",
            "GreaterThanThreshold",
            0.0,
            [{"Name": "QueueName", "Value": queue_name}],
        )
    ]


def test_log_group_exists_with_retention(
    aws_client: Callable[[str], Any], outputs: dict[str, Any]
) -> None:
    groups = aws_client("logs").describe_log_groups(
        logGroupNamePrefix=outputs["publisher_log_group_name"]
    )["logGroups"]

    assert [(g["logGroupName"], g["retentionInDays"]) for g in groups] == [
        (f"/aws/lambda/{outputs['publisher_function_name']}", 7)
    ]


def test_publisher_role_policy_is_scoped_to_the_stack_arns(
    aws_client: Callable[[str], Any], outputs: dict[str, Any]
) -> None:
    iam = aws_client("iam")
    role_name = outputs["publisher_role_arn"].rsplit("/", 1)[1]
    policy_names = iam.list_role_policies(RoleName=role_name)["PolicyNames"]
    assert len(policy_names) == 1
    document = iam.get_role_policy(RoleName=role_name, PolicyName=policy_names[0])["PolicyDocument"]
    if isinstance(document, str):
        document = json.loads(document)

    resources = {s["Sid"]: _as_list(s["Resource"]) for s in document["Statement"]}
    log_group_arn = outputs["publisher_function_arn"].replace(":lambda:", ":logs:", 1)
    log_group_arn = log_group_arn.replace(":function:", ":log-group:/aws/lambda/", 1)

    assert resources == {
        "ReadOutboxStream": [outputs["table_stream_arn"]],
        "DeletePublishedItems": [outputs["table_arn"]],
        "QuarantinePoisonItems": [outputs["table_arn"]],
        "PublishEvents": [outputs["event_bus_arn"]],
        "SendFailedBatchRecords": [outputs["on_failure_queue_arn"]],
        "WriteOwnLogs": [f"{log_group_arn}:*"],
    }
    assert all(s["Effect"] == "Allow" for s in document["Statement"])
    assert attached_policies(iam, role_name) == []


CONSUMER = "audit"  # examples/local's one consumer: the reference consumer
CONSUMER_FUNCTION_TIMEOUT_SECONDS = 30  # the module's default


@pytest.fixture(scope="session")
def consumer(outputs: dict[str, Any]) -> dict[str, Any]:
    consumers: dict[str, dict[str, Any]] = outputs["consumers"]
    assert list(consumers) == [CONSUMER]
    return consumers[CONSUMER]


def test_consumer_queue_is_encrypted_hidden_six_function_timeouts_and_redrives_after_5(
    aws_client: Callable[[str], Any], consumer: dict[str, Any]
) -> None:
    attributes = aws_client("sqs").get_queue_attributes(
        QueueUrl=consumer["queue_url"], AttributeNames=["All"]
    )["Attributes"]

    assert attributes["QueueArn"] == consumer["queue_arn"]
    assert attributes["SqsManagedSseEnabled"] == "true"
    assert int(attributes["VisibilityTimeout"]) == 6 * CONSUMER_FUNCTION_TIMEOUT_SECONDS
    redrive = json.loads(attributes["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == consumer["dlq_arn"]
    assert int(redrive["maxReceiveCount"]) == 5


def test_consumer_dlq_keeps_14_days_and_takes_redrives_only_from_its_queue(
    aws_client: Callable[[str], Any], consumer: dict[str, Any]
) -> None:
    attributes = aws_client("sqs").get_queue_attributes(
        QueueUrl=consumer["dlq_url"], AttributeNames=["All"]
    )["Attributes"]

    assert attributes["QueueArn"] == consumer["dlq_arn"]
    assert attributes["SqsManagedSseEnabled"] == "true"
    assert int(attributes["MessageRetentionPeriod"]) == FOURTEEN_DAYS_SECONDS
    assert json.loads(attributes["RedriveAllowPolicy"]) == {
        "redrivePermission": "byQueue",
        "sourceQueueArns": [consumer["queue_arn"]],
    }


@pytest.mark.parametrize("queue", ["queue", "dlq"])
def test_consumer_queue_policies_let_only_the_rule_send(
    aws_client: Callable[[str], Any], consumer: dict[str, Any], queue: str
) -> None:
    attributes = aws_client("sqs").get_queue_attributes(
        QueueUrl=consumer[f"{queue}_url"], AttributeNames=["Policy"]
    )["Attributes"]

    statements = {s["Effect"]: s for s in json.loads(attributes["Policy"])["Statement"]}
    assert statements.keys() == {"Allow", "Deny"}
    allow, deny = statements["Allow"], statements["Deny"]
    assert allow["Principal"] == {"Service": "events.amazonaws.com"}
    assert _as_list(allow["Action"]) == ["sqs:SendMessage"]
    assert _as_list(allow["Resource"]) == [consumer[f"{queue}_arn"]]
    assert allow["Condition"] == {"ArnEquals": {"aws:SourceArn": consumer["rule_arn"]}}
    # Every IAM principal is refused (examples/local names no operator); AWS
    # services are left to the Allow.
    assert deny["Principal"] in ("*", {"AWS": "*"})
    assert _as_list(deny["Action"]) == ["sqs:SendMessage"]
    assert deny["Condition"] == {"BoolIfExists": {"aws:PrincipalIsAWSService": "false"}}


def test_the_bus_admits_only_the_publisher_and_sweeper(
    aws_client: Callable[[str], Any], outputs: dict[str, Any]
) -> None:
    policy = json.loads(
        aws_client("events").describe_event_bus(Name=outputs["event_bus_name"])["Policy"]
    )
    statements = {s["Effect"]: s for s in policy["Statement"]}
    admitted = sorted(_as_list(statements["Allow"]["Principal"]["AWS"]))
    publisher = outputs["publisher_role_arn"]
    sweeper = publisher.removesuffix("-publisher") + "-sweeper"
    assert admitted == sorted([publisher, sweeper])
    deny = statements["Deny"]["Condition"]
    assert sorted(_as_list(deny["ArnNotLike"]["aws:PrincipalArn"])) == admitted
    assert deny["BoolIfExists"] == {"aws:PrincipalIsAWSService": "false"}


def test_consumer_rule_matches_the_event_source_and_targets_the_queue_with_dlq_and_retries(
    aws_client: Callable[[str], Any], outputs: dict[str, Any], consumer: dict[str, Any]
) -> None:
    events = aws_client("events")
    rule_name = consumer["rule_arn"].rsplit("/", 1)[1]

    rule = events.describe_rule(Name=rule_name, EventBusName=outputs["event_bus_name"])
    targets = events.list_targets_by_rule(Rule=rule_name, EventBusName=outputs["event_bus_name"])[
        "Targets"
    ]

    assert rule["Arn"] == consumer["rule_arn"]
    assert json.loads(rule["EventPattern"]) == {"source": [outputs["event_source"]]}
    assert len(targets) == 1
    target = targets[0]
    assert target["Arn"] == consumer["queue_arn"]
    assert target["DeadLetterConfig"] == {"Arn": consumer["dlq_arn"]}
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 185, "MaximumEventAgeInSeconds": 86400}
    assert "RoleArn" not in target


def test_consumer_mapping_reports_batch_item_failures(
    aws_client: Callable[[str], Any], consumer: dict[str, Any]
) -> None:
    mapping = aws_client("lambda").get_event_source_mapping(
        UUID=consumer["event_source_mapping_uuid"]
    )

    assert mapping["EventSourceArn"] == consumer["queue_arn"]
    assert mapping["FunctionArn"] == consumer["function_arn"]
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BatchSize"] == 10


def test_event_source_mappings_carry_the_stacks_tags(
    aws_client: Callable[[str], Any], outputs: dict[str, Any], consumer: dict[str, Any]
) -> None:
    lambda_client = aws_client("lambda")

    tags = {
        uuid: lambda_client.list_tags(
            Resource=lambda_client.get_event_source_mapping(UUID=uuid)["EventSourceMappingArn"]
        )["Tags"]
        for uuid in (outputs["stream_mapping_uuid"], consumer["event_source_mapping_uuid"])
    }

    assert tags == {
        outputs["stream_mapping_uuid"]: {"Environment": "local"},
        consumer["event_source_mapping_uuid"]: {"Environment": "local"},
    }


def test_reference_consumer_runs_the_bundled_handler_with_its_own_scoped_role(
    aws_client: Callable[[str], Any], outputs: dict[str, Any], consumer: dict[str, Any]
) -> None:
    lambda_client = aws_client("lambda")
    iam = aws_client("iam")

    config = lambda_client.get_function(FunctionName=consumer["function_name"])["Configuration"]
    role_name = consumer["role_arn"].rsplit("/", 1)[1]
    policy_names = iam.list_role_policies(RoleName=role_name)["PolicyNames"]
    document = iam.get_role_policy(RoleName=role_name, PolicyName=policy_names[0])["PolicyDocument"]
    if isinstance(document, str):
        document = json.loads(document)

    assert config["FunctionArn"] == consumer["function_arn"]
    assert config["Handler"] == "dynamodb_outbox.reference_consumer.handler"
    assert config["Timeout"] == CONSUMER_FUNCTION_TIMEOUT_SECONDS
    assert config["Role"] == consumer["role_arn"]
    # The window modules/windows derives (tests/terraform/windows.tftest.hcl pins
    # it), the same the output gives a caller's own function.
    assert consumer["environment"]["OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"] == str(
        consumer["idempotency_expires_after_seconds"]
    )
    assert config["Environment"]["Variables"] == {
        **consumer["environment"],
        "OUTBOX_IDEMPOTENCY_TABLE": outputs["idempotency_table_name"],
        "OUTBOX_CONSUMER_NAME": CONSUMER,
        "OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS": "1728000",
        "POWERTOOLS_SERVICE_NAME": f"outbox-local-{CONSUMER}",
        "POWERTOOLS_METRICS_NAMESPACE": "DynamoDBOutbox",
        "OUTBOX_CONSUMER_TRANSPORT": "eventbridge",
        "OUTBOX_CONSUMER_EVENT_BUS_ARN": outputs["event_bus_arn"],
    }
    assert len(policy_names) == 1
    resources = {s["Sid"]: _as_list(s["Resource"]) for s in document["Statement"]}
    assert resources == {
        "ConsumeQueue": [consumer["queue_arn"]],
        "KeepIdempotencyRecords": [outputs["idempotency_table_arn"]],
        "WriteOwnLogs": [
            consumer["function_arn"]
            .replace(":lambda:", ":logs:", 1)
            .replace(":function:", ":log-group:/aws/lambda/", 1)
            + ":*"
        ],
    }
    assert attached_policies(iam, role_name) == []


def test_idempotency_table_keys_on_id_with_ttl_on_expiration(
    aws_client: Callable[[str], Any], outputs: dict[str, Any]
) -> None:
    dynamodb = aws_client("dynamodb")

    table = dynamodb.describe_table(TableName=outputs["idempotency_table_name"])["Table"]
    ttl = dynamodb.describe_time_to_live(TableName=outputs["idempotency_table_name"])

    assert table["TableArn"] == outputs["idempotency_table_arn"]
    assert table["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]
    assert table["SSEDescription"]["Status"] == "ENABLED"
    assert ttl["TimeToLiveDescription"] == {
        "TimeToLiveStatus": "ENABLED",
        "AttributeName": "expiration",
    }


def test_layer_holds_the_committed_layer_zip_for_the_runtime_and_architecture(
    aws_client: Callable[[str], Any], outputs: dict[str, Any]
) -> None:
    # arn:aws:lambda:<region>:<account>:layer:<name>:<version>; moto 5.2.5 answers
    # GetLayerVersionByArn with a server error, GetLayerVersion works.
    layer_name, version = outputs["layer_arn"].split(":")[-2:]
    layer = aws_client("lambda").get_layer_version(LayerName=layer_name, VersionNumber=int(version))
    layer_zip = (EXAMPLES_DIR.parent / "package" / "dynamodb_outbox_layer.zip").read_bytes()

    assert layer["CompatibleRuntimes"] == ["python3.13"]
    assert layer["CompatibleArchitectures"] == ["arm64"]
    assert (
        layer["Content"]["CodeSha256"]
        == base64.b64encode(hashlib.sha256(layer_zip).digest()).decode()
    )


def test_event_put_on_the_bus_reaches_the_consumer_queue_and_others_do_not(
    aws_client: Callable[[str], Any], outputs: dict[str, Any], consumer: dict[str, Any]
) -> None:
    """EventBridge -> rule -> SQS target, on the emulator.

    moto acts on an ENABLED SQS mapping itself: on every SendMessage it receives
    the message and tries to invoke the function (it cannot, without Docker).
    The mapping is disabled for the test and enabled again after it, so the
    stack still matches its configuration.
    """
    lambda_client = aws_client("lambda")
    sqs = aws_client("sqs")
    events = aws_client("events")
    envelope = Envelope(
        type="OrderCreated",
        source=outputs["event_source"],
        subject="ORDER#1001",
        data={"order_id": "1001", "total": 42.5},
    )
    uuid = consumer["event_source_mapping_uuid"]
    lambda_client.update_event_source_mapping(UUID=uuid, Enabled=False)
    try:
        result = events.put_events(
            Entries=[
                {
                    "EventBusName": outputs["event_bus_name"],
                    "Source": "someone.else",
                    "DetailType": "OrderCreated",
                    "Detail": envelope.to_json(),
                },
                {
                    "EventBusName": outputs["event_bus_name"],
                    "Source": envelope.source,
                    "DetailType": envelope.type,
                    "Detail": envelope.to_json(),
                },
            ]
        )
        assert result["FailedEntryCount"] == 0, result

        messages = sqs.receive_message(
            QueueUrl=consumer["queue_url"], MaxNumberOfMessages=10, WaitTimeSeconds=1
        ).get("Messages", [])
        for message in messages:
            sqs.delete_message(
                QueueUrl=consumer["queue_url"], ReceiptHandle=message["ReceiptHandle"]
            )
    finally:
        lambda_client.update_event_source_mapping(UUID=uuid, Enabled=True)

    assert len(messages) == 1, messages
    body = json.loads(messages[0]["Body"])
    assert body["source"] == outputs["event_source"]
    assert body["detail-type"] == "OrderCreated"
    assert body["detail"] == envelope.to_dict()
    assert parse_body(messages[0]["Body"]) == envelope


def test_archive_keeps_the_bus_events_7_days_for_replay(
    aws_client: Callable[[str], Any], outputs: dict[str, Any]
) -> None:
    archive = aws_client("events").describe_archive(ArchiveName=outputs["event_archive_name"])

    assert archive["ArchiveArn"] == outputs["event_archive_arn"]
    assert archive["EventSourceArn"] == outputs["event_bus_arn"]
    assert archive["RetentionDays"] == 7
    assert archive["State"] == "ENABLED"


# Metrics AWS documents for the namespaces the dashboard draws from, with the
# dimensions it uses them with (AWS docs: "Lambda function metrics", "Available
# CloudWatch metrics for Amazon SQS", "DynamoDB Metrics and dimensions").
AWS_METRICS: dict[str, tuple[set[str], set[str]]] = {
    "AWS/Lambda": (
        {"Invocations", "Errors", "Throttles", "Duration", "IteratorAge"},
        {"FunctionName"},
    ),
    "AWS/SQS": (
        {
            "ApproximateAgeOfOldestMessage",
            "ApproximateNumberOfMessagesDelayed",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesVisible",
            "NumberOfMessagesDeleted",
            "NumberOfMessagesReceived",
            "NumberOfMessagesSent",
        },
        {"QueueName"},
    ),
    "AWS/DynamoDB": (
        {"SuccessfulRequestLatency", "ConsumedWriteCapacityUnits", "TransactionConflict"},
        {"TableName", "Operation"},
    ),
    "AWS/Events": (
        {"FailedInvocations", "Invocations", "MatchedEvents"},
        {"RuleName", "EventBusName"},
    ),
}


class _Recorder:
    """Stands in for Powertools Metrics: collects the names the code adds."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def add_metric(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.names.add(name)


def emitted_metric_names() -> set[str]:
    """Every metric name lambda/dynamodb_outbox emits, from the code that emits them."""
    from dynamodb_outbox import publisher, sweeper
    from dynamodb_outbox.consumer import _processing as processing
    from dynamodb_outbox.publishing import PublishResult

    recorder = _Recorder()
    publisher.record_metrics(PublishResult(), recorder)
    sweeper.record_metrics(sweeper.SweepResult(), recorder, "PutEvents")
    return recorder.names | {
        processing.METRIC_PROCESSED,
        processing.METRIC_FAILED,
        processing.METRIC_DUPLICATE,
        processing.METRIC_UNATTEMPTED,
    }


def dashboard_metrics(body: dict[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
    """(namespace, metric, dimensions) of every metric line of every widget."""
    found = []
    for widget in body["widgets"]:
        for line in widget["properties"]["metrics"]:
            names = [part for part in line if isinstance(part, str)]
            namespace, metric, dimension_pairs = names[0], names[1], names[2:]
            found.append(
                (
                    namespace,
                    metric,
                    dict(zip(dimension_pairs[::2], dimension_pairs[1::2], strict=True)),
                )
            )
    return found


def test_dashboard_draws_the_flow_in_order(
    aws_client: Callable[[str], Any], outputs: dict[str, Any]
) -> None:
    body = json.loads(
        aws_client("cloudwatch").get_dashboard(DashboardName=outputs["dashboard_name"])[
            "DashboardBody"
        ]
    )

    titles = [widget["properties"]["title"] for widget in body["widgets"]]
    assert titles == [
        f"1. Writes: TransactWriteItems on {outputs['table_name']}",
        "2. Stream: publisher iterator age (ms)",
        "3. Published",
        "4. Quarantined (publisher + sweeper)",
        "5. Oldest pending outbox item (s)",
        "6. Sweeper recoveries",
        "7. Stream batches given up (on-failure queue)",
        f"{CONSUMER}: processed / failed / duplicates",
        f"{CONSUMER}: queue age (s)",
        f"{CONSUMER}: DLQ depth",
    ]
    assert [(w["x"], w["y"]) for w in body["widgets"][:4]] == [(0, 0), (6, 0), (12, 0), (18, 0)]


def test_every_dashboard_metric_is_emitted_by_the_code_or_documented_by_aws_on_stack_resources(
    aws_client: Callable[[str], Any], outputs: dict[str, Any], consumer: dict[str, Any]
) -> None:
    body = json.loads(
        aws_client("cloudwatch").get_dashboard(DashboardName=outputs["dashboard_name"])[
            "DashboardBody"
        ]
    )
    lambda_client = aws_client("lambda")
    services = {
        lambda_client.get_function_configuration(FunctionName=name)["Environment"]["Variables"][
            "POWERTOOLS_SERVICE_NAME"
        ]
        for name in [
            outputs["publisher_function_name"],
            consumer["function_name"],
            outputs["sweeper_log_group_name"].removeprefix("/aws/lambda/"),
        ]
    }
    queues = {
        url.rsplit("/", 1)[1]
        for url in [consumer["queue_url"], consumer["dlq_url"], outputs["on_failure_queue_url"]]
    }
    emitted = emitted_metric_names()

    metrics = dashboard_metrics(body)

    assert len(metrics) >= 12, metrics
    for namespace, metric, dimensions in metrics:
        if namespace == "DynamoDBOutbox":
            assert metric in emitted, (metric, sorted(emitted))
            assert dimensions.keys() == {"service"} and dimensions["service"] in services, (
                dimensions
            )
            continue
        names, dimension_names = AWS_METRICS[namespace]
        assert metric in names, (namespace, metric)
        assert dimensions.keys() <= dimension_names, (namespace, dimensions)
        if "FunctionName" in dimensions:
            assert dimensions["FunctionName"] == outputs["publisher_function_name"]
        if "QueueName" in dimensions:
            assert dimensions["QueueName"] in queues, dimensions
        if "TableName" in dimensions:
            assert dimensions == {
                "TableName": outputs["table_name"],
                "Operation": "TransactWriteItems",
            }


def test_second_plan_has_no_changes(local_stack: Any, tf_cli_config: Path) -> None:
    """The applied stack matches its configuration: no perpetual diff from the module."""
    runner = local_stack.terraform
    env = {
        **os.environ,
        "TF_DATA_DIR": str(runner.work_dir),
        "TF_CLI_CONFIG_FILE": str(tf_cli_config),
    }

    result = run_terraform(
        [
            "plan",
            "-detailed-exitcode",
            "-input=false",
            "-no-color",
            "-lock=false",
            f"-state={runner.state_path}",
        ],
        cwd=Path(runner.module_dir),
        env=env,
    )

    assert result.returncode == 0, describe(result)


def test_a_changing_sweeper_leaves_its_schedule_policy_alone(
    local_stack: Any, tf_cli_config: Path, tmp_path: Path
) -> None:
    """A plan that replaces the sweeper function does not touch the schedule's role policy.

    Were the policy built from the function's `arn` attribute, Terraform would
    defer its document to apply whenever the function has changes, and the
    plan would show the policy losing its statement (issue 26).
    """
    runner = local_stack.terraform
    env = {
        **os.environ,
        "TF_DATA_DIR": str(runner.work_dir),
        "TF_CLI_CONFIG_FILE": str(tf_cli_config),
    }
    plan_file = tmp_path / "replace-sweeper.tfplan"
    sweeper = "module.outbox.aws_lambda_function.sweeper[0]"
    policy = "module.outbox.aws_iam_role_policy.sweeper_schedule[0]"

    plan = run_terraform(
        [
            "plan",
            "-input=false",
            "-no-color",
            "-lock=false",
            "-refresh=false",
            f"-replace={sweeper}",
            f"-state={runner.state_path}",
            f"-out={plan_file}",
        ],
        cwd=Path(runner.module_dir),
        env=env,
    )
    assert plan.returncode == 0, describe(plan)
    show = run_terraform(
        ["show", "-json", "-no-color", str(plan_file)], cwd=Path(runner.module_dir), env=env
    )
    assert show.returncode == 0, describe(show)
    actions = {
        change["address"]: change["change"]["actions"]
        for change in json.loads(show.stdout)["resource_changes"]
    }

    assert actions[sweeper] == ["delete", "create"], actions[sweeper]
    assert actions[policy] == ["no-op"], plan.stdout


def attached_policies(iam: Any, role_name: str) -> list[str]:
    return [
        p["PolicyArn"]
        for p in iam.list_attached_role_policies(RoleName=role_name)["AttachedPolicies"]
    ]


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)
