"""End to end on a REAL AWS account: apply tests/e2e/stack, write an order, watch it arrive.

Opt-in and never part of `make test`: the tests carry the `e2e` marker, which
pytest.ini deselects by default. `make e2e` runs them; they then need
``OUTBOX_E2E=1`` and AWS credentials (``boto3.Session().get_credentials()``)
with a region, and skip with a loud message otherwise. They create billable
resources (DynamoDB tables, Lambda functions, SQS queues, an EventBridge bus,
a schedule) named ``outbox-e2e-<random>`` and destroy them afterwards
(pytest-terraform's teardown).

What they check:

* an order written with the writer is published by the stream publisher and
  recorded exactly once in the reference consumer's ledger;
* a poison message sent to the consumer queue ends up in its DLQ after
  ``max_receive_count`` (2) receives, and does not block the queue.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import boto3
import pytest
from pytest_terraform import terraform

from dynamodb_outbox.ledger import LedgerEntry, read_ledger
from dynamodb_outbox.writer import Condition, OutboxWriter

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
EVENT_SOURCE = "e2e.orders"
LEDGER_TIMEOUT_SECONDS = 300.0
DLQ_TIMEOUT_SECONDS = 600.0
POLL_SECONDS = 5.0

T = TypeVar("T")


def _why_not_enabled() -> str | None:
    """None when the e2e tests may run, else the reason they may not."""
    if os.environ.get("OUTBOX_E2E") != "1":
        return "OUTBOX_E2E is not 1"
    session = boto3.Session()
    if session.get_credentials() is None:
        return "no AWS credentials (boto3.Session().get_credentials() is None)"
    region = session.region_name or os.environ.get("AWS_REGION")
    if not region:
        return "no AWS region (set AWS_REGION, AWS_DEFAULT_REGION or a profile's region)"
    # boto3 clients below read AWS_DEFAULT_REGION; the aws provider reads either.
    os.environ.setdefault("AWS_DEFAULT_REGION", region)
    if shutil.which("terraform") is None:
        return "no `terraform` binary on PATH"
    return None


@pytest.fixture(scope="module", autouse=True)
def _e2e_enabled() -> Iterator[None]:
    """Skip loudly unless opted in; runs before the stack is applied (module scope, autouse)."""
    reason = _why_not_enabled()
    if reason is not None:
        pytest.skip(
            f"SKIPPED LOUDLY: the end-to-end tests against a REAL AWS account did not run: "
            f"{reason}. Run `OUTBOX_E2E=1 AWS_PROFILE=<profile> AWS_REGION=<region> make e2e` "
            "to apply tests/e2e/stack (billable) and destroy it afterwards."
        )
    os.environ.setdefault("TF_VAR_name", f"outbox-e2e-{uuid.uuid4().hex[:8]}")
    os.environ.setdefault("TF_VAR_event_source", EVENT_SOURCE)
    os.environ.setdefault("TF_IN_AUTOMATION", "1")
    if "TF_CLI_CONFIG_FILE" not in os.environ:
        # Use the local provider mirror when this machine has one (else the registry).
        result = subprocess.run(
            [sys.executable, str(REPO_ROOT / "scripts" / "tf_cli_config.py")],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode == 0:
            os.environ["TF_CLI_CONFIG_FILE"] = result.stdout.strip()
    yield


def _output(state: Any, name: str) -> str:
    value = state.outputs[name]
    return str(value["value"] if isinstance(value, dict) else value)


def _poll(what: str, timeout: float, probe: Callable[[], T | None]) -> T:
    """Call ``probe`` every POLL_SECONDS until it returns something, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: nothing after {timeout:.0f} s")
        time.sleep(POLL_SECONDS)


# `stack`: tests/e2e/stack applied once for the module, destroyed at the end.
@terraform("stack", scope="module")
def test_order_event_is_processed_once(stack: Any) -> None:
    table = _output(stack, "table_name")
    idempotency_table = _output(stack, "idempotency_table_name")
    dynamodb = boto3.client("dynamodb")

    writer = OutboxWriter(table_name=table, source=EVENT_SOURCE)
    order_id = uuid.uuid4().hex[:12]
    order = {"PK": f"ORDER#{order_id}", "SK": "META", "total": 42, "status": "NEW"}
    event = writer.new_event(order, "OrderCreated", {"order_id": order_id, "total": 42})
    writer.write(order, event, condition=Condition.item_absent())

    def ledger_entry() -> LedgerEntry | None:
        entries = read_ledger(dynamodb, idempotency_table, "audit")
        return next((e for e in entries if e["event_id"] == event.id), None)

    entry = _poll(f"ledger entry of event {event.id}", LEDGER_TIMEOUT_SECONDS, ledger_entry)

    assert entry["event_type"] == "OrderCreated"
    assert entry["subject"] == f"ORDER#{order_id}"
    assert entry["times_processed"] == 1, entry


@terraform("stack", scope="module")
def test_poison_message_reaches_the_dlq(stack: Any) -> None:
    queue_url = _output(stack, "audit_queue_url")
    dlq_url = _output(stack, "audit_dlq_url")
    sqs = boto3.client("sqs")
    body = f"poison {uuid.uuid4().hex}: not an outbox envelope"
    sqs.send_message(QueueUrl=queue_url, MessageBody=body)

    def in_dlq() -> str | None:
        response = sqs.receive_message(
            QueueUrl=dlq_url, MaxNumberOfMessages=10, WaitTimeSeconds=10, VisibilityTimeout=5
        )
        for message in response.get("Messages", []):
            if message["Body"] == body:
                sqs.delete_message(QueueUrl=dlq_url, ReceiptHandle=message["ReceiptHandle"])
                return str(message["MessageId"])
        return None

    _poll("poison message in the audit DLQ", DLQ_TIMEOUT_SECONDS, in_dlq)
