"""The README's producer snippets run as printed, in order, against moto."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import boto3
import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def producer_blocks() -> list[str]:
    """The ```python blocks of README's "Producer code" section, in order."""
    text = README.read_text(encoding="utf-8")
    section = text.split("### Producer code", 1)[1].split("\n### ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_the_producer_snippets_run_against_an_orders_table(aws: None, capsys: Any) -> None:
    blocks = producer_blocks()
    assert len(blocks) >= 2, "the Producer code section lost its snippets"
    client = boto3.client("dynamodb")
    client.create_table(
        TableName="orders",
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "PK", "AttributeType": "S"},
            {"AttributeName": "SK", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "PK", "KeyType": "HASH"},
            {"AttributeName": "SK", "KeyType": "RANGE"},
        ],
    )
    namespace: dict[str, Any] = {}
    exec(compile(blocks[0], "README producer", "exec"), namespace)
    assert len(namespace["result"].event_ids) == 1
    # The retry snippet: on moto (no ClientRequestToken) the second write of the
    # derived event is cancelled on its outbox item, as the README says.
    from dynamodb_outbox.writer import TransactionCancelled

    exec(compile(blocks[1], "README retry", "exec"), namespace)
    with pytest.raises(TransactionCancelled) as cancelled:
        exec(compile(blocks[1], "README retry", "exec"), namespace)
    assert [(r.role, r.code) for r in cancelled.value.failures] == [
        ("event", "ConditionalCheckFailed")
    ]
