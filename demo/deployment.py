"""What ``terraform apply`` deployed, read back from the emulator, and wired to the local runtime.

The runtime is configured from the emulator, not from a second copy of the
settings: the publisher's stream mapping and each consumer's SQS mapping come
from ``ListEventSourceMappings``, the functions' handler, timeout and
environment from ``GetFunctionConfiguration``, the queues' visibility timeout
and redrive policy from ``GetQueueAttributes`` (read by
:class:`~dynamodb_outbox.local.SqsMapping`), the rules' patterns from
``DescribeRule``. Terraform outputs only say where to look.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import boto3

from demo.capture import FunctionOutput
from demo.functions import DeployedFunction, in_process
from dynamodb_outbox.local import LocalRuntime, SqsMapping, StreamMapping, VirtualClock
from dynamodb_outbox.local import read_mappings as read_emulator_mappings


class DeploymentError(RuntimeError):
    """The deployed stack is not what the demo needs; the message says what is missing."""


@dataclass(frozen=True)
class ConsumerDeployment:
    """One entry of the example's ``consumers`` output, with its live configuration."""

    key: str
    function: DeployedFunction
    mapping: Mapping[str, Any]
    queue_url: str
    queue_arn: str
    dlq_url: str | None
    rule_name: str | None
    event_pattern: str | None


@dataclass(frozen=True)
class Deployment:
    """The stack as the emulator describes it."""

    region: str
    table_name: str
    stream_arn: str
    event_bus_name: str | None  # None on the ordered path (SNS FIFO)
    publisher: DeployedFunction
    stream_mapping: Mapping[str, Any]
    on_failure_queue_url: str
    idempotency_table: str | None
    consumers: tuple[ConsumerDeployment, ...]

    @property
    def sqs_mappings(self) -> list[Mapping[str, Any]]:
        return [consumer.mapping for consumer in self.consumers]


def _one_mapping(lambda_client: Any, function: DeployedFunction, source_arn: str) -> dict[str, Any]:
    # Listed by source, then matched on FunctionArn: moto finds a mapping by
    # FunctionName only with the exact string it was created with.
    mappings = [
        mapping
        for mapping in read_emulator_mappings(lambda_client, event_source_arn=source_arn)
        if str(mapping.get("FunctionArn", "")) == function.arn
        or str(mapping.get("FunctionArn", "")).startswith(function.arn + ":")
    ]
    if len(mappings) != 1:
        raise DeploymentError(
            f"expected one event source mapping from {source_arn} to {function.name}, "
            f"found {len(mappings)}"
        )
    return mappings[0]


def _rule(events: Any, rule_arn: str | None, bus: str | None) -> tuple[str | None, str | None]:
    if not rule_arn:
        return None, None
    name = rule_arn.rsplit("/", 1)[-1]
    rule = events.describe_rule(Name=name, EventBusName=bus)
    return name, rule.get("EventPattern")


def read_deployment(outputs: Mapping[str, Any], session: boto3.Session) -> Deployment:
    """Read the live configuration of everything ``outputs`` names."""
    lambda_client = session.client("lambda")
    events = session.client("events")
    publisher = DeployedFunction.read(lambda_client, outputs["publisher_function_name"])
    stream_mapping = _one_mapping(lambda_client, publisher, outputs["table_stream_arn"])
    if stream_mapping.get("UUID") != outputs.get("stream_mapping_uuid", stream_mapping["UUID"]):
        raise DeploymentError("the stream mapping in the emulator is not the one Terraform made")
    consumers: list[ConsumerDeployment] = []
    for key, consumer in sorted((outputs.get("consumers") or {}).items()):
        function = DeployedFunction.read(lambda_client, consumer["function_name"])
        rule_name, pattern = _rule(events, consumer.get("rule_arn"), outputs.get("event_bus_name"))
        consumers.append(
            ConsumerDeployment(
                key=key,
                function=function,
                mapping=_one_mapping(lambda_client, function, consumer["queue_arn"]),
                queue_url=consumer["queue_url"],
                queue_arn=consumer["queue_arn"],
                dlq_url=consumer.get("dlq_url"),
                rule_name=rule_name,
                event_pattern=pattern,
            )
        )
    return Deployment(
        region=outputs.get("region") or session.region_name,
        table_name=outputs["table_name"],
        stream_arn=outputs["table_stream_arn"],
        event_bus_name=outputs.get("event_bus_name"),
        publisher=publisher,
        stream_mapping=stream_mapping,
        on_failure_queue_url=outputs["on_failure_queue_url"],
        idempotency_table=outputs.get("idempotency_table_name"),
        consumers=tuple(consumers),
    )


@dataclass
class LocalDeployment:
    """The deployment's mappings, driven by the local runtime on one virtual clock."""

    runtime: LocalRuntime
    publisher: StreamMapping
    consumers: dict[str, SqsMapping]


def wire(
    deployment: Deployment,
    *,
    clock: VirtualClock,
    output: FunctionOutput,
    lambda_service: boto3.Session,
) -> LocalDeployment:
    """Mappings for the runtime; ``lambda_service`` is the session Lambda's pollers use."""
    streams = lambda_service.client("dynamodbstreams")
    sqs = lambda_service.client("sqs")
    runtime = LocalRuntime(clock)
    publisher = runtime.add(
        StreamMapping(
            deployment.stream_mapping,
            in_process(deployment.publisher, output),
            streams_client=streams,
            sqs_client=sqs,
            clock=clock,
            function_timeout_seconds=deployment.publisher.timeout_seconds,
        )
    )
    consumers = {
        consumer.key: runtime.add(
            SqsMapping(
                consumer.mapping,
                in_process(consumer.function, output),
                sqs_client=sqs,
                clock=clock,
                function_timeout_seconds=consumer.function.timeout_seconds,
            )
        )
        for consumer in deployment.consumers
    }
    return LocalDeployment(runtime=runtime, publisher=publisher, consumers=consumers)
