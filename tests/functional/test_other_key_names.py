"""Tables keyed otherwise than PK/SK adopt the outbox: one setting reaches every part.

Each test runs for a table keyed ``pk``/``sk`` and one keyed ``id``/``sort``,
on moto: the writer gets the names as arguments, the publisher and the sweeper
through ``OUTBOX_PARTITION_KEY``/``OUTBOX_SORT_KEY`` (what the module sets),
``outbox-ops`` through its flags, and the stream mapping (the local runtime)
gets the filter the module builds for that sort key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from dynamodb_outbox import publisher
from dynamodb_outbox.local import LambdaContext, StreamMapping, VirtualClock, mapping_config
from dynamodb_outbox.local.records import outbox_stream_record, stream_event
from dynamodb_outbox.ops import main as outbox_ops
from dynamodb_outbox.outbox_item import (
    ATTR_PENDING_SHARD,
    ATTR_STATUS,
    STATUS_QUARANTINED,
    outbox_item,
    outbox_sk,
)
from dynamodb_outbox.publishing import PublishDependencies
from dynamodb_outbox.sweeper import runtime_from_environment, sweep
from dynamodb_outbox.table_keys import TableKeys
from dynamodb_outbox.writer import Condition, OutboxWriter
from tests.factories import REGION, SOURCE, make_envelope
from tests.functional.conftest import PENDING_INDEX

if TYPE_CHECKING:
    from tests.functional.conftest import EventBus

TABLE = "legacy-orders"
KEY_NAMES = [TableKeys("pk", "sk"), TableKeys("id", "sort")]


@pytest.fixture(params=KEY_NAMES, ids=lambda keys: "/".join(keys.names))
def keys(request: pytest.FixtureRequest) -> TableKeys:
    keys: TableKeys = request.param
    return keys


@pytest.fixture
def table(dynamodb_client: Any, keys: TableKeys) -> str:
    """The table an existing service would have: its own key names, the pending index on them."""
    partition, sort = keys.names
    description = dynamodb_client.create_table(
        TableName=TABLE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": partition, "AttributeType": "S"},
            {"AttributeName": sort, "AttributeType": "S"},
            {"AttributeName": ATTR_PENDING_SHARD, "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": partition, "KeyType": "HASH"},
            {"AttributeName": sort, "KeyType": "RANGE"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": PENDING_INDEX,
                "KeySchema": [
                    {"AttributeName": ATTR_PENDING_SHARD, "KeyType": "HASH"},
                    {"AttributeName": sort, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    )["TableDescription"]
    return str(description["LatestStreamArn"])


@pytest.fixture
def environment(
    monkeypatch: pytest.MonkeyPatch, keys: TableKeys, event_bus: EventBus
) -> Iterator[dict[str, str]]:
    """The functions' environment as the module sets it for this table."""
    variables = {
        "OUTBOX_TABLE_NAME": TABLE,
        "OUTBOX_EVENT_BUS_NAME": event_bus.name,
        "OUTBOX_PARTITION_KEY": keys.partition,
        "OUTBOX_SORT_KEY": keys.sort,
        "OUTBOX_PENDING_INDEX": PENDING_INDEX,
    }
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    publisher.default_runtime.cache_clear()
    yield variables
    publisher.default_runtime.cache_clear()


def writer_for(keys: TableKeys) -> OutboxWriter:
    return OutboxWriter(
        TABLE,
        boto3.client("dynamodb", region_name=REGION),
        source=SOURCE,
        partition_key=keys.partition,
        sort_key=keys.sort,
    )


def items(dynamodb_client: Any) -> list[dict[str, Any]]:
    return list(dynamodb_client.scan(TableName=TABLE, ConsistentRead=True)["Items"])


