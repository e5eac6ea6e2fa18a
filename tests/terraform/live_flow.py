"""Events flowing through examples/local while its owner changes it, on the emulator.

Run by tests/terraform/test_live_flow_on_emulator.py (``consumers``) and
test_live_switch_on_emulator.py (``switch``), each as a subprocess::

    python -m tests.terraform.live_flow consumers --facts PATH

A process of its own, as ``make demo`` is: it serves a moto server from this
process (so moto's own Lambda pollers can be kept off the stream and the
queues: the local runtime is Lambda here), imports the deployed handlers with
their deployed environment, and patches moto, none of which may leak into a
pytest worker.

Each scenario applies a throwaway copy of ``examples/local`` (the public
Powertools layer looked up by version: the emulator holds the SSM parameters
AWS publishes, pointing at layers it knows), then applies the documented
changes of docs/live-changes.md one apply after another while orders are
written with the shipped writer and the local runtime pumps the deployed
mappings. The runtime follows the emulator as Lambda's pollers follow the
API: before every pump it re-reads each mapping (an update takes effect, a
disabled mapping stops, a deleted one is gone) and each function (an updated
configuration is a cold start); after each apply it adds the mappings the
apply created.

* ``consumers``: with ``audit`` and ``shipping``, (1) add ``billing``, change
  ``audit``'s batch size, turn tracing on, move to another Powertools release,
  and retire ``shipping`` (the removal runbook's first step); (2) once
  ``shipping`` drained, remove it, acknowledged.
* ``switch``: the transport switch's runbook with ``audit``: (1) pause
  publishing; (2) once drained, switch ``publish_to`` to ``sns``, acknowledged,
  paused; (3) resume.

The two run apart so that they can run side by side (each apply is mostly the
provider's SQS waiters). Each writes what happened (events written, each
consumer's ledger, what is left anywhere, what each apply changed in the
emulator) as JSON; the tests check the invariants on it.
"""

from __future__ import annotations

import argparse
import faulthandler
import io
import json
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import zipfile
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ClientError

from demo.capture import FunctionOutput
from demo.deployment import Deployment, read_deployment
from demo.emulator import Emulator, configure_process, restore_process
from demo.functions import DeployedFunction, in_process
from demo.observe import consumer_name, queue_depth
from demo.stack import Stack
from demo.workload import write_orders
from dynamodb_outbox.ledger import read_ledger
from dynamodb_outbox.local import (
    LocalRuntime,
    SqsMapping,
    StreamMapping,
    VirtualClock,
    stream_records_follow,
)
from dynamodb_outbox.writer import OutboxWriter
from tests.dependency_shortcuts import OFF, allowed
from tests.terraform.provider_reattach import ProviderNotShared, shared_aws_provider
from tests.terraform.tfhelpers import REPO_ROOT

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account
EVENT_SOURCE = "demo.orders"
RUNTIME = "python3.13"  # the module's lambda_runtime and lambda_architecture defaults
ARCHITECTURE = "arm64"
POWERTOOLS_BEFORE = "3.37.0"  # the module's default (tests/terraform/test_powertools_version.py)
POWERTOOLS_AFTER = "3.38.0"
AUDIT_BATCH_BEFORE, AUDIT_BATCH_AFTER = 10, 4
#: orders written per pump while an apply runs, and the pause between pumps
ORDERS_PER_PUMP = 1
PUMP_INTERVAL_SECONDS = 1.0
MAX_ORDERS_PER_APPLY = 30
#: Lambda delivers at least once: this share of the batches the publisher handled,
#: and of the messages each consumer handled, comes again (once), so "took effect
#: once" is the consumers' idempotency at work, not every event delivered once.
REDELIVERY_RATE = 0.25
DRAIN_BOUND = 2_000
QUEUE_DELETED = "AWS.SimpleQueueService.NonExistentQueue"
EMULATED = (
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
    "ssm",
    "sts",
)


# ---------------------------------------------------------------------- emulator


