"""Least privilege of every IAM role the module creates, read back from the emulator.

Uses the session's apply of examples/local (conftest.py: ``aws_client``,
``outputs``): every role in the emulator belongs to that stack. Each role's
inline and attached policies are fetched and checked against an allow-list per
role derived from the code that runs with it:

- publisher (dynamodb_outbox.publisher): the stream mapping reads the stream
  (DescribeStream, GetRecords, GetShardIterator) and sends failed
  batch records to the on-failure queue (sqs:SendMessage); the handler publishes
  (events:PutEvents, or sns:Publish for PublishBatch), deletes published items
  (BatchWriteItem) and quarantines poison items (UpdateItem); on the ordered
  path it reads a partition's pending sequences (Query, subject_sequences.py);
- sweeper (dynamodb_outbox.sweeper): Query on the pending index, BatchGetItem,
  then the publisher's publish, BatchWriteItem and UpdateItem;
- reference consumer (dynamodb_outbox.reference_consumer, consumer, ledger):
  the SQS mapping's ReceiveMessage/DeleteMessage/GetQueueAttributes, Powertools
  idempotency and the ledger (GetItem, PutItem, UpdateItem, DeleteItem);
- sweeper schedule: lambda:InvokeFunction on the sweeper;
- every function: CreateLogStream/PutLogEvents on its own log group; with a
  customer key, kms:Decrypt (and GenerateDataKey for writers) on that key.

Fails on "*" or service-wildcard actions, on a wildcard resource for a
data-plane action, and on any action outside the role's list.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import pytest

pytestmark = [pytest.mark.terraform, pytest.mark.apply]

LOGS = {"logs:CreateLogStream", "logs:PutLogEvents"}
PUBLISH = {"events:PutEvents", "sns:Publish"}  # one of the two, by publish_to
STREAM_READ = {
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
}

# role kind -> (allowed actions, actions that must be granted)
ALLOWED: dict[str, tuple[set[str], set[str]]] = {
    "publisher": (
        STREAM_READ
        | PUBLISH
        | LOGS
        | {
            "dynamodb:BatchWriteItem",
            "dynamodb:UpdateItem",
            "dynamodb:Query",  # publish_to = "sns_fifo" only: a partition's pending sequences
            "sqs:SendMessage",
            "kms:Decrypt",
            "kms:GenerateDataKey",
        },
        STREAM_READ | LOGS | {"dynamodb:BatchWriteItem", "dynamodb:UpdateItem", "sqs:SendMessage"},
    ),
    "sweeper": (
        PUBLISH
        | LOGS
        | {
            "dynamodb:Query",
            "dynamodb:BatchGetItem",
            "dynamodb:BatchWriteItem",
            "dynamodb:UpdateItem",
            "kms:Decrypt",
            "kms:GenerateDataKey",
        },
        LOGS
        | {
            "dynamodb:Query",
            "dynamodb:BatchGetItem",
            "dynamodb:BatchWriteItem",
            "dynamodb:UpdateItem",
        },
    ),
    "consumer": (
        LOGS
        | {
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "sqs:ReceiveMessage",
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
            "kms:Decrypt",
        },
        LOGS | {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"},
    ),
    "schedule": ({"lambda:InvokeFunction"}, {"lambda:InvokeFunction"}),
}

# Actions that touch data: never on a wildcard resource.
DATA_PLANE_PREFIXES = ("dynamodb:", "sqs:", "kms:")
DATA_PLANE_ACTIONS = {"events:PutEvents", "sns:Publish", "lambda:InvokeFunction"}


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _document(raw: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(raw, str):
        loaded: dict[str, Any] = json.loads(unquote(raw))
        return loaded
    return raw


def _role_kind(role_name: str, stack_name: str) -> str:
    if role_name == f"{stack_name}-publisher":
        return "publisher"
    if role_name == f"{stack_name}-sweeper":
        return "sweeper"
    if role_name == f"{stack_name}-sweeper-schedule":
        return "schedule"
    if role_name.startswith(f"{stack_name}-") and role_name.endswith("-consumer"):
        return "consumer"
    raise AssertionError(f"role {role_name} is not one the module is expected to create")


def _statements(iam: Any, role_name: str) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    for policy_name in iam.list_role_policies(RoleName=role_name)["PolicyNames"]:
        raw = iam.get_role_policy(RoleName=role_name, PolicyName=policy_name)["PolicyDocument"]
        statements += _as_list_of_statements(_document(raw))
    for attached in iam.list_attached_role_policies(RoleName=role_name)["AttachedPolicies"]:
        policy = iam.get_policy(PolicyArn=attached["PolicyArn"])["Policy"]
        version = iam.get_policy_version(
            PolicyArn=attached["PolicyArn"], VersionId=policy["DefaultVersionId"]
        )["PolicyVersion"]
        statements += _as_list_of_statements(_document(version["Document"]))
    return statements


def _as_list_of_statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    statement = document["Statement"]
    return [statement] if isinstance(statement, dict) else list(statement)


@pytest.fixture(scope="module")
def role_policies(aws_client: Callable[[str], Any], outputs: dict[str, Any]) -> dict[str, Any]:
    """role name -> (kind, statements) for every role in the emulator."""
    iam = aws_client("iam")
    stack_name = outputs["publisher_role_arn"].rsplit("/", 1)[1].removesuffix("-publisher")
    pages = iam.get_paginator("list_roles").paginate()
    roles = [role["RoleName"] for page in pages for role in page["Roles"]]
    return {name: (_role_kind(name, stack_name), _statements(iam, name)) for name in roles}


def test_every_role_kind_is_present(role_policies: dict[str, Any]) -> None:
    assert {kind for kind, _ in role_policies.values()} == set(ALLOWED), role_policies


def test_no_wildcard_actions_and_no_wildcard_resources_for_data(
    role_policies: dict[str, Any],
) -> None:
    problems = []
    for role, (_, statements) in role_policies.items():
        for s in statements:
            if s.get("Effect") != "Allow":
                continue
            assert "NotAction" not in s and "NotResource" not in s, (role, s)
            resources = _as_list(s["Resource"])
            for action in _as_list(s["Action"]):
                if "*" in action:
                    problems.append(f"{role} {s.get('Sid')}: wildcard action {action}")
                data = action.startswith(DATA_PLANE_PREFIXES) or action in DATA_PLANE_ACTIONS
                for resource in resources:
                    if resource == "*" or (data and "*" in resource):
                        problems.append(f"{role} {s.get('Sid')}: {action} on {resource}")
                    if action.startswith("logs:") and not resource.endswith(":*"):
                        problems.append(f"{role} {s.get('Sid')}: {action} on {resource}")
    assert not problems, "\n".join(problems)


def test_each_role_grants_only_what_its_code_calls(role_policies: dict[str, Any]) -> None:
    problems = []
    for role, (kind, statements) in role_policies.items():
        allowed, required = ALLOWED[kind]
        granted = {
            action
            for s in statements
            if s.get("Effect") == "Allow"
            for action in _as_list(s["Action"])
        }
        if extra := granted - allowed:
            problems.append(f"{role} ({kind}) grants actions its code never calls: {sorted(extra)}")
        if missing := required - granted:
            problems.append(f"{role} ({kind}) lacks actions its code needs: {sorted(missing)}")
        if kind in {"publisher", "sweeper"} and len(granted & PUBLISH) != 1:
            problems.append(f"{role} ({kind}) must publish with exactly one of {sorted(PUBLISH)}")
    assert not problems, "\n".join(problems)


def test_data_actions_name_the_stack_resources(
    role_policies: dict[str, Any], outputs: dict[str, Any], aws_client: Callable[[str], Any]
) -> None:
    table_arn = outputs["table_arn"]
    sweeper_arn = aws_client("lambda").get_function(
        FunctionName=outputs["publisher_function_name"].removesuffix("-publisher") + "-sweeper"
    )["Configuration"]["FunctionArn"]
    expected_prefix = {
        "dynamodb:Query": f"{table_arn}/index/outbox-pending",
        "lambda:InvokeFunction": sweeper_arn,
    }
    problems = []
    for role, (kind, statements) in role_policies.items():
        for s in statements:
            for action in _as_list(s["Action"]):
                resources = _as_list(s["Resource"])
                if action in expected_prefix and resources != [expected_prefix[action]]:
                    problems.append(f"{role}: {action} on {resources}")
                outbox_data = kind in {"publisher", "sweeper"} and action.startswith("dynamodb:")
                if outbox_data and not all(r.startswith(table_arn) for r in resources):
                    problems.append(f"{role}: {action} on {resources}, not the outbox table")
                consumer_data = kind == "consumer" and action.startswith("dynamodb:")
                if consumer_data and resources != [outputs["idempotency_table_arn"]]:
                    problems.append(f"{role}: {action} on {resources}")
                failure_queue = kind == "publisher" and action == "sqs:SendMessage"
                if failure_queue and resources != [outputs["on_failure_queue_arn"]]:
                    problems.append(f"{role}: {action} on {resources}")
    assert not problems, "\n".join(problems)
