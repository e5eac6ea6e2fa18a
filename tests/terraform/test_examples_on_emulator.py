"""examples/existing-table, complete and sns_fifo applied to the emulator, then destroyed.

Each example is copied to a temporary directory with the module source made
absolute and an override file (``emulator_override.tf``) that points the
provider at the emulator and leaves out the public Powertools layer, which
moto does not know. Nothing else of the example changes, so what is applied is
what a caller copying the example gets. The two share the moto server of
``examples/local`` (conftest.py) and their resource names, so they run one
after the other, each destroyed before the next starts.

Each apply costs a minute or so, most of it the provider's SQS waiters.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.terraform.provider_reattach import shared_aws_provider
from tests.terraform.tfhelpers import EXAMPLES_DIR, REPO_ROOT, describe, run_terraform

pytestmark = [pytest.mark.terraform, pytest.mark.apply]

EMULATED_SERVICES = (
    "cloudwatch",
    "dynamodb",
    "events",
    "iam",
    "kms",
    "lambda",
    "logs",
    "scheduler",
    "sns",
    "sqs",
    "sts",
)

MODULE_SOURCE = 'source = "../.."'


def emulator_override(endpoint_url: str) -> str:
    """Provider settings for the emulator, merged into the example's own provider block."""
    endpoints = "\n".join(f'    {service} = "{endpoint_url}"' for service in EMULATED_SERVICES)
    return f"""\
provider "aws" {{
  access_key                  = "test"
  secret_key                  = "test"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  skip_region_validation      = true

  endpoints {{
{endpoints}
  }}
}}

# moto rejects layer ARNs it does not know.
module "outbox" {{
  powertools_layer_arn = ""
}}
"""


class ExampleStack:
    """A copy of one example, initialised, with terraform run in it."""

    def __init__(self, example: str, workdir: Path, env: dict[str, str], moto_url: str) -> None:
        self.workdir = workdir
        self.env = {**env, "TF_DATA_DIR": str(workdir / ".terraform")}
        shutil.copytree(
            EXAMPLES_DIR / example,
            workdir,
            ignore=shutil.ignore_patterns(".terraform*", "*.tfstate*"),
        )
        main_tf = workdir / "main.tf"
        text = main_tf.read_text()
        assert text.count(MODULE_SOURCE) == 1, (
            f"examples/{example}/main.tf: expected one {MODULE_SOURCE}"
        )
        main_tf.write_text(text.replace(MODULE_SOURCE, f'source = "{REPO_ROOT}"'))
        (workdir / "emulator_override.tf").write_text(emulator_override(moto_url))

    @contextmanager
    def shared_provider(self) -> Iterator[None]:
        """After init: one provider process serves the stack's commands (provider_reattach)."""
        with shared_aws_provider(
            Path(self.env["TF_DATA_DIR"]),
            self.workdir.parent / "provider.log",
            cwd=self.workdir,
            env=self.env,
        ) as reattach:
            self.env.update(reattach)
            try:
                yield
            finally:
                for name in reattach:
                    del self.env[name]

    def run(self, *args: str) -> str:
        result = run_terraform([*args, "-no-color"], cwd=self.workdir, env=self.env)
        assert result.returncode == 0, describe(result)
        return result.stdout

    def attempt(self, *args: str) -> int:
        return run_terraform([*args, "-no-color"], cwd=self.workdir, env=self.env).returncode

    def resources_in_state(self) -> list[str]:
        return self.run("state", "list").split()


@pytest.fixture(scope="module")
def existing_table_stack(
    tf_env: dict[str, str], moto_server: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ExampleStack]:
    stack = ExampleStack(
        "existing-table", tmp_path_factory.mktemp("existing-table") / "stack", tf_env, moto_server
    )
    stack.run("init", "-input=false")
    with stack.shared_provider():
        stack.run("apply", "-auto-approve", "-input=false")
        try:
            yield stack
        finally:
            if stack.resources_in_state():  # a test failed before it destroyed the stack
                stack.attempt("destroy", "-auto-approve", "-input=false")


