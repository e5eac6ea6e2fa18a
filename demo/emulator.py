"""The AWS emulator: a moto server in this process, on a free loopback port.

Terraform talks to it over HTTP like to any endpoint. Running it in-process
(``ThreadedMotoServer``) rather than as a subprocess is what lets the demo
switch off the one moto behaviour that would ruin the run: moto "invokes" the
function of a DynamoDB stream mapping on every table write — it cannot, without
Docker — and then empties the stream (``StreamShard.add`` in
``moto/dynamodb/models/table.py``, moto 5.2.5, clears ``self.items`` when
``send_dynamodb_items`` returns anything). Disabling or deleting the mapping
through the API does not stop it, because the mapping stays registered in the
table's ``lambda_event_source_mappings``. :meth:`Emulator.detach_stream_mappings`
removes it from there, so the stream keeps its records for the local runtime,
which then drives the publisher with the very mapping configuration Terraform
deployed.

(moto's other self-driven poller, on SQS mappings, is switched off through the
API: see :func:`dynamodb_outbox.local.disable_emulator_mappings`.)

The server gets the same moto adjustments as the project's standalone server
(``scripts/moto_server.py``: SQS ``RedriveAllowPolicy`` read back, without which
the aws provider waits 3 minutes for a DLQ and fails), and one of its own, for
speed only: :func:`speed_up_sqs_receive`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

from dynamodb_outbox.local import SeamLedger, aws_seams
from dynamodb_outbox.local.config import arn_parts

REPO_ROOT = Path(__file__).resolve().parent.parent
MOTO_SERVER_SCRIPT = REPO_ROOT / "scripts" / "moto_server.py"
LOOPBACK = "127.0.0.1"
FAKE_CREDENTIAL = "demo"


def configure_process(endpoint_url: str, region: str) -> dict[str, str | None]:
    """Point every boto3 client of this process at the emulator, with fake credentials.

    ``AWS_ENDPOINT_URL`` is what the handlers' own ``boto3.client(...)`` calls
    honour, as they would honour Lambda's environment. Shared config and
    credential files are hidden so that no real profile is ever read. Returns
    the previous values, for :func:`restore_process`.
    """
    settings: dict[str, str | None] = {
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_ACCESS_KEY_ID": FAKE_CREDENTIAL,
        "AWS_SECRET_ACCESS_KEY": FAKE_CREDENTIAL,
        "AWS_SESSION_TOKEN": None,
        "AWS_PROFILE": None,
        "AWS_DEFAULT_REGION": region,
        "AWS_REGION": region,
        # Without it, botocore builds account-based DynamoDB endpoints and
        # stream calls 404 on moto.
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    previous = {name: os.environ.get(name) for name in settings}
    restore_process(settings)
    return previous


def restore_process(values: Mapping[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def apply_project_moto_patches(script: Path = MOTO_SERVER_SCRIPT) -> list[str]:
    """Run the adjustments ``scripts/moto_server.py`` makes to moto; returns their names."""
    if not script.is_file():
        return []
    spec = importlib.util.spec_from_file_location("_project_moto_server", script)
    if spec is None or spec.loader is None:
        return []
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    applied: list[str] = []
    for name in ("patch_moto", "keep_redrive_allow_policy"):
        patch = getattr(module, name, None)
        if callable(patch):
            patch()
            applied.append(name)
            break
    return applied


def speed_up_sqs_receive() -> None:
    """Make moto's per-message retention check O(1); same answer.

    For every message ``ReceiveMessage`` returns, moto 5.2.5
    (``SQSBackend.is_message_valid_based_on_retention_period``) computes ALL the
    queue's attributes, message counts included, to read one of them: with a few
    hundred messages queued, each receive took ~0.3 s and dominated the run.
    This reads ``MessageRetentionPeriod`` directly. A patch into moto's private
    code: installed only on the release it was checked against
    (tests/dependency_shortcuts.py), and otherwise left off, saying so.
    """
    try:
        from tests.dependency_shortcuts import allowed
    except ImportError:  # the demo run from outside the repository
        print(
            "demo: moto's SQS receive left as it is (no tests/dependency_shortcuts.py)",
            file=sys.stderr,
        )
        return
    if not allowed("moto", "demo.emulator.speed_up_sqs_receive"):
        print(
            "demo: moto's SQS receive left as it is (moto is not the checked release)",
            file=sys.stderr,
        )
        return
    from moto.core.utils import unix_time
    from moto.sqs.models import Message, SQSBackend

    def is_message_valid_based_on_retention_period(
        self: SQSBackend, queue_name: str, message: Message
    ) -> bool:
        queue: Any = self.get_queue(queue_name)
        retention_period = int(queue.message_retention_period)
        return bool(retention_period + (message.sent_timestamp or 0) / 1000 > unix_time())

    setattr(  # noqa: B010 - an instance method replaced on the class
        SQSBackend,
        "is_message_valid_based_on_retention_period",
        is_message_valid_based_on_retention_period,
    )


@dataclass
class Emulator:
    """A running in-process moto server."""

    server: ThreadedMotoServer
    url: str
    region: str
    #: deliveries from a rule or subscription that a queue refused (aws_seams)
    seams: SeamLedger
    _seams_patch: contextlib.ExitStack

    @classmethod
    def start(cls, region: str) -> Emulator:
        # werkzeug logs every request at INFO; the demo has its own progress lines.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        apply_project_moto_patches()
        speed_up_sqs_receive()
        # Rules and subscriptions deliver after PutEvents/Publish, as on AWS; an
        # event no queue or DLQ takes is dropped and counted (the report checks it).
        patch = contextlib.ExitStack()
        seams = patch.enter_context(aws_seams())
        server = ThreadedMotoServer(ip_address=LOOPBACK, port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        return cls(
            server=server,
            url=f"http://{host}:{port}",
            region=region,
            seams=seams,
            _seams_patch=patch,
        )

    def stop(self) -> None:
        self.server.stop()
        self._seams_patch.close()

    def session(self) -> boto3.Session:
        """A boto3 session of its own (clients read the endpoint from the environment)."""
        return boto3.Session(region_name=self.region)

    def detach_stream_mappings(self, stream_arn: str) -> list[str]:
        """Stop moto from consuming ``stream_arn`` itself; returns the function ARNs detached.

        The mappings stay in the Lambda backend (``ListEventSourceMappings`` and
        ``terraform destroy`` still see them); only the table's hook is removed.
        """
        from moto.dynamodb.models import dynamodb_backends

        _, region, account, resource = arn_parts(stream_arn)
        table_name = resource.split("/")[1]
        table: Any = dynamodb_backends[account][region].get_table(table_name)
        hooks: dict[str, Any] = table.lambda_event_source_mappings
        detached = [
            function_arn
            for function_arn, mapping in hooks.items()
            if getattr(mapping, "event_source_arn", None) == stream_arn
        ]
        for function_arn in detached:
            del hooks[function_arn]
        return detached