def _moto_checked(patch: str) -> None:
    """The patches below reach into moto's internals as of the release in
    tests/dependency_shortcuts.py; the live flow needs them (they are not speed
    shortcuts that can be left off), so on another release it stops, saying why."""
    if not allowed("moto", f"live_flow.{patch}"):
        raise RuntimeError(next(line for line in OFF if f"live_flow.{patch} " in line))


def keep_moto_pollers_off() -> None:
    """moto never acts on an event source mapping: the local runtime is Lambda here.

    moto "invokes" a stream mapping's function on every write and then drops
    the stream's records, and receives an enabled SQS mapping's queue on every
    send (demo/emulator.py, dynamodb_outbox/local/config.py). The demo detaches
    them once after its apply; here mappings are created by every apply, so the
    hooks are taken off as moto creates them. The mappings themselves stay in
    the Lambda API, enabled, as Terraform made them.
    """
    _moto_checked("keep_moto_pollers_off")
    from moto.awslambda.models import LambdaBackend
    from moto.dynamodb.models import dynamodb_backends
    from moto.sqs.models import sqs_backends

    original = LambdaBackend.create_event_source_mapping

    def create_event_source_mapping(self: LambdaBackend, spec: dict[str, Any]) -> Any:
        mapping = original(self, spec)
        for queue in sqs_backends[self.account_id][self.region_name].queues.values():
            queue.lambda_event_source_mappings.clear()
        for table in dynamodb_backends[self.account_id][self.region_name].tables.values():
            table.lambda_event_source_mappings.clear()
        return mapping

    LambdaBackend.create_event_source_mapping = create_event_source_mapping  # type: ignore[method-assign]


def moto_updates_functions_as_aws() -> None:
    """``UpdateFunctionConfiguration`` as AWS does it, where moto 5.2.5 does not.

    moto ignores ``TracingConfig`` and leaves ``LastModified`` as it was; AWS
    applies the first and moves the second (LiveFunction tells an update by it).
    """
    _moto_checked("moto_updates_functions_as_aws")
    from moto.awslambda.models import LambdaFunction
    from moto.core.utils import iso_8601_datetime_with_nanoseconds

    original = LambdaFunction.update_configuration

    def update_configuration(self: LambdaFunction, config_updates: dict[str, Any]) -> Any:
        if "TracingConfig" in config_updates:
            self.tracing_config = config_updates["TracingConfig"]
        self.last_modified = iso_8601_datetime_with_nanoseconds()
        return original(self, config_updates)

    LambdaFunction.update_configuration = update_configuration  # type: ignore[method-assign]


def powertools_parameter(version: str) -> str:
    """The SSM parameter Powertools publishes its layer ARN under (main.tf)."""
    return f"/aws/service/powertools/python/{ARCHITECTURE}/{RUNTIME}/{version}"


def publish_powertools_layers(session: boto3.Session) -> dict[str, str]:
    """A layer version per release, and AWS's public parameter naming it, in the emulator.

    moto accepts only layer ARNs it knows, and holds none of AWS's public
    ``/aws/service/powertools/...`` parameters (nor lets anyone put a
    parameter under ``/aws``: AWS reserves it), so they are written into its
    SSM backend directly. Returns the layer ARN of each release.
    """
    _moto_checked("publish_powertools_layers")
    from moto.core.utils import utcnow
    from moto.ssm.models import Parameter, ssm_backends

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("python/.keep", "")
    lambda_client = session.client("lambda")
    parameters = ssm_backends[ACCOUNT][REGION]._parameters
    arns: dict[str, str] = {}
    for version in (POWERTOOLS_BEFORE, POWERTOOLS_AFTER):
        arn = lambda_client.publish_layer_version(
            LayerName="AWSLambdaPowertoolsPythonV3-python313-arm64",
            Content={"ZipFile": buffer.getvalue()},
            CompatibleRuntimes=[RUNTIME],
            CompatibleArchitectures=[ARCHITECTURE],
        )["LayerVersionArn"]
        name = powertools_parameter(version)
        parameters[name].append(
            Parameter(
                account_id=ACCOUNT,
                name=name,
                value=arn,
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=utcnow(),
                version=1,
                data_type="text",
            )
        )
        arns[version] = arn
    return arns


# ---------------------------------------------------------------------- the changes


