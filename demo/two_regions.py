"""Two regions of a global table on in-process moto: each region's replica, bus, writer, publisher.

Used by ``make demo REGIONS=2`` (demo/multi_region.py),
tests/runtime/test_multi_region.py and the multi-region fault campaign
(tests/reliability/test_multi_region_campaign.py). Each region is configured
as multi_region.tf configures an instance: a writer stamping its region, a
publisher mapping with the region's stream filters and scope.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import boto3

from dynamodb_outbox.local import StreamMapping, VirtualClock, mapping_config
from dynamodb_outbox.local.replication import GlobalTableReplication
from dynamodb_outbox.outbox_item import OUTBOX_SK_PREFIX
from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies
from dynamodb_outbox.regions import RegionScope, stream_filter_patterns
from dynamodb_outbox.sinks import EventBridgeSink
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from dynamodb_outbox.writer import OutboxWriter
from tests.support.moto_tables import create_outbox_table

EAST, WEST = "us-east-1", "eu-west-1"
TABLE = "orders"


@dataclass
class Region:
    """One region's deployment: its replica, bus (and a queue catching all), writer, publisher."""

    name: str
    session: boto3.Session
    dynamodb: Any
    bus: str
    queue_url: str
    writer: OutboxWriter
    received: list[str] = field(default_factory=list)

    def client(self, service: str) -> Any:
        return self.session.client(service)

    def drain_bus(self) -> list[str]:
        """Event ids the bus delivered since the last call (also kept in ``received``)."""
        sqs = self.client("sqs")
        ids: list[str] = []
        while True:
            messages = sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10).get(
                "Messages", []
            )
            if not messages:
                self.received.extend(ids)
                return ids
            for message in messages:
                ids.append(json.loads(message["Body"])["detail"]["id"])
                sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])

    def outbox_keys(self) -> set[str]:
        items = self.dynamodb.scan(TableName=TABLE, ConsistentRead=True)["Items"]
        return {i["SK"]["S"] for i in items if i["SK"]["S"].startswith(OUTBOX_SK_PREFIX)}

    def write_orders(self, count: int) -> list[str]:
        ids = []
        for n in range(count):
            pk = f"ORDER#{self.name}-{n}"
            event = self.writer.new_event(pk, "OrderPlaced", {"n": n}, source="orders")
            ids.extend(self.writer.write({"PK": pk, "SK": "ORDER"}, [event]).event_ids)
        return ids


def make_region(name: str) -> Region:
    session = boto3.Session(region_name=name)
    dynamodb = session.client("dynamodb")
    create_outbox_table(dynamodb, TABLE, stream="NEW_AND_OLD_IMAGES")
    events, sqs = session.client("events"), session.client("sqs")
    events.create_event_bus(Name="orders")
    queue_url = sqs.create_queue(QueueName="all-events")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
    events.put_rule(Name="all", EventBusName="orders", EventPattern='{"source":["orders"]}')
    events.put_targets(
        Rule="all",
        EventBusName="orders",
        Targets=[{"Id": "q", "Arn": queue_arn["Attributes"]["QueueArn"]}],
    )
    writer = OutboxWriter(TABLE, dynamodb, region=name)
    return Region(name, session, dynamodb, "orders", queue_url, writer)


def publisher_mapping(region: Region, clock: VirtualClock, scope: RegionScope) -> StreamMapping:
    """The region's publisher mapping, filtered and scoped as multi_region.tf configures it."""
    deps = PublishDependencies(
        sink=EventBridgeSink(region.client("events"), region.bus),
        table_name=TABLE,
        dynamodb_client=region.dynamodb,
        sleep=clock.advance,
        table_keys=DEFAULT_TABLE_KEYS,
    )
    stream_arn = region.dynamodb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return publish_stream_batch(event["Records"], deps, region_scope=scope).response()

    return StreamMapping(
        mapping_config(
            stream_arn,
            filter_patterns=stream_filter_patterns("SK", OUTBOX_SK_PREFIX, scope),
            report_batch_item_failures=True,
            bisect_batch_on_function_error=True,
        ),
        handler,  # type: ignore[arg-type]
        streams_client=region.client("dynamodbstreams"),
        clock=clock,
    )


def replication_between(regions: dict[str, Region], clock: VirtualClock, **kwargs: Any) -> Any:
    return GlobalTableReplication(
        TABLE,
        {name: (r.dynamodb, r.client("dynamodbstreams")) for name, r in regions.items()},
        clock,
        **kwargs,
    )
