"""The consumer makes its idempotency client on the first batch, not at import.

Before, ``OutboxConsumer(idempotency_table=...)`` at module level built a
boto3 client on import: ``NoRegionError`` wherever no region is configured
(a test collecting the handler module, a build step), and work on every cold
start even for a batch with nothing to do.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

LAMBDA_DIR = Path(__file__).resolve().parents[2] / "lambda"

HANDLER_MODULE = textwrap.dedent(
    """
    import boto3.session
    made = []
    real_client = boto3.session.Session.client
    def counting_client(self, *args, **kwargs):
        made.append(args[0] if args else kwargs.get("service_name"))
        return real_client(self, *args, **kwargs)
    boto3.session.Session.client = counting_client

    from dynamodb_outbox.consumer import OutboxConsumer

    consumer = OutboxConsumer(idempotency_table="orders-idempotency", name="billing")

    @consumer.handler
    def handler(event):
        pass

    print("clients made at import:", made)
    """
)


def test_importing_a_handler_module_needs_no_region_and_makes_no_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an environment with no AWS region or configuration at all
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("PYTHONPATH", str(LAMBDA_DIR))

    # WHEN a handler module built with OutboxConsumer is imported
    done = subprocess.run(
        [sys.executable, "-c", HANDLER_MODULE], capture_output=True, text=True, check=False
    )

    # THEN it imports, and no boto3 client was made
    assert done.returncode == 0, done.stderr
    assert "clients made at import: []" in done.stdout