@dataclass(frozen=True)
class Configuration:
    """The module inputs a step applies (the rest is examples/local as written)."""

    consumers: Mapping[str, Mapping[str, Any]]
    publish_to: str = "eventbridge"
    tracing_mode: str = "PassThrough"
    powertools_version: str = POWERTOOLS_BEFORE
    publishing: bool = True
    serial: int = 0
    acknowledged: tuple[str, ...] = ()

    def override(self, endpoint_url: str) -> str:
        """``live_override.tf``: merged into examples/local's provider and module blocks."""
        endpoints = "\n".join(f'    {name} = "{endpoint_url}"' for name in EMULATED)
        consumers = {
            key: {
                **(
                    {"event_pattern": json.dumps({"source": [EVENT_SOURCE]})}
                    if self.publish_to == "eventbridge"
                    else {"filter_policy": json.dumps({"source": [EVENT_SOURCE]})}
                ),
                **settings,
            }
            for key, settings in self.consumers.items()
        }
        return f"""\
provider "aws" {{
  endpoints {{
{endpoints}
  }}
}}

module "outbox" {{
  publish_to           = {json.dumps(self.publish_to)}
  powertools_layer_arn = null
  powertools_version   = {json.dumps(self.powertools_version)}
  tracing_mode         = {json.dumps(self.tracing_mode)}
  stream_mapping       = {{ enabled = {json.dumps(self.publishing)} }}
  sweeper              = {{ enabled = {json.dumps(self.publishing)} }}
  consumers            = jsondecode({json.dumps(json.dumps(consumers))})
  acknowledged_changes = {{
    serial  = {self.serial}
    changes = {json.dumps(list(self.acknowledged))}
  }}
}}
"""


@dataclass(frozen=True)
class Step:
    name: str
    configuration: Configuration
    #: consumer keys whose queue and DLQ must be empty before this step (the runbooks' drain)
    drained_first: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scenario:
    initial: Configuration
    steps: tuple[Step, ...]


AFTER_CHANGES = {"tracing_mode": "Active", "powertools_version": POWERTOOLS_AFTER}
SCENARIOS = {
    # The consumer and function changes, then the consumer removal's runbook.
    "consumers": Scenario(
        initial=Configuration(
            consumers={"audit": {"batch_size": AUDIT_BATCH_BEFORE}, "shipping": {}}
        ),
        steps=(
            Step(
                "add billing, audit batch size, tracing, Powertools release, retire shipping",
                Configuration(
                    consumers={
                        "audit": {"batch_size": AUDIT_BATCH_AFTER},
                        "shipping": {"retired": True},
                        "billing": {},
                    },
                    serial=1,  # a consumer added: the recorded shape changes
                    **AFTER_CHANGES,
                ),
            ),
            Step(
                "remove shipping (acknowledged)",
                Configuration(
                    consumers={"audit": {"batch_size": AUDIT_BATCH_AFTER}, "billing": {}},
                    serial=2,
                    acknowledged=("consumers.shipping=removed",),
                    **AFTER_CHANGES,
                ),
                drained_first=("shipping",),
            ),
        ),
    ),
    # The transport switch's runbook: pause, drain, switch, resume.
    "switch": Scenario(
        initial=Configuration(consumers={"audit": {}}),
        steps=(
            Step("pause publishing", Configuration(consumers={"audit": {}}, publishing=False)),
            Step(
                "switch publish_to to sns (acknowledged), publishing paused",
                Configuration(
                    consumers={"audit": {}},
                    publish_to="sns",
                    publishing=False,
                    serial=1,
                    acknowledged=("publish_to=sns",),
                ),
                drained_first=("audit",),
            ),
            Step(
                "resume publishing",
                Configuration(
                    consumers={"audit": {}},
                    publish_to="sns",
                    serial=1,
                    acknowledged=("publish_to=sns",),
                ),
            ),
        ),
    ),
}


# ---------------------------------------------------------------------- the flow


