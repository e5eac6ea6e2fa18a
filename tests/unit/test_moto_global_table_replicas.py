"""scripts/moto_server.py's global table replicas, compared with moto's own DynamoDB.

``emulate_global_table_replicas`` wraps moto 5.2.5's ``UpdateTable`` and
``DescribeTable`` so that ``ReplicaUpdates`` creates a replica table in the
other region (the AWS provider's ``replica`` blocks, ``multi_region``).
The same calls, on moto with and without it: what changes is exactly the
replica, nothing else.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoHandler

from tests.support.moto_tables import create_outbox_table

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "moto_server.py"
HOME, OTHER = "us-east-1", "eu-west-1"
TABLE = "orders-outbox"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("moto_server_replicas", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def emulated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The emulation on for one test; moto's own methods back afterwards."""
    monkeypatch.setattr(DynamoHandler, "update_table", DynamoHandler.update_table)
    monkeypatch.setattr(Table, "describe", Table.describe)
    assert _script().emulate_global_table_replicas()
    with mock_aws():
        yield


@pytest.fixture
def plain() -> Iterator[None]:
    assert getattr(DynamoHandler.update_table, "__wrapped__", None) is None
    with mock_aws():
        yield


def _home_table(stream: str | None = "NEW_AND_OLD_IMAGES") -> Any:
    client = boto3.client("dynamodb", region_name=HOME)
    create_outbox_table(client, TABLE, stream=stream)
    return client


def _add_replica(client: Any) -> dict[str, Any]:
    response: dict[str, Any] = client.update_table(
        TableName=TABLE, ReplicaUpdates=[{"Create": {"RegionName": OTHER}}]
    )
    return response


def test_the_checked_release_is_installed() -> None:
    assert metadata.version("moto") == _script().REPLICAS_CHECKED_AGAINST


def test_moto_alone_ignores_replica_updates(plain: None) -> None:
    client = _home_table()

    described = _add_replica(client)["TableDescription"]

    assert "Replicas" not in described
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        boto3.client("dynamodb", region_name=OTHER).describe_table(TableName=TABLE)


def test_emulated_a_replica_is_a_table_in_its_region_with_the_same_shape(emulated: None) -> None:
    client = _home_table()
    before = client.describe_table(TableName=TABLE)["Table"]

    described = _add_replica(client)["TableDescription"]

    assert described["Replicas"] == [{"RegionName": OTHER, "ReplicaStatus": "ACTIVE"}]
    assert described["GlobalTableVersion"] == "2019.11.21"
    replica = boto3.client("dynamodb", region_name=OTHER).describe_table(TableName=TABLE)["Table"]
    for shape in ("KeySchema", "AttributeDefinitions", "StreamSpecification"):
        assert replica[shape] == before[shape], shape
    assert [i["IndexName"] for i in replica["GlobalSecondaryIndexes"]] == [
        i["IndexName"] for i in before["GlobalSecondaryIndexes"]
    ]
    assert replica["LatestStreamArn"].startswith(f"arn:aws:dynamodb:{OTHER}:")
    assert replica["Replicas"] == [{"RegionName": HOME, "ReplicaStatus": "ACTIVE"}]
    # nothing else about the home table changed
    after = client.describe_table(TableName=TABLE)["Table"]
    assert {k: v for k, v in after.items() if k not in ("Replicas", "GlobalTableVersion")} == before

    client.update_table(TableName=TABLE, ReplicaUpdates=[{"Delete": {"RegionName": OTHER}}])

    assert "Replicas" not in client.describe_table(TableName=TABLE)["Table"]
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        boto3.client("dynamodb", region_name=OTHER).describe_table(TableName=TABLE)


def test_emulated_a_replica_needs_a_stream_of_both_images(emulated: None) -> None:
    client = _home_table(stream="NEW_IMAGE")

    with pytest.raises(ClientError, match="NEW_AND_OLD_IMAGES"):
        _add_replica(client)
