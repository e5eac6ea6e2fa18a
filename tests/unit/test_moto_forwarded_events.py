"""moto forwards an event to another region's bus as EventBridge does, on the checked release.

``dynamodb_outbox.local.moto_events.forward_events_as_aws`` replaces moto 5.2.5's
delivery to an event-bus target (a new ``PutEvents`` in the target region) with
the event handed on as it is. Compared here with moto's own code, on the same
setup: what differs is exactly the origin fields, nothing else is lost.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import metadata
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.events.models import Rule

from dynamodb_outbox.local.moto_events import (
    MOTO_FORWARDING_CHECKED_AGAINST,
    forward_events_as_aws,
)

EAST, WEST = "us-east-1", "eu-west-1"
ACCOUNT = "123456789012"  # moto's default


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


def _forwarded_event(*, put: dict[str, Any]) -> dict[str, Any]:
    """Put ``put`` on east's bus, forwarded to west's bus, delivered to a west queue."""
    east_events = boto3.client("events", region_name=EAST)
    west_events = boto3.client("events", region_name=WEST)
    sqs = boto3.client("sqs", region_name=WEST)
    east_events.create_event_bus(Name="orders")
    west_bus = west_events.create_event_bus(Name="orders")["EventBusArn"]
    queue = sqs.create_queue(QueueName="billing")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
    pattern = '{"source":["orders"]}'
    west_events.put_rule(Name="billing", EventBusName="orders", EventPattern=pattern)
    west_events.put_targets(
        Rule="billing",
        EventBusName="orders",
        Targets=[{"Id": "q", "Arn": queue_arn["Attributes"]["QueueArn"]}],
    )
    east_events.put_rule(
        Name="forward", EventBusName="orders", EventPattern=json.dumps({"region": [EAST]})
    )
    east_events.put_targets(
        Rule="forward",
        EventBusName="orders",
        Targets=[{"Id": "west", "Arn": west_bus, "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/f"}],
    )
    east_events.put_events(Entries=[{**put, "EventBusName": "orders"}])
    messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    assert len(messages) == 1
    return json.loads(messages[0]["Body"])


PUT = {
    "Source": "orders",
    "DetailType": "OrderPlaced",
    "Detail": json.dumps({"id": "01J0000000000000000000000A", "n": 1}),
    "Resources": ["arn:aws:dynamodb:us-east-1:123456789012:table/orders"],
}


def test_the_checked_release_is_installed() -> None:
    assert metadata.version("moto") == MOTO_FORWARDING_CHECKED_AGAINST
    assert forward_events_as_aws()  # installed (by tests/conftest.py already)
    assert getattr(Rule.send_to_targets, "__wrapped__", None) is not None


def test_moto_alone_restamps_a_forwarded_event_with_the_target_region(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Rule, "send_to_targets", Rule.send_to_targets.__wrapped__)

    delivered = _forwarded_event(put=PUT)

    # What the patch exists for: moto's own delivery makes a new event in west.
    assert delivered["region"] == WEST
    assert delivered["resources"] == []
    assert delivered["detail"] == json.loads(PUT["Detail"])


def test_patched_a_forwarded_event_keeps_its_origin_and_loses_nothing(aws: None) -> None:
    delivered = _forwarded_event(put=PUT)

    assert delivered["region"] == EAST
    assert delivered["account"] == ACCOUNT
    assert delivered["resources"] == PUT["Resources"]
    assert (delivered["source"], delivered["detail-type"]) == ("orders", "OrderPlaced")
    assert delivered["detail"] == json.loads(PUT["Detail"])