class LiveFunction:
    """A deployed function run in-process, following its configuration across applies.

    An update of a function's configuration makes Lambda start new execution
    environments: the next invocation is a cold start with the new environment.
    In this process that is a new :func:`demo.functions.in_process` handler and
    the publisher's per-environment caches cleared.
    """

    def __init__(self, function: DeployedFunction, output: FunctionOutput) -> None:
        self._output = output
        self.function = function
        self._invoke = in_process(function, output)
        self.cold_starts = 1

    def follow(self, function: DeployedFunction) -> None:
        if function == self.function:
            return
        self.function = function
        self._invoke = in_process(function, self._output)
        self.cold_starts += 1
        publisher = sys.modules.get("dynamodb_outbox.publisher")
        if publisher is not None:
            publisher.default_runtime.cache_clear()
            publisher._sweeper_runs.cache_clear()

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        return self._invoke(event, context)


@dataclass
class Consumer:
    uuid: str
    mapping: SqsMapping
    function: LiveFunction
    queue_url: str
    dlq_url: str | None


@dataclass
class Written:
    event_id: str
    #: the step running (or last finished) when it was committed; 0 = before the first
    step: int
    #: committed while an apply ran
    during_apply: bool


@dataclass
class Flow:
    """The deployed mappings on the local runtime, and the writer feeding them."""

    session: boto3.Session
    output: FunctionOutput
    clock: VirtualClock = field(default_factory=VirtualClock)
    written: list[Written] = field(default_factory=list)
    consumers: dict[str, Consumer] = field(default_factory=dict)
    #: per consumer key, the step after which it was added, removed
    added_after: dict[str, int] = field(default_factory=dict)
    removed_at: dict[str, int] = field(default_factory=dict)
    #: every consumer's name as its ledger keys it, removed ones too
    names: dict[str, str] = field(default_factory=dict)
    #: every consumer's mapping, removed ones too (their redeliveries are counted)
    mappings: dict[str, SqsMapping] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.runtime = LocalRuntime(self.clock)
        self.publisher: StreamMapping | None = None
        self.publisher_function: LiveFunction | None = None
        self.publisher_uuid = ""
        self._lambda = self.session.client("lambda")
        self.writer: OutboxWriter | None = None
        self.step = 0
        self.applying = False
        self._next_order = 1

    # ---------------------------------------------------------------- wiring

    def follow(self, outputs: Mapping[str, Any]) -> Deployment:
        """Re-read the deployment and make the runtime match it, as Lambda's pollers would."""
        deployment = read_deployment(outputs, self.session)
        streams = self.session.client("dynamodbstreams")
        sqs = self.session.client("sqs")
        if self.publisher is None or self.publisher_function is None:
            self.publisher_function = LiveFunction(deployment.publisher, self.output)
            self.publisher = self.runtime.add(
                StreamMapping(
                    deployment.stream_mapping,
                    self.publisher_function,
                    streams_client=streams,
                    sqs_client=sqs,
                    clock=self.clock,
                    function_timeout_seconds=deployment.publisher.timeout_seconds,
                    duplicate_delivery_rate=REDELIVERY_RATE,
                    random_source=random.Random("publisher"),
                )
            )
            self.publisher_uuid = str(deployment.stream_mapping["UUID"])
            self.writer = OutboxWriter(deployment.table_name, self.session.client("dynamodb"))
        else:
            self.publisher_function.follow(deployment.publisher)
            self.publisher.update(deployment.stream_mapping)
        deployed = {consumer.key: consumer for consumer in deployment.consumers}
        for key in sorted(set(self.consumers) - set(deployed)):
            gone = self.consumers.pop(key)
            self.runtime.mappings.remove(gone.mapping)
            self.removed_at[key] = self.step
        for key, consumer in deployed.items():
            if key in self.consumers:
                self.consumers[key].function.follow(consumer.function)
                self.consumers[key].mapping.update(consumer.mapping)
                continue
            function = LiveFunction(consumer.function, self.output)
            self.consumers[key] = Consumer(
                uuid=consumer.mapping["UUID"],
                mapping=self.runtime.add(
                    SqsMapping(
                        consumer.mapping,
                        function,
                        sqs_client=sqs,
                        clock=self.clock,
                        function_timeout_seconds=consumer.function.timeout_seconds,
                        duplicate_delivery_rate=REDELIVERY_RATE,
                        random_source=random.Random(key),
                    )
                ),
                function=function,
                queue_url=consumer.queue_url,
                dlq_url=consumer.dlq_url,
            )
            self.added_after[key] = self.step
            self.names[key] = consumer_name(consumer)
            self.mappings[key] = self.consumers[key].mapping
        return deployment

    # ---------------------------------------------------------------- traffic

    def write(self, count: int) -> None:
        assert self.writer is not None
        numbers = range(self._next_order, self._next_order + count)
        self._next_order += count
        for order in write_orders(self.writer, numbers, source=EVENT_SOURCE):
            self.written.append(Written(order.event_id, self.step, self.applying))

    def pump(self) -> None:
        """Follow the mappings and functions as they are now, then run what is ready."""
        self.follow_live()
        try:
            self.runtime.drain(max_invocations=DRAIN_BOUND)
        except ClientError as error:
            # The apply deleted a queue after its mapping, while this drain ran:
            # Lambda's poller had stopped at the mapping's deletion.
            if error.response["Error"]["Code"] != QUEUE_DELETED:
                raise
            self.follow_live()
            self.runtime.drain(max_invocations=DRAIN_BOUND)

    def follow_live(self) -> None:
        """What Lambda does while an apply runs: an updated, disabled or deleted mapping
        changes its poller at once, an updated function starts new environments.

        Mappings are followed by UUID; a mapping created by the apply joins in
        :meth:`follow`, once the apply's outputs say which queue it reads.
        """
        lambda_client = self._lambda
        assert self.publisher is not None and self.publisher_function is not None
        self.publisher.update(_mapping(lambda_client, self.publisher_uuid))
        self.publisher_function.follow(
            DeployedFunction.read(lambda_client, self.publisher_function.function.name)
        )
        for key, consumer in list(self.consumers.items()):
            config = _mapping(lambda_client, consumer.uuid, missing_ok=True)
            function = _function(lambda_client, consumer.function.function.name)
            if config is None or function is None:  # deleted: Lambda stops polling
                # (the function goes after its mapping: read between the two deletes)
                self.runtime.mappings.remove(consumer.mapping)
                del self.consumers[key]
                self.removed_at[key] = self.step
                continue
            consumer.mapping.update(config)
            consumer.function.follow(function)

    def depths(self, key: str) -> dict[str, int]:
        consumer = self.consumers[key]
        sqs = self.session.client("sqs")
        return {
            "queue": queue_depth(sqs, consumer.queue_url),
            "dlq": queue_depth(sqs, consumer.dlq_url) if consumer.dlq_url else 0,
        }


