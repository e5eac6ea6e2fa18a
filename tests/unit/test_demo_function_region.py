"""A deployed function runs with its own region in AWS_REGION, as Lambda sets it.

With two regions in one process (tests/terraform/multi_region_flow.py, the
multi-region demo), the writer stamps AWS_REGION and the publisher and sweeper
scope themselves to it: each function must see its own region, not the process's.
"""

from __future__ import annotations

from demo.functions import DeployedFunction


def _function(region: str) -> DeployedFunction:
    return DeployedFunction(
        name="orders-outbox-sweeper",
        arn=f"arn:aws:lambda:{region}:123456789012:function:orders-outbox-sweeper",
        handler="dynamodb_outbox.sweeper.handler",
        environment={"OUTBOX_MULTI_REGION": "true", "AWS_REGION": "us-east-1"},
        timeout_seconds=60,
        memory_mb=256,
    )


def test_each_function_sees_the_region_of_its_arn() -> None:
    for region in ("us-east-1", "eu-west-1"):
        environment = _function(region).lambda_environment()
        assert environment["AWS_REGION"] == environment["AWS_DEFAULT_REGION"] == region
        assert environment["OUTBOX_MULTI_REGION"] == "true"
