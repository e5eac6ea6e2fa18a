"""The table's key names: one setting, validated with messages naming the key at fault."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dynamodb_outbox.log_keys import key_digest, loggable_key
from dynamodb_outbox.settings import ConfigurationError, table_keys_from_environment
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS, InvalidTableKeys, TableKeys
from dynamodb_outbox.writer import Condition, InvalidWrite, OutboxWriter

# The filter defaults.tftest.hcl pins on the module's mapping, byte for byte.
MODULE_DEFAULT_FILTER = (
    '{"dynamodb":{"Keys":{"SK":{"S":[{"prefix":"OUTBOX#"}]}}},"eventName":["INSERT"]}'
)


class RecordingClient:
    """A DynamoDB client that keeps the transactions it is given."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def transact_write_items(self, **request: Any) -> dict[str, Any]:
        self.requests.append(request)
        return {}


@pytest.mark.parametrize(
    ("partition", "sort", "message"),
    [
        ("", "sk", "the partition key attribute name must be a non-empty string"),
        ("pk", "", "the sort key attribute name must be a non-empty string"),
        ("id", "id", "the partition and sort key attribute names are both 'id'"),
        ("pk", "envelope", "the sort key attribute name 'envelope' is an attribute of every"),
        ("outbox_status", "sk", "the partition key attribute name 'outbox_status' is an"),
        ("é" * 128, "sk", "over DynamoDB's 255 bytes"),
    ],
)
def test_unusable_key_names_are_refused_naming_the_key(
    partition: str, sort: str, message: str
) -> None:
    with pytest.raises(InvalidTableKeys, match=message):
        TableKeys(partition, sort)


def test_the_default_keys_are_pk_and_sk_and_build_the_modules_filter() -> None:
    assert DEFAULT_TABLE_KEYS.names == ("PK", "SK")
    assert DEFAULT_TABLE_KEYS.stream_filter_pattern() == MODULE_DEFAULT_FILTER


def test_the_stream_filter_tests_the_named_sort_key() -> None:
    pattern = json.loads(TableKeys("id", "sort").stream_filter_pattern())

    assert pattern == {
        "dynamodb": {"Keys": {"sort": {"S": [{"prefix": "OUTBOX#"}]}}},
        "eventName": ["INSERT"],
    }


def test_environment_names_the_keys_and_defaults_to_pk_sk() -> None:
    assert table_keys_from_environment({}) == DEFAULT_TABLE_KEYS
    assert table_keys_from_environment(
        {"OUTBOX_PARTITION_KEY": "id", "OUTBOX_SORT_KEY": "sort"}
    ) == TableKeys("id", "sort")


@pytest.mark.parametrize(
    ("environ", "variables"),
    [
        ({"OUTBOX_SORT_KEY": "quarantine_reason"}, "OUTBOX_SORT_KEY:"),
        ({"OUTBOX_PARTITION_KEY": "x" * 256}, "OUTBOX_PARTITION_KEY:"),
        ({"OUTBOX_PARTITION_KEY": "k", "OUTBOX_SORT_KEY": "k"}, "OUTBOX_PARTITION_KEY and "),
    ],
)
def test_a_bad_environment_variable_is_named(environ: dict[str, str], variables: str) -> None:
    with pytest.raises(ConfigurationError, match=f"environment variable {variables}"):
        table_keys_from_environment(environ)


def test_the_writer_names_the_argument_at_fault() -> None:
    with pytest.raises(InvalidWrite, match=r"^sort_key: the sort key attribute name 'envelope'"):
        OutboxWriter("orders", RecordingClient(), sort_key="envelope")  # type: ignore[arg-type]


def test_the_writer_puts_entity_and_outbox_item_under_the_tables_key_names() -> None:
    # GIVEN a writer for a table keyed id/sort
    client = RecordingClient()
    writer = OutboxWriter(
        "orders",
        client,  # type: ignore[arg-type]
        source="shop",
        partition_key="id",
        sort_key="sort",
    )
    order = {"id": "ORDER#1", "sort": "META", "total": 3}

    # WHEN it writes the order and its event
    event = writer.new_event(order, "OrderCreated", {"order_id": "1"})
    writer.write(order, event, condition=Condition.item_absent("id"))

    # THEN the outbox item carries OUTBOX#<id> under "sort", in the order's partition
    (request,) = client.requests
    entity_put, event_put = (action["Put"] for action in request["TransactItems"])
    assert entity_put["Item"]["id"] == {"S": "ORDER#1"}
    assert {name: event_put["Item"][name] for name in ("id", "sort")} == {
        "id": {"S": "ORDER#1"},
        "sort": {"S": f"OUTBOX#{event.id}"},
    }
    assert "PK" not in event_put["Item"] and "SK" not in event_put["Item"]
    assert event_put["ExpressionAttributeNames"] == {"#outbox_sk": "sort"}
    assert event.subject == "ORDER#1"


def test_the_writer_refuses_an_entity_without_the_tables_keys() -> None:
    writer = OutboxWriter("orders", RecordingClient(), source="shop", partition_key="pk")  # type: ignore[arg-type]
    order = {"PK": "ORDER#1", "SK": "META"}

    with pytest.raises(InvalidWrite, match="the entity needs a non-empty string pk"):
        writer.write(order, writer.new_event("ORDER#1", "OrderCreated", {}))
    with pytest.raises(InvalidWrite, match="the entity has no string pk"):
        writer.new_event(order, "OrderCreated", {})
    with pytest.raises(InvalidWrite, match="exactly pk and SK"):
        writer.update(order, "SET x = :x", writer.new_event("ORDER#1", "OrderCreated", {}))


def test_a_create_only_condition_on_a_key_the_table_lacks_is_refused() -> None:
    # GIVEN a table keyed pk/sk: attribute_not_exists(PK) would hold for every item
    client = RecordingClient()
    writer = OutboxWriter("orders", client, source="shop", partition_key="pk", sort_key="sk")  # type: ignore[arg-type]
    order = {"pk": "ORDER#1", "sk": "META"}
    event = writer.new_event(order, "OrderCreated", {})

    with pytest.raises(InvalidWrite, match=r"tests 'PK', which is not a key .*item_absent\('pk'\)"):
        writer.write(order, event, condition=Condition.item_absent())
    with pytest.raises(InvalidWrite, match="tests 'PK'"):
        writer.update(
            {"pk": "ORDER#1", "sk": "META"}, "SET x = :x", event, condition=Condition.item_exists()
        )
    assert client.requests == []

    writer.write(order, event, condition=Condition.item_absent("pk"))
    assert len(client.requests) == 1


def test_logs_keep_the_outbox_sort_key_under_its_name_and_digest_the_rest() -> None:
    keys = TableKeys("id", "sort")
    key = {"sort": {"S": "OUTBOX#01J0000000000000000000000"}, "id": {"S": "CUSTOMER#a@b.c"}}

    assert list(loggable_key(key, keys).items()) == [
        ("id", key_digest("CUSTOMER#a@b.c")),
        ("sort", "OUTBOX#01J0000000000000000000000"),
    ]
    # Under the default names, "sort" is just another attribute: digested.
    assert loggable_key(key, table_keys=DEFAULT_TABLE_KEYS)["sort"].startswith("sha256:")