def _changes(plan_json: str) -> dict[str, list[str]]:
    plan = json.loads(plan_json)
    return {
        change["address"]: change["change"]["actions"]
        for change in plan.get("resource_changes", [])
        if change["change"]["actions"] != ["no-op"]
    }


def test_adding_a_consumer_plans_only_the_new_consumers_resources(
    existing_table_stack: ExampleStack,
) -> None:
    """A second consumer next to the example's `audit`: nothing of `audit` may change.

    Terraform defers reading a data source that refers to a resource with
    changes pending, even another instance of it: a policy built from one
    consumer's log group ARN made every consumer's role policy "known after
    apply" as soon as any consumer was added.
    """
    stack = existing_table_stack
    added = stack.workdir / "added_consumer_override.tf"
    added.write_text(
        """\
module "outbox" {
  consumers = {
    audit   = { event_pattern = jsonencode({ source = [var.event_source] }) }
    billing = { event_pattern = jsonencode({ "detail-type" = ["OrderCreated"] }) }
  }
  # A new consumer changes the recorded shape of the stack (docs/live-changes.md).
  acknowledged_changes = { serial = 1 }
}
"""
    )
    try:
        stack.run("plan", "-input=false", "-out=added.tfplan")
        changes = _changes(stack.run("show", "-json", "added.tfplan"))
    finally:
        added.unlink()

    of_billing = re.compile(r'\["(?:[a-z_]+/)?billing"\]$')
    # The dashboard draws a row per consumer: it gains billing's, in place.
    dashboard = "module.outbox.aws_cloudwatch_dashboard.this[0]"
    assert changes.get(dashboard) == ["update"], changes.get(dashboard)
    # The live-changes record of serial 1 is written by this apply: nothing else.
    records = {
        a: c
        for a, c in changes.items()
        if a.startswith("module.outbox.module.live_changes.")
        or a == "module.outbox.terraform_data.live_changes"
    }
    assert records, "raising acknowledged_changes.serial must write a live-changes record"
    others = {
        address: actions
        for address, actions in changes.items()
        if not of_billing.search(address) and address != dashboard and address not in records
    }
    assert others == {}, f"adding `billing` also plans: {others}"
    created = {address for address, actions in changes.items() if actions == ["create"]}
    assert {
        'module.outbox.aws_sqs_queue.consumer["billing"]',
        'module.outbox.aws_sqs_queue.consumer_dlq["billing"]',
        'module.outbox.aws_iam_role_policy.consumer["billing"]',
        'module.outbox.aws_lambda_event_source_mapping.consumer["billing"]',
    } <= created, sorted(changes)


def test_existing_table_example_destroys_cleanly(existing_table_stack: ExampleStack) -> None:
    """The module owns no table here but the idempotency table, which must not block destroy."""
    stack = existing_table_stack

    stack.run("destroy", "-auto-approve", "-input=false")

    assert stack.resources_in_state() == []


@pytest.mark.slow
def test_complete_example_applies_and_destroys_cleanly(
    tf_env: dict[str, str], moto_server: str, tmp_path: Path
) -> None:
    """Applied as written, re-planned empty, then torn down as the README says.

    The example protects its outbox table (`deletion_protection_enabled = true`),
    so tearing it down takes the two steps of the README: apply with the
    protection off, then destroy.
    """
    stack = ExampleStack("complete", tmp_path / "stack", tf_env, moto_server)
    stack.run("init", "-input=false")
    try:
        stack.run("apply", "-auto-approve", "-input=false")
        assert stack.attempt("plan", "-input=false", "-detailed-exitcode") == 0, (
            "a re-plan after apply must be empty"
        )

        main_tf = stack.workdir / "main.tf"
        protected = "deletion_protection_enabled = true"
        assert main_tf.read_text().count(protected) == 1
        main_tf.write_text(
            main_tf.read_text().replace(protected, "deletion_protection_enabled = false")
        )
        # The state is the emulator's as of the re-plan just above: no refresh.
        stack.run("apply", "-auto-approve", "-input=false", "-refresh=false")
        stack.run("destroy", "-auto-approve", "-input=false", "-refresh=false")

        assert stack.resources_in_state() == []
    finally:
        if stack.resources_in_state():
            stack.attempt("destroy", "-auto-approve", "-input=false")


