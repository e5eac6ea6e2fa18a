"""examples/multi-region applied on the emulator: orders in both regions, a region cut, adoption.

Run by tests/terraform/test_multi_region_on_emulator.py as a subprocess::

    python -m tests.terraform.multi_region_flow --facts PATH

A process of its own, as tests/terraform/live_flow.py is (whose moto patches
it shares): it serves a moto server from this process, with the project's
moto adjustments (scripts/moto_server.py: global table replicas, events
forwarded between regions' buses as EventBridge does), keeps moto's own
Lambda pollers off (the local runtime is Lambda here), applies a copy of
``examples/multi-region`` as written (both providers pointed at the
emulator, no Powertools layer, the table deletable), then:

1. reads back what each region deployed: the replica in the other region
   (its stream and pending index, the other instance's existing table), each
   region's publisher mapping (its filters) and the environments of its
   publisher, sweeper and home ``billing`` consumer;
2. writes orders in both regions with the shipped writer (each region's
   ``writer_environment`` output, ``AWS_REGION`` the region), replicates
   between the two tables (``GlobalTableReplication``), runs each region's
   stream publisher as deployed (its mapping, its environment's region scope,
   its bus) and the home region's deployed consumer, which receives the other
   region's events through the forwarding rule;
3. cuts the other region off with pending items replicated out, lets the home
   region's sweeper adopt them as deployed (``adopted_regions``,
   ``adopt_after_seconds``, at virtual time), brings the other region back;
4. writes what happened as JSON; destroys the stack.

The two regions' publishers and sweepers run the package's code configured
from their deployed environments (one process cannot hold two regions'
module-level handler settings at once); the consumer runs its deployed
handler.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import boto3

from demo.capture import FunctionOutput
from demo.emulator import Emulator, configure_process, restore_process
from demo.functions import DeployedFunction, in_process
from dynamodb_outbox.local import (
    LocalRuntime,
    SqsMapping,
    StreamMapping,
    VirtualClock,
    stream_records_follow,
)
from dynamodb_outbox.local.replication import GlobalTableReplication
from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies
from dynamodb_outbox.settings import (
    ENV_EVENT_BUS_NAME,
    ENV_TABLE_NAME,
    region_scope_from_environment,
)
from dynamodb_outbox.sinks import EventBridgeSink
from dynamodb_outbox.sweeper import sweep
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from dynamodb_outbox.writer import OutboxWriter
from tests.terraform.live_flow import keep_moto_pollers_off
from tests.terraform.tfhelpers import EXAMPLES_DIR, REPO_ROOT

HOME, OTHER = "eu-west-1", "us-east-1"  # the example's defaults
NAME = "orders-outbox"
SERVICES = (
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
MODULE_SOURCE = re.compile(r'^(\s*source\s*=\s*)"\.\./\.\."', re.MULTILINE)
#: As deployed by the example (multi_region.adopt_after_seconds' default).
ADOPT_AFTER_SECONDS = 3600


def override(url: str) -> str:
    """Both providers on the emulator; the layer moto does not know left out."""
    endpoints = "\n".join(f'    {service} = "{url}"' for service in SERVICES)
    settings = f"""\
  access_key                  = "test"
  secret_key                  = "test"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  skip_region_validation      = true

  endpoints {{
{endpoints}
  }}"""
    return f"""\
provider "aws" {{
{settings}
}}

provider "aws" {{
  alias = "other"
{settings}
}}

module "outbox_home" {{
  powertools_layer_arn = ""
  table = {{
    stream_view_type            = "NEW_AND_OLD_IMAGES"
    deletion_protection_enabled = false
  }}
}}

