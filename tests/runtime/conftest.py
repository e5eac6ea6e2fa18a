"""Fixtures for the local runtime tests: moto in-process, a virtual clock, a streamed table."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from runtime_helpers import REGION, Queue, Table, make_queue

from dynamodb_outbox.local import VirtualClock, stream_records_follow
from tests.support.moto_tables import create_outbox_table


@pytest.fixture(autouse=True)
def _aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without AWS_ACCOUNT_ID_ENDPOINT_MODE=disabled, in-process stream calls 404.
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)


@pytest.fixture(scope="session")
def boto_session() -> boto3.Session:
    # One session for the run: clients then share its loaded service models,
    # which makes a client ~10x cheaper to create than through boto3.client().
    return boto3.Session(region_name=REGION)


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def clock(aws: None) -> Iterator[VirtualClock]:
    """A virtual clock that moto's stream records follow too."""
    virtual = VirtualClock()
    with stream_records_follow(virtual):
        yield virtual


@pytest.fixture
def dynamodb(aws: None, boto_session: boto3.Session) -> Any:
    return boto_session.client("dynamodb")


@pytest.fixture
def streams(aws: None, boto_session: boto3.Session) -> Any:
    return boto_session.client("dynamodbstreams")


@pytest.fixture
def sqs(aws: None, boto_session: boto3.Session) -> Any:
    return boto_session.client("sqs")


@pytest.fixture
def table(dynamodb: Any, clock: VirtualClock) -> Table:
    stream_arn = create_outbox_table(dynamodb, "outbox", stream="NEW_AND_OLD_IMAGES")
    return Table(dynamodb, "outbox", str(stream_arn))


@pytest.fixture
def failure_queue(sqs: Any) -> Queue:
    """The on-failure destination of a stream mapping."""
    return make_queue(sqs, "publisher-on-failure")
