"""Apply examples/local to a moto server once per session and check the live resources.

pytest-terraform (0.7.0) runs init/plan/apply in examples/local, with
TF_DATA_DIR and the state in a temporary directory, and destroys the stack at
the end of the session. It finds the module by name under a "module dir"; the
``local_stack`` fixture points that at examples/ and passes the emulator's URL
and the provider-mirror CLI config through the environment it runs terraform
in.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from pytest_terraform import terraform
from pytest_terraform import tf as pytest_terraform_tf

from tests.terraform.tfhelpers import EXAMPLES_DIR, describe, run_terraform

pytestmark = [pytest.mark.terraform, pytest.mark.apply]

# Registers a session-scoped fixture named "local_example" that applies
# <module dir>/local once; ``local_stack`` requests it after moto is up.
terraform("local", scope="session", name="local_example")

OUTBOX_FILTER = {
    "eventName": ["INSERT"],
    "dynamodb": {"Keys": {"SK": {"S": [{"prefix": "OUTBOX#"}]}}},
}
FOURTEEN_DAYS_SECONDS = 14 * 24 * 3600
_STACK_ENV = ("TF_CLI_CONFIG_FILE", "TF_VAR_endpoint_url", "TF_INPUT", "CHECKPOINT_DISABLE")


@pytest.fixture(scope="session")
def local_stack_env(terraform_bin: str, tf_cli_config: Path, moto_server: str) -> Iterator[None]:
    """What pytest-terraform's terraform runs need, for as long as the stack lives.

    pytest-terraform runs terraform with ``os.environ``; it destroys the stack in
    its own finalizer, which runs before this fixture's teardown.
    """
    saved_env = {key: os.environ.get(key) for key in _STACK_ENV}
    saved_module_dir = pytest_terraform_tf.LazyModuleDir.value
    os.environ.update(
        {
            "TF_CLI_CONFIG_FILE": str(tf_cli_config),
            "TF_VAR_endpoint_url": moto_server,
            "TF_INPUT": "0",
            "CHECKPOINT_DISABLE": "1",
        }
    )
    if not saved_module_dir:
        pytest_terraform_tf.LazyModuleDir.value = str(EXAMPLES_DIR)
    try:
        yield
    finally:
        pytest_terraform_tf.LazyModuleDir.value = saved_module_dir
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="session")
def local_stack(local_stack_env: None, request: pytest.FixtureRequest) -> Any:
    """examples/local applied to the session's moto server (pytest-terraform state API)."""
    stack = request.getfixturevalue("local_example")
    # pytest-terraform records the resources next to the module; this repo keeps
    # no recordings (replay mode is not used), so do not leave one in examples/.
    (EXAMPLES_DIR / "local" / "tf_resources.json").unlink(missing_ok=True)
    return stack


@pytest.fixture(scope="session")
def outputs(local_stack: Any) -> dict[str, Any]:
    return {name: output["value"] for name, output in local_stack.outputs.items()}


@pytest.fixture(scope="session")
def aws_client(moto_server: str, outputs: dict[str, Any]) -> Callable[[str], Any]:
    def client(service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=moto_server,
            region_name=outputs["region"],
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )

    return client


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
    }
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
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
        "OUTBOX_EVENT_BUS_NAME": outputs["event_bus_name"],
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


def test_log_group_exists_with_retention(
    aws_client: Callable[[str], Any], outputs: dict[str, Any]
) -> None:
    groups = aws_client("logs").describe_log_groups(logGroupNamePrefix=outputs["log_group_name"])[
        "logGroups"
    ]

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
        "SettleOutboxItems": [outputs["table_arn"]],
        "PublishEvents": [outputs["event_bus_arn"]],
        "SendFailedBatchRecords": [outputs["on_failure_queue_arn"]],
        "WriteOwnLogs": [f"{log_group_arn}:*"],
    }
    assert all(s["Effect"] == "Allow" for s in document["Statement"])
    assert attached_policies(iam, role_name) == []


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


def attached_policies(iam: Any, role_name: str) -> list[str]:
    return [
        p["PolicyArn"]
        for p in iam.list_attached_role_policies(RoleName=role_name)["AttachedPolicies"]
    ]


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)