module "outbox_other" {{
  powertools_layer_arn = ""
}}
"""


def terraform(work: Path, *args: str) -> str:
    result = subprocess.run(
        ["terraform", *args, "-no-color"], cwd=work, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"terraform {' '.join(args)}: {result.stdout}\n{result.stderr}")
    return result.stdout


def prepare(work: Path, url: str) -> None:
    shutil.copytree(
        EXAMPLES_DIR / "multi-region",
        work,
        ignore=shutil.ignore_patterns(".terraform*", "*.tfstate*"),
    )
    main_tf = work / "main.tf"
    text = main_tf.read_text(encoding="utf-8")
    text, count = MODULE_SOURCE.subn(lambda m: f'{m.group(1)}"{REPO_ROOT}"', text)
    if count != 2:
        raise RuntimeError('examples/multi-region/main.tf: expected two source = "../.."')
    main_tf.write_text(text, encoding="utf-8")
    (work / "emulator_override.tf").write_text(override(url), encoding="utf-8")


class Region:
    """One region as deployed: its clients, publisher mapping, sweeper settings."""

    def __init__(self, name: str, outputs: dict[str, Any], clock: VirtualClock) -> None:
        self.name = name
        self.session = boto3.Session(region_name=name)
        self.dynamodb = self.session.client("dynamodb")
        lam = self.session.client("lambda")
        self.publisher = DeployedFunction.read(lam, f"{NAME}-publisher")
        self.sweeper = DeployedFunction.read(lam, f"{NAME}-sweeper")
        env = self.publisher.lambda_environment()
        self.table = env[ENV_TABLE_NAME]
        self.bus = env[ENV_EVENT_BUS_NAME]
        self.scope = region_scope_from_environment(env)
        self.sweeper_scope = region_scope_from_environment(self.sweeper.lambda_environment())
        stream_arn = self.dynamodb.describe_table(TableName=self.table)["Table"]["LatestStreamArn"]
        (config,) = [
            m
            for m in lam.list_event_source_mappings(FunctionName=self.publisher.name)[
                "EventSourceMappings"
            ]
            if m["EventSourceArn"] == stream_arn
        ]
        self.filters = [f["Pattern"] for f in config["FilterCriteria"]["Filters"]]
        deps = self.deps(clock)

        def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
            return publish_stream_batch(event["Records"], deps, region_scope=self.scope).response()

        self.mapping = StreamMapping(
            config,
            handler,  # type: ignore[arg-type]
            streams_client=self.session.client("dynamodbstreams"),
            sqs_client=self.session.client("sqs"),
            clock=clock,
        )
        writer_env = {**outputs["writer_environment"]["value"][name], "AWS_REGION": name}
        self.writer = OutboxWriter.from_environment(writer_env, self.dynamodb)

    def deps(self, clock: VirtualClock) -> PublishDependencies[Any]:
        return PublishDependencies(
            EventBridgeSink(self.session.client("events"), self.bus),
            self.table,
            self.dynamodb,
            sleep=clock.advance,
            clock=clock.now_datetime,
            table_keys=DEFAULT_TABLE_KEYS,
        )

    def write_orders(self, count: int, tag: str) -> list[str]:
        ids: list[str] = []
        for n in range(count):
            pk = f"ORDER#{self.name}-{tag}-{n}"
            event = self.writer.new_event(pk, "OrderPlaced", {"n": n}, source="orders")
            ids.extend(self.writer.write({"PK": pk, "SK": "ORDER"}, [event]).event_ids)
        return ids

    def pending(self) -> list[str]:
        items = self.dynamodb.scan(TableName=self.table, ConsistentRead=True)["Items"]
        return sorted(i["SK"]["S"] for i in items if i["SK"]["S"].startswith("OUTBOX#"))

    def sweep(self, clock: VirtualClock) -> dict[str, int]:
        result = sweep(self.deps(clock), now=clock.now_datetime(), region_scope=self.sweeper_scope)
        return {"published": result.publish.published, "pending_items": result.pending_items}


def deployed_shape(regions: dict[str, Region]) -> dict[str, Any]:
    other = regions[OTHER].dynamodb.describe_table(TableName=regions[OTHER].table)["Table"]
    home = regions[HOME].dynamodb.describe_table(TableName=regions[HOME].table)["Table"]
    return {
        "home_replicas": [r["RegionName"] for r in home.get("Replicas", [])],
        "other_replica_stream": other.get("StreamSpecification", {}).get("StreamViewType"),
        "other_replica_indexes": [i["IndexName"] for i in other.get("GlobalSecondaryIndexes", [])],
        "filters": {name: r.filters for name, r in regions.items()},
        "scopes": {
            name: {
                "region": r.scope.region,
                "unstamped": r.scope.unstamped,
                "adopted": list(r.sweeper_scope.adopted),
                "adopt_after_seconds": r.sweeper_scope.adopt_after_seconds,
            }
            for name, r in regions.items()
        },
    }


def home_consumer(output: FunctionOutput, clock: VirtualClock) -> tuple[SqsMapping, list[dict]]:
    """The home region's deployed billing consumer, recording every body it is given."""
    session = boto3.Session(region_name=HOME)
    lam = session.client("lambda")
    function = DeployedFunction.read(lam, f"{NAME}-billing-consumer")
    (config,) = [
        m
        for m in lam.list_event_source_mappings()["EventSourceMappings"]
        if m["FunctionArn"] == function.arn
    ]
    deployed = in_process(function, output)
    bodies: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> Any:
        bodies.extend(json.loads(record["body"]) for record in event["Records"])
        return deployed(event, context)

    mapping = SqsMapping(
        config,
        handler,
        sqs_client=session.client("sqs"),
        clock=clock,
        environment=function.lambda_environment(),
    )
    return mapping, bodies