def apply_while_flowing(
    stack: Stack, flow: Flow, *, step: int, limit: int = MAX_ORDERS_PER_APPLY
) -> tuple[dict[str, Any], float, int]:
    """``terraform apply`` in a thread while orders are written and the runtime pumps.

    Returns the outputs, the apply's wall time, and the orders written meanwhile.
    """
    done: dict[str, Any] = {}

    def apply() -> None:
        try:
            done["outputs"] = stack.apply({})[1]
        except BaseException as exc:  # handed to the main thread
            done["error"] = exc

    flow.step, flow.applying = step, True
    started = time.monotonic()
    thread = threading.Thread(target=apply, name=f"apply-{step}")
    thread.start()
    written = 0
    while thread.is_alive():
        if written < limit:
            flow.write(ORDERS_PER_PUMP)
            written += ORDERS_PER_PUMP
        flow.pump()
        thread.join(timeout=PUMP_INTERVAL_SECONDS)
    flow.applying = False
    if "error" in done:
        raise done["error"]
    return done["outputs"], time.monotonic() - started, written


def _mapping(lambda_client: Any, uuid: str, *, missing_ok: bool = False) -> Any:
    try:
        return lambda_client.get_event_source_mapping(UUID=uuid)
    except lambda_client.exceptions.ResourceNotFoundException:
        if missing_ok:
            return None
        raise


def _function(lambda_client: Any, name: str) -> DeployedFunction | None:
    try:
        return DeployedFunction.read(lambda_client, name)
    except lambda_client.exceptions.ResourceNotFoundException:
        return None


