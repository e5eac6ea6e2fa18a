"""The emulator both implementations run against, and the test data they get.

moto in-process, a bus, and DynamoDB stream records as Lambda delivers them
(``dynamodb_outbox.local.records``). The outbox table is the tests' own
(``tests/support/moto_tables.py``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import boto3
from moto import mock_aws

from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.local.records import outbox_stream_record

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"
TABLE_NAME = "outbox-bench"
BUS_NAME = "outbox-bench-bus"
SOURCE = "app.orders"
STREAM_ARN = (
    f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/{TABLE_NAME}/stream/2024-01-01T00:00:00.000"
)
_FIRST_SEQUENCE_NUMBER = 100_000_000_000_000_000_000

FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    # Without it botocore builds account-based endpoints (see tests/functional/conftest.py).
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    "MOTO_ACCOUNT_ID": ACCOUNT_ID,
}
_CLEARED_ENV = ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")


@contextlib.contextmanager
def fake_aws_environment() -> Iterator[None]:
    """Fake credentials and a fixed region for the duration; the old values come back after."""
    saved = {name: os.environ.get(name) for name in (*FAKE_ENV, *_CLEARED_ENV)}
    for name in _CLEARED_ENV:
        os.environ.pop(name, None)
    os.environ.update(FAKE_ENV)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def emulator() -> Iterator[None]:
    """moto in-process under fake credentials."""
    with fake_aws_environment(), mock_aws():
        yield


# ------------------------------------------------------------------ resources


def create_bus(client: Any, name: str = BUS_NAME) -> str:
    """A custom bus without rules (so neither implementation pays for rule matching)."""
    arn: str = client.create_event_bus(Name=name)["EventBusArn"]
    return arn


def put_items(client: Any, items: Sequence[dict[str, Any]], table: str = TABLE_NAME) -> None:
    """Setup writes (not measured): BatchWriteItem in chunks of 25."""
    for start in range(0, len(items), 25):
        chunk = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
        client.batch_write_item(RequestItems={table: chunk})


def table_count(client: Any, table: str = TABLE_NAME) -> int:
    count = 0
    for page in client.get_paginator("scan").paginate(TableName=table, Select="COUNT"):
        count += int(page["Count"])
    return count


# ----------------------------------------------------------------------- data


def make_envelope(order: int) -> Envelope:
    return Envelope(
        type="OrderPlaced",
        source=SOURCE,
        subject=f"ORDER#{order}",
        data={"order_id": str(order), "total": 42.5, "currency": "EUR", "lines": 3},
    )


@dataclass
class OutboxBatch:
    """``count`` outbox items (one per order) and the stream records announcing them."""

    items: list[dict[str, Any]]
    records: list[dict[str, Any]]


_orders = itertools.count(1)


def outbox_batch(count: int) -> OutboxBatch:
    items = []
    records = []
    for _ in range(count):
        order = next(_orders)
        record = outbox_stream_record(
            f"ORDER#{order}",
            make_envelope(order),
            str(_FIRST_SEQUENCE_NUMBER + order),
            event_source_arn=STREAM_ARN,
        )
        items.append(dict(record["dynamodb"]["NewImage"]))
        records.append(dict(record))
    return OutboxBatch(items=items, records=records)


# ---------------------------------------------------------------- botocore hooks


@dataclass
class CallCounter:
    """API calls made through the clients it is attached to (``before-call`` hook)."""

    calls: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, *clients: Any) -> CallCounter:
        for client in clients:
            client.meta.events.register("before-call", self._count)
        return self

    def _count(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.calls[model.name] += 1

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()


@dataclass
class Latency:
    """Adds a fixed delay to every call of the clients it is attached to, while on."""

    seconds: float
    on: bool = False

    def attach(self, *clients: Any) -> Latency:
        for client in clients:
            client.meta.events.register("before-call", self._delay)
        return self

    def _delay(self, **_: Any) -> None:
        if self.on:
            time.sleep(self.seconds)


def clients() -> tuple[Any, Any]:
    """A fresh (dynamodb, events) pair: hooks attached to them affect nobody else."""
    return boto3.client("dynamodb", region_name=REGION), boto3.client("events", region_name=REGION)


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._data


class CannedAws:
    """Answers every call with success without a server (``before-send`` hook).

    botocore still validates, serialises and signs each request and parses each
    answer, so the CPU measured is the handler's own, client library included,
    without an emulator's. Knows PutEvents, BatchWriteItem and DeleteItem.
    """

    def attach(self, *clients: Any) -> CannedAws:
        for client in clients:
            client.meta.events.register("before-send", self._answer)
        return self

    def _answer(self, request: Any, event_name: str, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        operation = event_name.rsplit(".", 1)[-1]
        if operation == "PutEvents":
            entries = json.loads(request.body)["Entries"]
            body: dict[str, Any] = {
                "FailedEntryCount": 0,
                "Entries": [{"EventId": uuid.uuid4().hex} for _ in entries],
            }
        elif operation == "BatchWriteItem":
            body = {"UnprocessedItems": {}}
        elif operation == "DeleteItem":
            body = {}
        else:
            raise NotImplementedError(f"no canned answer for {operation}")
        headers = {"Content-Type": "application/x-amz-json-1.1"}
        return AWSResponse(request.url, 200, headers, _Body(json.dumps(body).encode()))
