"""``make demo``: deploy the example stack locally, push orders through it with faults, report.

Usage::

    .venv/bin/python -m demo.run_demo [--orders N] [--ordering fifo] [--keep]

``--ordering fifo`` (``make demo ORDERING=fifo``) applies the ordered path
(``publish_to = "sns_fifo"``: FIFO topic and queues), confirms every order in a
second transaction, and adds the "order per subject held" invariant.

Phases: start a moto server in this process; ``terraform init`` and ``apply``
``examples/local`` against it (a throwaway copy, the provider mirror); read
the deployed mappings, functions and queues back and hand the mappings to the
local Lambda runtime; write N orders with the outbox writer; run the flow on a
virtual clock while four faults are injected; check the invariants on the end
state; ``terraform destroy`` and stop the server (always, unless ``--keep``).

Exit codes: 0 every invariant held; 1 an invariant failed (or a fault did not
fire); 2 the demo could not run (apply failed, stack incomplete...); 3
terraform or the provider mirror is missing on this machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import boto3

from demo.capture import FunctionOutput
from demo.console import Console
from demo.deployment import Deployment, DeploymentError, LocalDeployment, read_deployment, wire
from demo.emulator import Emulator, configure_process, restore_process
from demo.faults import (
    PublisherCrash,
    PutEventsThrottle,
    send_poison_message,
    write_poison_outbox_item,
)
from demo.metering import CallMeter, PutEventsTap
from demo.observe import read_end_state
from demo.report import ConsumerRun, Report, RunFacts, build_report
from demo.stack import Stack, TerraformFailed, ToolingMissing
from demo.workload import Order, confirm_orders, write_orders
from dynamodb_outbox.local import (
    DrainLimitReached,
    SqsMapping,
    StreamMapping,
    VirtualClock,
    disable_emulator_mappings,
    stream_records_follow,
)
from dynamodb_outbox.writer import OutboxWriter

DEFAULT_ORDERS = 200
MIN_ORDERS = 10
DEFAULT_EVENT_SOURCE = "demo.orders"
REGION = "us-east-1"
EXIT_OK, EXIT_INVARIANT, EXIT_ERROR, EXIT_TOOLING = 0, 1, 2, 3
APP = "app (OutboxWriter)"
FAULT_INJECTION = "demo (fault injection)"
POLLERS = "Lambda pollers (local runtime)"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m demo.run_demo",
        description="Deploy examples/local to an in-process moto server, run orders through "
        "the outbox with injected faults, and check that nothing was lost or done twice.",
    )
    parser.add_argument(
        "--orders",
        type=int,
        default=DEFAULT_ORDERS,
        help=f"orders to write (default {DEFAULT_ORDERS})",
    )
    parser.add_argument(
        "--event-source",
        default=DEFAULT_EVENT_SOURCE,
        help=f"source of the events; the example rule matches it (default {DEFAULT_EVENT_SOURCE})",
    )
    parser.add_argument(
        "--ordering",
        choices=("none", "fifo"),
        default="none",
        help="fifo: the ordered path (publish_to = sns_fifo), two events per order and the "
        "'order per subject held' invariant (default none: EventBridge)",
    )
    parser.add_argument(
        "--regions",
        type=int,
        choices=(1, 2),
        default=1,
        help="2: one outbox in two regions of a global table, in-process, one region lost "
        "mid-run and adopted (demo/multi_region.py; no Terraform apply: moto has no global "
        "tables). Default 1",
    )
    parser.add_argument(
        "--report-json",
        type=Path,
        metavar="PATH",
        help="also write the report's figures and checks to PATH as JSON",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="skip terraform destroy; keep the emulator serving (until Ctrl-C) and the work dir",
    )
    args = parser.parse_args(argv)
    if args.orders < MIN_ORDERS:
        # Fewer leave the throttling fault no PutEvents call with two entries to hit.
        parser.error(f"--orders must be at least {MIN_ORDERS}, so that every fault has a batch")
    return args


class Demo:
    """One run. Its attributes are what the phases hand each other."""

    def __init__(self, args: argparse.Namespace, terminal: TextIO) -> None:
        self.args = args
        self.work_dir = Path(tempfile.mkdtemp(prefix="outbox-demo-"))
        self.console = Console(terminal, total_phases=7 if args.keep else 8)
        self.output = FunctionOutput(self.work_dir / "functions.log", terminal)
        self.meter = CallMeter()
        self.put_events = PutEventsTap()
        self.emulator: Emulator | None = None
        self.stack: Stack | None = None
        self.apply_attempted = False
        self.variables: dict[str, str] = {}
        self.outputs: dict[str, Any] = {}
        self.deployment: Deployment | None = None
        self.local: LocalDeployment | None = None
        self.clock = VirtualClock()
        self.crash: PublisherCrash | None = None
        self.throttle: PutEventsThrottle | None = None
        self.orders: list[Order] = []
        self.poison_outbox_sk = ""
        self.poison_message_id: str | None = None
        self.missing: list[str] = []
        self._saved_env: dict[str, str | None] = {}

    @property
    def ordered(self) -> bool:
        return bool(self.args.ordering == "fifo")

    # ------------------------------------------------------------------ phases

    def start_emulator(self) -> None:
        with self.console.phase("moto server (in-process)") as phase:
            self.emulator = Emulator.start(REGION)
            self._saved_env = configure_process(self.emulator.url, REGION)
            self.variables = {"endpoint_url": self.emulator.url, "region": REGION}
            if self.ordered:
                self.variables["publish_to"] = "sns_fifo"
            phase.summary = self.emulator.url

    def terraform_init(self) -> None:
        with self.console.phase("terraform init (provider mirror)") as phase:
            self.stack = Stack.prepare(self.work_dir)
            phase.summary = self.stack.init()

    def terraform_apply(self) -> None:
        assert self.stack is not None
        with self.console.phase("terraform apply examples/local") as phase:
            self.apply_attempted = True
            added, self.outputs = self.stack.apply(self.variables)
            consumers = sorted((self.outputs.get("consumers") or {}).keys())
            target = (
                f"FIFO topic {str(self.outputs.get('sns_topic_arn')).rsplit(':', 1)[-1]}"
                if self.ordered
                else f"bus {self.outputs['event_bus_name']}"
            )
            phase.summary = (
                f"{added} resources: table {self.outputs['table_name']}, {target}, "
                f"consumers: {', '.join(consumers) if consumers else 'none'}"
            )

    def take_over_mappings(self, sessions: dict[str, boto3.Session]) -> None:
        assert self.emulator is not None
        with self.console.phase("take over the event source mappings") as phase:
            inspect = sessions["inspect"]
            deployment = read_deployment(self.outputs, inspect)
            self.deployment = deployment
            # moto would consume the stream and the queues itself: stop it, keeping
            # the configurations read above for the runtime.
            self.emulator.detach_stream_mappings(deployment.stream_arn)
            disable_emulator_mappings(inspect.client("lambda"), deployment.sqs_mappings)
            if not deployment.consumers:
                self.missing.append(
                    "examples/local deploys no consumer (no `consumers` output): nothing "
                    "reads the bus, so delivery, idempotency and the DLQ cannot be checked"
                )
            self.local = wire(
                deployment,
                clock=self.clock,
                output=self.output,
                lambda_service=sessions["pollers"],
            )
            settings = self.local.publisher.settings
            queues = [
                f"queue {key} (batch {m.settings.batch_size}, visibility "
                f"{m.queue.visibility_timeout_seconds} s, maxReceiveCount "
                f"{m.queue.max_receive_count})"
                for key, m in self.local.consumers.items()
            ]
            stream = (
                f"stream (batch {settings.batch_size}, "
                f"bisect {'on' if settings.bisect_batch_on_function_error else 'off'}, "
                f"{settings.maximum_retry_attempts} retries)"
            )
            phase.summary = f"{' + '.join([stream, *queues])}; moto's own pollers off"

    def write(self, sessions: dict[str, boto3.Session]) -> None:
        deployment = self.deployment
        assert deployment is not None
        count = self.args.orders
        with self.console.phase(f"write {count} orders (+ poison)") as phase:
            writer = OutboxWriter(deployment.table_name, sessions["app"].client("dynamodb"))
            middle = count // 2
            source = self.args.event_source
            self.orders = write_orders(writer, range(1, middle + 1), source=source)
            key = write_poison_outbox_item(
                sessions["faults"].client("dynamodb"), deployment.table_name
            )
            self.poison_outbox_sk = key["SK"]["S"]
            self.orders += write_orders(writer, range(middle + 1, count + 1), source=source)
            if self.ordered:
                self.orders = confirm_orders(writer, self.orders, source=source)
            for consumer in deployment.consumers:
                self.poison_message_id = send_poison_message(
                    sessions["faults"].client("sqs"), consumer.queue_url
                )
            transactions = sum(len(order.event_ids) for order in self.orders)
            phase.summary = (
                f"{transactions} transactions; poison outbox item after order {middle}"
                + (", poison message on the consumer queue" if deployment.consumers else "")
            )

    def run_flow(self) -> None:
        local = self.local
        assert local is not None
        with self.console.phase("run the flow (virtual clock)") as phase:
            started = self.clock.now()
            bound = 1_000 + 4 * len(self.orders)
            try:
                local.runtime.drain(max_invocations=bound)
            except DrainLimitReached as exc:
                raise RuntimeError(f"the flow did not settle: {exc}") from exc
            finally:
                self._log_function_errors()
            consumers = sum(m.stats.invocations for m in local.consumers.values())
            phase.summary = (
                f"{len(local.publisher.invocations)} publisher + {consumers} consumer "
                f"invocations, clock +{self.clock.now() - started:.0f} s"
            )

    def _log_function_errors(self) -> None:
        """Lambda logs a failed invocation's error; so does the demo, in functions.log."""
        local = self.local
        assert local is not None
        mappings: list[StreamMapping | SqsMapping] = [local.publisher, *local.consumers.values()]
        for mapping in mappings:
            function = mapping.settings.function_arn.split(":")[6]
            for invocation in mapping.invocations:
                if invocation.error is not None:
                    self.output.note(
                        function,
                        f"[runtime] invocation {invocation.request_id} failed (attempt "
                        f"{invocation.attempt}): {invocation.error}",
                    )

    def check(self, sessions: dict[str, boto3.Session]) -> Report:
        deployment, local = self.deployment, self.local
        assert deployment is not None and local is not None
        assert self.crash is not None and self.throttle is not None
        with self.console.phase("check the invariants") as phase:
            end = read_end_state(sessions["inspect"], deployment)
            consumers = [
                ConsumerRun(
                    key=consumer.key,
                    function_name=consumer.function.name,
                    mapping=local.consumers[consumer.key],
                    max_receive_count=local.consumers[consumer.key].queue.max_receive_count,
                    duplicate_metric=self.output.metric(consumer.function.name, "DuplicateEvents"),
                    processed_metric=self.output.metric(consumer.function.name, "ProcessedEvents"),
                    failed_metric=self.output.metric(consumer.function.name, "FailedEvents"),
                )
                for consumer in deployment.consumers
            ]
            publisher = deployment.publisher.name
            report = build_report(
                RunFacts(
                    orders=self.orders,
                    poison_outbox_sk=self.poison_outbox_sk,
                    poison_message_id=self.poison_message_id,
                    publisher=local.publisher,
                    consumers=consumers,
                    put_events=self.put_events,
                    crash=self.crash,
                    throttle=self.throttle,
                    quarantined_metric=self.output.metric(publisher, "QuarantinedEvents"),
                    published_metric=self.output.metric(publisher, "PublishedEvents"),
                    meter=self.meter,
                    end=end,
                    missing=self.missing,
                    ordered=self.ordered,
                    dropped=[u.body for u in self.emulator.seams.dropped] if self.emulator else [],
                )
            )
            failed = [c for c in report.invariants + report.faults if not c.held]
            phase.summary = "all held" if not failed else f"{len(failed)} FAILED"
        return report

    def destroy(self) -> None:
        assert self.stack is not None
        with self.console.phase("terraform destroy") as phase:
            phase.summary = f"{self.stack.destroy(self.variables)} resources"

    # ------------------------------------------------------------------ wiring

    def sessions(self) -> dict[str, boto3.Session]:
        """The boto3 sessions in play, each with the hooks of its role."""
        emulator = self.emulator
        assert emulator is not None
        # The functions' handlers call boto3.client(...): the default session.
        boto3.setup_default_session(region_name=emulator.region)
        functions = boto3.DEFAULT_SESSION
        assert functions is not None
        sessions = {
            "app": emulator.session(),
            "faults": emulator.session(),
            "pollers": emulator.session(),
            "inspect": emulator.session(),
        }
        self.meter.attach(functions)
        self.meter.attach(sessions["app"], APP)
        self.meter.attach(sessions["faults"], FAULT_INJECTION)
        self.meter.attach(sessions["pollers"], POLLERS)
        self.put_events.attach(functions)
        publisher = self.outputs["publisher_function_name"]
        self.crash = PublisherCrash(publisher)
        self.crash.attach(functions)
        self.throttle = PutEventsThrottle(
            publisher,
            events_client=sessions["inspect"].client("events"),
            after=self.crash,
            sns_client=sessions["inspect"].client("sns"),
        )
        self.throttle.attach(functions)
        return sessions

    def run(self) -> Report:
        self.start_emulator()
        self.terraform_init()
        self.terraform_apply()
        sessions = self.sessions()
        with stream_records_follow(self.clock):
            self.take_over_mappings(sessions)
            self.write(sessions)
            self.run_flow()
        return self.check(sessions)

    def close(self, succeeded: bool, report: Report | None = None) -> None:
        """Destroy and stop, whatever happened; keep the work dir when it may be needed.

        With ``--keep`` the report is printed here, before the emulator is kept
        serving; otherwise the caller prints it last, destroy's timing included.
        """
        try:
            if self.stack is not None and self.apply_attempted and not self.args.keep:
                try:
                    self.destroy()
                except TerraformFailed as exc:
                    self.console.line(f"error: {str(exc).splitlines()[0]}")
                    raise
        finally:
            if self.emulator is not None:
                if self.args.keep:
                    if report is not None:
                        self.console.line(report.render(self.console.timings))
                    self._serve_until_interrupted()
                self.emulator.stop()
            self.output.close()
            restore_process(self._saved_env)
            if succeeded and not self.args.keep:
                shutil.rmtree(self.work_dir, ignore_errors=True)
            else:
                self.console.line(
                    f"work dir kept: {self.work_dir} (terraform.log, functions.log, state)"
                )

    def _serve_until_interrupted(self) -> None:
        assert self.emulator is not None
        self.console.line(
            f"--keep: the stack stays up at {self.emulator.url} (terraform state in "
            f"{self.work_dir / 'stack' / 'examples' / 'local'}); Ctrl-C to stop"
        )
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            self.console.line("stopping")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.regions == 2:
        from demo import multi_region

        return multi_region.main(args.orders)
    terminal = sys.stdout
    demo = Demo(args, terminal)
    demo.console.line(
        f"outbox demo: {args.orders} orders through examples/local"
        + (" (ordered path: SNS FIFO)" if args.ordering == "fifo" else "")
        + " on a local emulator, with 4 injected faults"
    )
    demo.output.install()
    report: Report | None = None
    code = EXIT_ERROR
    try:
        report = demo.run()
        code = EXIT_OK if report.ok else EXIT_INVARIANT
    except ToolingMissing as exc:
        demo.console.line(f"cannot run the demo on this machine: {exc}")
        code = EXIT_TOOLING
    except (TerraformFailed, DeploymentError) as exc:
        demo.console.line(f"error: {exc}")
    except Exception:
        demo.console.line("error: the demo stopped unexpectedly:")
        demo.console.line(traceback.format_exc())
    finally:
        try:
            demo.close(succeeded=code == EXIT_OK, report=report)
        except TerraformFailed:
            code = code or EXIT_ERROR
        except Exception:
            demo.console.line(f"error while cleaning up:\n{traceback.format_exc()}")
            code = code or EXIT_ERROR
    if report is not None:
        if not args.keep:
            terminal.write(report.render(demo.console.timings))
            terminal.flush()
        if args.report_json is not None:
            data = {**report.as_dict(), "exit_code": code}
            data["timings"] = {t.title: round(t.seconds, 1) for t in demo.console.timings}
            args.report_json.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return code


if __name__ == "__main__":
    sys.exit(main())