# ---------------------------------------------------------------------- facts


def function_facts(lambda_client: Any, name: str) -> dict[str, Any]:
    config = lambda_client.get_function_configuration(FunctionName=name)
    return {
        "tracing": (config.get("TracingConfig") or {}).get("Mode"),
        "layers": sorted(layer["Arn"] for layer in config.get("Layers") or []),
    }


def snapshot(flow: Flow, deployment: Deployment, outputs: Mapping[str, Any]) -> dict[str, Any]:
    """What the emulator says the stack is after an apply."""
    lambda_client = flow.session.client("lambda")
    return {
        "consumers": {
            consumer.key: {
                "batch_size": int(consumer.mapping["BatchSize"]),
                "rule": consumer.rule_name,
                **function_facts(lambda_client, consumer.function.name),
            }
            for consumer in deployment.consumers
        },
        "publisher": {
            "mapping_state": deployment.stream_mapping.get("State"),
            "sink": {
                name: value
                for name, value in deployment.publisher.environment.items()
                if name.startswith("OUTBOX_")
                and ("BUS" in name or "TOPIC" in name or "SINK" in name)
            },
            **function_facts(lambda_client, deployment.publisher.name),
        },
        "event_bus_name": outputs.get("event_bus_name"),
        "sns_topic_arn": outputs.get("sns_topic_arn"),
    }


def end_state(flow: Flow, deployment: Deployment, seams: Any) -> dict[str, Any]:
    dynamodb = flow.session.client("dynamodb")
    sqs = flow.session.client("sqs")
    table = deployment.idempotency_table
    assert table is not None, "examples/local deploys the reference consumers' table"
    leftovers = []
    request: dict[str, Any] = {"TableName": deployment.table_name, "ConsistentRead": True}
    while True:
        page = dynamodb.scan(**request)
        leftovers += [i["SK"]["S"] for i in page["Items"] if i["SK"]["S"].startswith("OUTBOX#")]
        if "LastEvaluatedKey" not in page:
            break
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    ledgers = {}
    for key, name in sorted(flow.names.items()):
        ledgers[key] = {
            entry["event_id"]: entry["times_processed"]
            for entry in read_ledger(dynamodb, table, name)
        }
    return {
        "ledgers": ledgers,
        "depths": {key: flow.depths(key) for key in flow.consumers},
        "outbox_items_left": leftovers,
        "on_failure_depth": queue_depth(sqs, deployment.on_failure_queue_url),
        "dropped_at_seams": len(seams.dropped),
        "dead_lettered_at_seams": len(seams.dead_lettered),
        "publisher_failure_records": len(flow.publisher.failure_records) if flow.publisher else 0,
    }


# ---------------------------------------------------------------------- main