def run(work: Path) -> dict[str, Any]:
    emulator = Emulator.start(HOME)
    saved = configure_process(emulator.url, HOME)
    output = FunctionOutput(work.parent / "functions.log", sys.stderr)
    output.install()
    facts: dict[str, Any] = {}
    applied = False
    try:
        keep_moto_pollers_off()
        prepare(work, emulator.url)
        terraform(work, "init", "-input=false")
        terraform(work, "apply", "-auto-approve", "-input=false")
        applied = True
        outputs = json.loads(terraform(work, "output", "-json"))
        replan = subprocess.run(
            ["terraform", "plan", "-input=false", "-detailed-exitcode", "-no-color"],
            cwd=work,
            capture_output=True,
            text=True,
            check=False,
        )
        facts["replan_exit_code"] = replan.returncode  # 0: no changes, 2: changes
        facts["replan"] = replan.stdout[-3000:]
        # Made after the apply: it starts at the wall-clock time, like the ULIDs
        # the writer stamps from the wall clock.
        clock = VirtualClock()
        with stream_records_follow(clock):
            regions = {name: Region(name, outputs, clock) for name in (HOME, OTHER)}
            facts["deployed"] = deployed_shape(regions)
            replication = GlobalTableReplication(
                regions[HOME].table,
                {
                    name: (r.dynamodb, r.session.client("dynamodbstreams"))
                    for name, r in regions.items()
                },
                clock,
                delay_seconds=1.0,
            )
            consumer, bodies = home_consumer(output, clock)
            everything = LocalRuntime(clock)
            for part in (replication, regions[HOME].mapping, regions[OTHER].mapping, consumer):
                everything.add(part)

            written = {name: r.write_orders(4, "a") for name, r in regions.items()}
            everything.drain()

            # The other region writes more, they replicate out, and it is cut off.
            # The sweeper adopts by the age in the ids (wall-clock ULIDs) measured
            # at virtual time: bring the clock up to the wall first, or a slow
            # apply and drain leave it behind and the items look too young.
            clock.advance_to(time.time())
            stranded = regions[OTHER].write_orders(3, "b")
            clock.advance(2)
            replication.poll()
            replication.cut_off(OTHER)
            written[OTHER] += stranded
            survivor = LocalRuntime(clock)
            survivor.add(replication)
            survivor.add(regions[HOME].mapping)
            survivor.add(consumer)
            survivor.drain()
            clock.advance(ADOPT_AFTER_SECONDS + 120)
            facts["adoption_sweep"] = regions[HOME].sweep(clock)
            survivor.drain()

            # It comes back: replication resumes, its publisher wakes up.
            replication.restore(OTHER)
            everything.drain()
            clock.advance(600)
            facts["return_sweeps"] = {name: r.sweep(clock) for name, r in regions.items()}
            everything.drain()

            facts["written"] = written
            facts["stranded"] = stranded
            facts["delivered"] = [
                {"id": b["detail"]["id"], "region": b["region"], "account": b["account"]}
                for b in bodies
            ]
            facts["ledger_effects"] = consumer_effects(output)
            facts["pending"] = {name: r.pending() for name, r in regions.items()}
        return facts
    finally:
        try:
            if applied:
                destroyed = terraform(work, "destroy", "-auto-approve", "-input=false")
                facts["destroy"] = destroyed[-200:]
        finally:
            output.close()
            emulator.stop()
            restore_process(saved)


def consumer_effects(output: FunctionOutput) -> dict[str, float]:
    """The consumer's EMF metrics (ProcessedEvents, DuplicateEvents...), summed."""
    return {
        name: value
        for metrics in output.metrics.values()
        for name, value in metrics.items()
        if isinstance(value, int | float)
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--facts", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args(argv)
    facts = run(args.work)
    args.facts.write_text(json.dumps(facts, indent=2, default=str), encoding="utf-8")
    counts = Counter(d["region"] for d in facts["delivered"])
    print(f"delivered by region: {dict(counts)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