def test_the_stream_path_publishes_and_quarantines_on_the_tables_keys(
    table: str,
    keys: TableKeys,
    environment: dict[str, str],
    event_bus: EventBus,
    dynamodb_client: Any,
) -> None:
    # GIVEN an order and its event written through the writer, and a poison outbox
    # item (no envelope) in another partition
    writer = writer_for(keys)
    order = {keys.partition: "ORDER#1", keys.sort: "META", "total": 42}
    event = writer.new_event(order, "OrderCreated", {"order_id": "1"})
    writer.write(order, event, condition=Condition.item_absent(keys.partition))
    poison = outbox_item(
        "ORDER#2", make_envelope(), partition_key=keys.partition, sort_key=keys.sort
    )
    del poison["envelope"]
    dynamodb_client.put_item(TableName=TABLE, Item=poison)

    # WHEN the module's stream mapping (its filter on this sort key) drives the publisher
    mapping = StreamMapping(
        mapping_config(
            table,
            filter_patterns=[keys.stream_filter_pattern()],
            report_batch_item_failures=True,
        ),
        publisher.handler,
        streams_client=boto3.client("dynamodbstreams", region_name=REGION),
        clock=VirtualClock(),
    )
    mapping.drain()

    # THEN the event is on the bus, its outbox item deleted, the order untouched
    assert event_bus.received_ids() == [event.id]
    remaining = {item[keys.sort]["S"]: item for item in items(dynamodb_client)}
    assert set(remaining) == {"META", poison[keys.sort]["S"]}
    # AND the poison item is quarantined in place (marked, out of the pending index)
    quarantined = remaining[poison[keys.sort]["S"]]
    assert quarantined[ATTR_STATUS] == {"S": STATUS_QUARANTINED}
    assert ATTR_PENDING_SHARD not in quarantined
    # AND the mapping delivered only the two outbox INSERTs: the filter tested this sort key
    assert mapping.stats.records_delivered == 2


def test_the_sweeper_finds_and_publishes_pending_items_by_the_tables_keys(
    table: str,
    keys: TableKeys,
    environment: dict[str, str],
    event_bus: EventBus,
    dynamodb_client: Any,
) -> None:
    # GIVEN two orders' events the stream path never published
    writer = writer_for(keys)
    events = []
    for number in ("1", "2"):
        order = {keys.partition: f"ORDER#{number}", keys.sort: "META"}
        events.append(writer.new_event(order, "OrderCreated", {"order_id": number}))
        writer.write(order, events[-1])

    # WHEN the sweeper runs with the environment the module gives it
    runtime = runtime_from_environment()
    result = sweep(
        PublishDependencies(
            runtime.sink,
            runtime.table_name,
            runtime.dynamodb_client,
            table_keys=runtime.table_keys,
        ),
        index_name=runtime.index_name,
        min_age_seconds=0,
    )

    # THEN it read them from the index, published them oldest first and deleted them
    assert runtime.table_keys == keys
    assert (result.pending_items, result.foreign_keys, result.swept) == (2, 0, 2)
    assert event_bus.received_ids() == [event.id for event in events]
    assert {item[keys.sort]["S"] for item in items(dynamodb_client)} == {"META"}


def test_outbox_ops_lists_pending_items_under_the_tables_keys(
    table: str, keys: TableKeys, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN one pending event
    writer = writer_for(keys)
    order = {keys.partition: "ORDER#1", keys.sort: "META"}
    event = writer.new_event(order, "OrderCreated", {"order_id": "1"})
    writer.write(order, event)

    # WHEN an operator lists what is pending, naming the table's keys
    code = outbox_ops(
        [
            *("--table", TABLE, "--partition-key", keys.partition, "--sort-key", keys.sort),
            *("--json", "pending", "--pk", "ORDER#1"),
        ]
    )

    # THEN the item is listed with its partition key, sort key and event type
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    ((listed),) = report["pending"]["items"]
    assert (listed["pk"], listed["sk"], listed["event_type"]) == (
        "ORDER#1",
        outbox_sk(event.id),
        "OrderCreated",
    )


def test_outbox_ops_refuses_key_names_naming_the_flag(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code = outbox_ops(["--table", TABLE, "--sort-key", "envelope", "pending"])

    assert code == 2
    assert "--sort-key: the sort key attribute name 'envelope'" in capsys.readouterr().err


def test_a_built_stream_record_carries_the_tables_keys_and_the_publisher_takes_it(
    table: str, keys: TableKeys, environment: dict[str, str], event_bus: EventBus
) -> None:
    # GIVEN the stream record of an outbox item, built for this table's keys
    event = make_envelope()
    record = outbox_stream_record("ORDER#1", event, "100", table_keys=keys)
    assert record["dynamodb"]["Keys"] == {
        keys.partition: {"S": "ORDER#1"},
        keys.sort: {"S": outbox_sk(event.id)},
    }

    # WHEN the publisher's entry point gets it
    response = publisher.handler(
        stream_event([record]), LambdaContext("arn:aws:lambda:us-east-1:1:function:publisher")
    )

    # THEN the event is published
    assert response == {"batchItemFailures": []}
    assert event_bus.received_ids() == [event.id]