def run(scenario: Scenario, work_dir: Path, log: Callable[[str], None]) -> dict[str, Any]:
    emulator = Emulator.start(REGION)
    saved_env = configure_process(emulator.url, REGION)
    output = FunctionOutput(work_dir / "functions.log", sys.stderr)
    output.install()
    provider = ExitStack()
    try:
        keep_moto_pollers_off()
        moto_updates_functions_as_aws()
        boto3.setup_default_session(region_name=REGION)  # the handlers' boto3.client(...)
        session = emulator.session()
        layers = publish_powertools_layers(session)
        stack = Stack.prepare(work_dir)
        override = stack.example_dir / "live_override.tf"
        stack.init()
        # One provider process for the run's applies (provider_reattach.py).
        reattach = provider.enter_context(
            shared_aws_provider(
                stack.example_dir / ".terraform",
                work_dir / "provider.log",
                cwd=stack.example_dir,
                env=stack.env,
            )
        )
        stack.env.update(reattach)
        facts: dict[str, Any] = {
            "powertools_layers": layers,
            "steps": [],
            "provider_shared": bool(reattach),
        }
        flow = Flow(session=session, output=output)
        with stream_records_follow(flow.clock):
            override.write_text(scenario.initial.override(emulator.url))
            started = time.monotonic()
            _, outputs = stack.apply({"endpoint_url": emulator.url, "region": REGION})
            # Each step's plan starts from the state the last apply wrote, and
            # nothing but this run changes the emulator's resources: the refresh
            # would only cost time (~20 s per apply).
            stack.env.update(
                {
                    "TF_VAR_endpoint_url": emulator.url,
                    "TF_VAR_region": REGION,
                    "TF_CLI_ARGS_apply": "-refresh=false",
                }
            )
            deployment = flow.follow(outputs)
            facts["initial"] = {
                "apply_seconds": round(time.monotonic() - started, 1),
                **snapshot(flow, deployment, outputs),
            }
            log(f"initial apply: {facts['initial']['apply_seconds']} s")
            flow.write(5)
            flow.pump()
            for number, step in enumerate(scenario.steps, start=1):
                drained = {key: flow.depths(key) for key in step.drained_first}
                override.write_text(step.configuration.override(emulator.url))
                outputs, seconds, written = apply_while_flowing(stack, flow, step=number)
                deployment = flow.follow(outputs)
                flow.pump()
                facts["steps"].append(
                    {
                        "name": step.name,
                        "apply_seconds": round(seconds, 1),
                        "written_during_apply": written,
                        "drained_before": drained,
                        **snapshot(flow, deployment, outputs),
                    }
                )
                log(f"step {number} ({step.name}): {seconds:.0f} s, {written} orders meanwhile")
            flow.write(5)
            flow.pump()
            facts["written"] = [
                {"event_id": w.event_id, "step": w.step, "during_apply": w.during_apply}
                for w in flow.written
            ]
            facts["added_after"] = flow.added_after
            facts["removed_at"] = flow.removed_at
            facts["cold_starts"] = {
                key: consumer.function.cold_starts for key, consumer in flow.consumers.items()
            } | {"publisher": flow.publisher_function.cold_starts if flow.publisher_function else 0}
            facts["end"] = end_state(flow, deployment, emulator.seams)
            facts["redeliveries"] = {
                key: mapping.stats.duplicate_deliveries for key, mapping in flow.mappings.items()
            } | {"publisher": flow.publisher.stats.duplicate_deliveries if flow.publisher else 0}
        return facts
    finally:
        provider.close()
        output.close()
        emulator.stop()
        restore_process(saved_env)


RUN_TIMEOUT_SECONDS = 900


def run_in_a_process(scenario: str, work_dir: Path) -> dict[str, Any]:
    """Run ``scenario`` as ``python -m tests.terraform.live_flow``; its facts.

    Raises AssertionError with the run's output when it fails.
    """
    facts_path = work_dir / "facts.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.terraform.live_flow",
            scenario,
            "--facts",
            str(facts_path),
            "--work-dir",
            str(work_dir / "run"),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )
    assert result.returncode == 0, (
        f"exit code {result.returncode}\n{result.stdout}\n{result.stderr[-6000:]}\n"
        f"(terraform log: {work_dir / 'run' / 'terraform.log'})"
    )
    facts: dict[str, Any] = json.loads(facts_path.read_text())
    if not facts.get("provider_shared"):
        warnings.warn(
            ProviderNotShared(
                f"live flow {scenario!r}: every terraform command started its own provider "
                f"(slower, same checks); why: {result.stderr[-2000:]}"
            ),
            stacklevel=2,
        )
    return facts


def written_ids(facts: Mapping[str, Any], *, from_step: int = 0) -> set[str]:
    """The events committed from step ``from_step`` on (0: all of them)."""
    return {w["event_id"] for w in facts["written"] if w["step"] >= from_step}


def main(argv: Sequence[str] | None = None) -> int:
    # `kill -USR1 <pid>` prints every thread's stack, should a run seem stuck.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    parser = argparse.ArgumentParser(prog="python -m tests.terraform.live_flow")
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--facts", type=Path, required=True, help="write the facts here (JSON)")
    parser.add_argument("--work-dir", type=Path, help="default: a new temporary directory")
    args = parser.parse_args(argv)
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="outbox-live-flow-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    facts = run(
        SCENARIOS[args.scenario], work_dir, lambda line: print(line, file=sys.stderr, flush=True)
    )
    facts["seconds"] = round(time.monotonic() - started, 1)
    args.facts.write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
