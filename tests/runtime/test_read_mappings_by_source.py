"""read_mappings by event source: finds a mapping however its function was named."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import boto3
import pytest
from runtime_helpers import make_queue

from dynamodb_outbox.local import read_mappings


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


def test_a_mapping_created_with_the_function_arn_is_found_by_its_event_source(
    boto_session: boto3.Session, sqs: Any, clock: Any
) -> None:
    # GIVEN a mapping created with the function's ARN, as Terraform does with
    # function_name = aws_lambda_function.x.arn
    function_arn = _function(boto_session, "consumer")
    queue = make_queue(sqs, "orders")
    lambda_client = boto_session.client("lambda")
    created = lambda_client.create_event_source_mapping(
        FunctionName=function_arn, EventSourceArn=queue.arn
    )
    # WHEN it is read by its source
    by_source = read_mappings(lambda_client, event_source_arn=queue.arn)
    # THEN it is found, with the function's ARN (moto does not find it by name)
    assert [config["UUID"] for config in by_source] == [created["UUID"]]
    assert by_source[0]["FunctionArn"] == function_arn
    assert read_mappings(lambda_client, "consumer") == []


def test_read_mappings_needs_a_function_or_a_source() -> None:
    with pytest.raises(ValueError, match="function_name, event_source_arn"):
        read_mappings(object())
