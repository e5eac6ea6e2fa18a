"""moto's shortcuts in tests/faster_moto.py are in place and give moto's own answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import boto3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.backends import get_backend
from moto.core.serialize import AttributePickerContext, XFormedAttributePicker

from tests.support.moto_tables import create_outbox_table

REGION = "eu-west-1"
TABLE = "outbox-faster-moto"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in {
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        yield


def test_the_serializer_names_each_attribute_as_moto_does() -> None:
    picker = XFormedAttributePicker()
    patched = XFormedAttributePicker.get_possible_keys
    assert getattr(patched, "_cached", False), "tests/faster_moto.py is not installed"
    model = boto3.client("sqs", region_name=REGION).meta.service_model
    shape = model.operation_model("GetQueueAttributes").output_shape

    class Queue:
        class Meta:
            serialization_aliases: ClassVar[dict[str, str]] = {"Attributes": "queue_attributes"}

    for obj in ({}, Queue(), object()):
        for key, member in shape.members.items():
            member.parent = shape  # type: ignore[attr-defined]
            context = AttributePickerContext(obj=obj, key=key, shape=member)
            expected = list(patched.original(picker, context))  # type: ignore[attr-defined]
            assert list(picker.get_possible_keys(context)) == expected
            assert list(picker.get_possible_keys(context)) == expected  # the kept answer


_scalar = st.one_of(
    st.fixed_dictionaries({"S": st.text(max_size=5)}),
    st.fixed_dictionaries({"N": st.from_regex(r"-?[0-9]{1,4}", fullmatch=True)}),
    st.fixed_dictionaries({"B": st.binary(max_size=5) | st.text(max_size=3)}),
    st.fixed_dictionaries({"SS": st.lists(st.text(max_size=3), max_size=3)}),
    st.fixed_dictionaries({"NS": st.lists(st.just("1"), max_size=2)}),
    st.fixed_dictionaries({"BS": st.lists(st.binary(max_size=3), max_size=2)}),
    st.fixed_dictionaries({"NULL": st.booleans()}),
    st.fixed_dictionaries({"BOOL": st.booleans()}),
    # Not plain: moto's own path must still take these.
    st.fixed_dictionaries({"S": st.none() | st.integers()}),
    st.just({"s": "lower-case key"}),
    st.none(),
)
_attribute_value = st.recursive(
    _scalar,
    lambda children: st.one_of(
        st.fixed_dictionaries({"M": st.dictionaries(st.text(max_size=3), children, max_size=3)}),
        st.fixed_dictionaries({"L": st.lists(children, max_size=3)}),
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(item=st.dictionaries(st.text(max_size=4), _attribute_value, max_size=4))
def test_attribute_values_are_written_as_moto_writes_them(item: dict[str, Any]) -> None:
    from moto.core.serialize import BaseJSONSerializer, JSONSerializer
    from moto.core.utils import get_service_model

    patched = BaseJSONSerializer._serialize_type_structure
    assert getattr(patched, "original", None) is not None, "faster_moto not installed"
    operation = get_service_model("dynamodb").operation_model("GetItem")

    def body() -> Any:
        serializer = JSONSerializer(
            operation_model=operation, value_picker=XFormedAttributePicker()
        )
        return serializer.serialize({"Item": item})["body"]

    fast = body()
    BaseJSONSerializer._serialize_type_structure = patched.original  # type: ignore[attr-defined,method-assign]
    try:
        assert fast == body()
    finally:
        BaseJSONSerializer._serialize_type_structure = patched  # type: ignore[method-assign]


def test_queue_counts_read_as_sqs_reports_them(aws: None) -> None:
    from moto.sqs.models import Queue

    assert getattr(Queue.messages.fget, "_one_clock_read", False), "faster_moto not installed"
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="counts")["QueueUrl"]
    for body in ("a", "b"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=60)

    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]

    assert attributes["ApproximateNumberOfMessages"] == "1"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "1"
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [message["Body"] for message in received] == ["b"]


def _moto_table() -> Any:
    return get_backend("dynamodb")["123456789012"][REGION].get_table(TABLE)


def _item(key: str) -> dict[str, Any]:
    return {"PK": {"S": key}, "SK": {"S": "A"}}


def test_a_cancelled_transaction_leaves_the_table_as_it_was(aws: None) -> None:
    client = boto3.client("dynamodb", region_name=REGION)
    create_outbox_table(client, TABLE)
    for key in ("bystander", "updated", "checked", "deleted"):
        client.put_item(TableName=TABLE, Item={**_item(key), "n": {"N": "1"}})
    table = _moto_table()
    before_items = {id(item): item for item in _items(table)}
    before_records = len(table.stream_shard.items)

    with pytest.raises(client.exceptions.TransactionCanceledException):
        client.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": _item("updated"),
                        "UpdateExpression": "SET n = :two",
                        "ExpressionAttributeValues": {":two": {"N": "2"}},
                    }
                },
                {"Put": {"TableName": TABLE, "Item": {**_item("new"), "n": {"N": "1"}}}},
                # A new item in a partition that exists, and a deleted one.
                {"Put": {"TableName": TABLE, "Item": {**_item("updated"), "SK": {"S": "B"}}}},
                {"Delete": {"TableName": TABLE, "Key": _item("deleted")}},
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": _item("checked"),
                        "ConditionExpression": "attribute_not_exists(PK)",
                    }
                },
            ]
        )

    table = _moto_table()
    values = {item["PK"]["S"]: item["n"]["N"] for item in client.scan(TableName=TABLE)["Items"]}
    assert values == {"bystander": "1", "updated": "1", "checked": "1", "deleted": "1"}
    assert client.scan(TableName=TABLE, Select="COUNT")["Count"] == 4
    assert len(table.stream_shard.items) == before_records
    # The backup shared the item the transaction does not name (the cheap path
    # was taken) and copied the ones it names.
    kept = [item for item in _items(table) if id(item) in before_items]
    assert [item.hash_key.value for item in kept] == ["bystander"]


def test_a_transaction_that_succeeds_is_applied(aws: None) -> None:
    client = boto3.client("dynamodb", region_name=REGION)
    create_outbox_table(client, TABLE)
    client.put_item(TableName=TABLE, Item={**_item("updated"), "n": {"N": "1"}})

    client.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": TABLE,
                    "Key": _item("updated"),
                    "UpdateExpression": "SET n = :two",
                    "ExpressionAttributeValues": {":two": {"N": "2"}},
                }
            },
            {"Put": {"TableName": TABLE, "Item": {**_item("new"), "n": {"N": "1"}}}},
        ]
    )

    values = {item["PK"]["S"]: item["n"]["N"] for item in client.scan(TableName=TABLE)["Items"]}
    assert values == {"updated": "2", "new": "1"}
    assert [record.record["eventName"] for record in _moto_table().stream_shard.items] == [
        "INSERT",
        "MODIFY",
        "INSERT",
    ]


def _items(table: Any) -> list[Any]:
    return [item for items in table.items.values() for item in items.values()]