def _emulator_client(service: str, moto_server: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=moto_server,
        region_name="eu-west-1",  # the example's default region
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def _assert_the_ordered_path_is_deployed(moto_server: str, outputs: dict[str, Any]) -> None:
    sns = _emulator_client("sns", moto_server)
    sqs = _emulator_client("sqs", moto_server)
    lambda_ = _emulator_client("lambda", moto_server)
    topic_arn = outputs["sns_topic_arn"]["value"]
    consumers = outputs["consumers"]["value"]

    assert topic_arn.endswith(":orders-fifo.fifo"), topic_arn
    topic = sns.get_topic_attributes(TopicArn=topic_arn)["Attributes"]
    assert (topic["FifoTopic"], topic["ContentBasedDeduplication"]) == ("true", "false"), topic

    assert sorted(consumers) == ["audit", "shipping"]
    for key, consumer in consumers.items():
        for url in (consumer["queue_url"], consumer["dlq_url"]):
            assert url.endswith(".fifo"), (key, url)
            queue = sqs.get_queue_attributes(
                QueueUrl=url, AttributeNames=["FifoQueue", "ContentBasedDeduplication"]
            )["Attributes"]
            assert queue == {"FifoQueue": "true", "ContentBasedDeduplication": "false"}, url
        subscription = sns.get_subscription_attributes(
            SubscriptionArn=consumer["subscription_arn"]
        )["Attributes"]
        assert subscription["TopicArn"] == topic_arn
        assert subscription["Endpoint"] == consumer["queue_arn"]
        assert subscription["RawMessageDelivery"] == "true"
        assert "FilterPolicy" in subscription, (key, subscription)
        mapping = lambda_.get_event_source_mapping(UUID=consumer["event_source_mapping_uuid"])
        assert mapping["EventSourceArn"] == consumer["queue_arn"]
        assert mapping["BatchSize"] <= 10, (key, mapping["BatchSize"])

    shipping = lambda_.get_function_configuration(FunctionName="orders-fifo-shipping")[
        "Environment"
    ]["Variables"]
    assert shipping["OUTBOX_CONSUMER_TRANSPORT"] == "sns_fifo"
    assert shipping["OUTBOX_CONSUMER_TOPIC_ARN"] == topic_arn


def _published_in_order_per_subject(moto_server: str, outputs: dict[str, Any]) -> None:
    """The publisher's own SNS FIFO requests, through the example's subscriptions.

    Each consumer's queue gets what its filter policy admits, raw (the body is
    the envelope), with the event's subject as its message group, in order.
    moto acts on an enabled SQS mapping itself (it receives the messages and
    cannot run the function without Docker): the mappings are disabled meanwhile.
    """
    from dynamodb_outbox.consumer import parse_body
    from dynamodb_outbox.envelope import Envelope
    from dynamodb_outbox.settings import sink_from_environment
    from dynamodb_outbox.sinks import OutboundEvent

    lambda_, sqs = _emulator_client("lambda", moto_server), _emulator_client("sqs", moto_server)
    consumers = outputs["consumers"]["value"]
    sink = sink_from_environment(
        {"OUTBOX_PUBLISH_TO": "sns_fifo", "OUTBOX_TOPIC_ARN": outputs["sns_topic_arn"]["value"]},
        client_factory=lambda service: _emulator_client(service, moto_server),
    )

    def event(subject: str, type_: str, sequence: int, source: str = "shop.orders") -> Envelope:
        return Envelope(type=type_, source=source, subject=subject, data={}, sequence=sequence)

    created, paid = event("ORDER#1", "OrderCreated", 1), event("ORDER#1", "OrderPaid", 2)
    other_order = event("ORDER#2", "OrderCreated", 1)
    shipped = event("ORDER#1", "OrderShipped", 3)  # not in shipping's filter policy
    foreign = event("ORDER#3", "OrderCreated", 1, source="someone.else")  # not in audit's
    # As the publisher sends: one event of a subject per PublishBatch.
    batches = [[created, other_order, foreign], [paid], [shipped]]

    def received(queue_url: str) -> list[tuple[str, Envelope]]:
        messages = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["MessageGroupId"]
        ).get("Messages", [])
        return [(m["Attributes"]["MessageGroupId"], parse_body(m["Body"])) for m in messages]

    uuids = [c["event_source_mapping_uuid"] for c in consumers.values()]
    for uuid in uuids:
        lambda_.update_event_source_mapping(UUID=uuid, Enabled=False)
    try:
        for batch in batches:
            results = sink.send([OutboundEvent.of(envelope) for envelope in batch])
            assert all(result.ok for result in results), results
        shipping = received(consumers["shipping"]["queue_url"])
        audit = received(consumers["audit"]["queue_url"])
    finally:
        for uuid in uuids:
            lambda_.update_event_source_mapping(UUID=uuid, Enabled=True)

    def of_subject(messages: list[tuple[str, Envelope]], subject: str) -> list[Envelope]:
        assert all(group == envelope.subject for group, envelope in messages), messages
        return [envelope for _, envelope in messages if envelope.subject == subject]

    assert sorted(e.id for _, e in shipping) == sorted(
        e.id for e in (created, paid, other_order, foreign)
    )
    assert of_subject(shipping, "ORDER#1") == [created, paid]
    assert sorted(e.id for _, e in audit) == sorted(
        e.id for e in (created, paid, other_order, shipped)
    )
    assert of_subject(audit, "ORDER#1") == [created, paid, shipped]


@pytest.mark.slow
def test_sns_fifo_example_applies_and_destroys_cleanly(
    tf_env: dict[str, str], moto_server: str, tmp_path: Path
) -> None:
    """The ordered path as a caller deploys it: a FIFO topic, FIFO queues subscribed raw.

    The example's README steps (zip the caller's function, apply), a re-plan
    that must be empty, the publisher's requests delivered through it, then the
    teardown of docs/operations.md: the outbox table is protected by default,
    so apply with the protection off, then destroy.
    """
    stack = ExampleStack("sns_fifo", tmp_path / "stack", tf_env, moto_server)
    subprocess.run(
        [sys.executable, "-m", "zipfile", "-c", "shipping.zip", "consumer.py"],
        cwd=stack.workdir,
        check=True,
    )
    stack.run("init", "-input=false")
    try:
        stack.run("apply", "-auto-approve", "-input=false")
        assert stack.attempt("plan", "-input=false", "-detailed-exitcode") == 0, (
            "a re-plan after apply must be empty"
        )
        outputs = json.loads(stack.run("output", "-json"))
        _assert_the_ordered_path_is_deployed(moto_server, outputs)
        _published_in_order_per_subject(moto_server, outputs)

        (stack.workdir / "unprotect_override.tf").write_text(
            'module "outbox" {\n  table = { deletion_protection_enabled = false }\n}\n'
        )
        # The state is the emulator's as of the re-plan just above: no refresh.
        stack.run("apply", "-auto-approve", "-input=false", "-refresh=false")
        stack.run("destroy", "-auto-approve", "-input=false", "-refresh=false")

        assert stack.resources_in_state() == []
    finally:
        if stack.resources_in_state():
            stack.attempt("destroy", "-auto-approve", "-input=false")
