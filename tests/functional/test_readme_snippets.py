"""The Python documentation's snippets run as printed, in order, against moto.

docs/python.md holds them; the README's "In application code" shows the first
writer and consumer snippets, which must stay the ones run here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.support.moto_tables import create_outbox_table

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PYTHON_DOC = REPO / "docs" / "python.md"


def python_blocks(heading: str, document: Path = PYTHON_DOC) -> list[str]:
    """The ```python blocks of one section (``heading`` with its ``#``s), in order."""
    text = document.read_text(encoding="utf-8")
    assert f"\n{heading}\n" in text, f"{document.name} has no {heading!r}"
    section = re.split(r"\n#{2,3} ", text.split(f"\n{heading}\n", 1)[1], maxsplit=1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def producer_blocks() -> list[str]:
    return python_blocks("## Producer code")


def create_orders_table(*, stream: bool = False) -> None:
    create_outbox_table(boto3.client("dynamodb"), "orders", stream="NEW_IMAGE" if stream else None)


def test_the_producer_snippets_run_against_an_orders_table(aws: None, capsys: Any) -> None:
    blocks = producer_blocks()
    assert len(blocks) >= 2, "the Producer code section lost its snippets"
    create_orders_table()
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


def test_the_change_an_entity_snippet_pays_once_then_answers_409_and_404(
    aws: None, capsys: Any
) -> None:
    # GIVEN the order the producer snippet creates (status NEW)
    create_orders_table()
    namespace: dict[str, Any] = {}
    exec(compile(producer_blocks()[0], "README producer", "exec"), namespace)
    capsys.readouterr()

    # WHEN the "Changing an entity" snippet runs as printed
    (block,) = python_blocks("## Changing an entity and emitting an event")
    exec(compile(block, "README change an entity", "exec"), namespace)

    # THEN it paid once, then answered with the order's state, then with no order
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    paid = re.fullmatch(r"\(200, \{'event_id': '([0-9A-Z]{26})'\}\)", lines[0])
    assert paid, lines[0]
    assert lines[1:] == ["(409, {'status': 'PAID'})", "(404, {})"]
    order = boto3.client("dynamodb").get_item(
        TableName="orders", Key={"PK": {"S": "ORDER#1001"}, "SK": {"S": "META"}}
    )["Item"]
    assert (order["status"], order["paid_amount"]) == ({"S": "PAID"}, {"N": "42.50"})
    outbox = boto3.client("dynamodb").get_item(
        TableName="orders", Key={"PK": {"S": "ORDER#1001"}, "SK": {"S": f"OUTBOX#{paid[1]}"}}
    )
    assert outbox["Item"]["event_type"] == {"S": "OrderPaid"}


def test_the_typed_payload_snippet_hands_the_function_the_model(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    # GIVEN the README's consumer, then its typed-payload snippet
    from dynamodb_outbox.local import LambdaContext
    from dynamodb_outbox.local.records import consumer_event
    from tests.factories import make_envelope
    from tests.support.moto_tables import create_idempotency_table

    monkeypatch.setenv(
        "OUTBOX_IDEMPOTENCY_TABLE", create_idempotency_table(boto3.client("dynamodb"))
    )
    namespace: dict[str, Any] = {}
    consumer_block, typed_block = python_blocks("## Consumer code")[:2]
    exec(compile(consumer_block, "README consumer", "exec"), namespace)
    exec(compile(typed_block, "README typed consumer", "exec"), namespace)

    # WHEN an OrderCreated event and one whose payload lacks the total arrive
    good = make_envelope(data={"order_id": "1001", "total": 42.5})
    bad = make_envelope(data={"order_id": "1002"})
    event = consumer_event([good, bad])
    response = namespace["ship"](event, LambdaContext("arn:aws:lambda:us-east-1:1:function:ship"))

    # THEN the good one was shipped with its parsed order, the other one failed alone
    assert response == {"batchItemFailures": [{"itemIdentifier": event["Records"][1]["messageId"]}]}
    assert f"shipping 1001 for event {good.id}" in capsys.readouterr().out


def test_the_router_snippet_sends_each_type_to_its_function_and_fails_unknown_ones(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    # GIVEN the README's consumer, its typed model and its router
    from dynamodb_outbox.local import LambdaContext
    from dynamodb_outbox.local.records import consumer_event
    from tests.factories import make_envelope
    from tests.support.moto_tables import create_idempotency_table

    monkeypatch.setenv(
        "OUTBOX_IDEMPOTENCY_TABLE", create_idempotency_table(boto3.client("dynamodb"))
    )
    namespace: dict[str, Any] = {}
    for number, block in enumerate(python_blocks("## Consumer code")[:3]):
        exec(compile(block, f"README consumer {number}", "exec"), namespace)

    # WHEN a batch carries the two routed types, an ignored one and an unknown one
    event = consumer_event(
        [
            make_envelope(type="OrderCreated", data={"order_id": "1", "total": 5}),
            make_envelope(type="OrderPaid", data={"order_id": "1", "amount": 5}),
            make_envelope(type="OrderShipped", data={}),
            make_envelope(type="OrderRefunded", data={}),
        ]
    )
    response = namespace["billing"](event, LambdaContext("arn:aws:lambda:us-east-1:1:function:b"))

    # THEN each routed type ran its function; only the unknown type's message failed
    assert response == {"batchItemFailures": [{"itemIdentifier": event["Records"][3]["messageId"]}]}
    printed = capsys.readouterr().out
    assert "invoicing 1" in printed and "settling 1 5.0" in printed


def test_the_readme_shows_the_first_writer_and_consumer_snippets_run_here() -> None:
    # The README's two snippets are not run on their own: they must be the ones above.
    shown = python_blocks("### In application code", README)
    assert shown == [producer_blocks()[0], python_blocks("## Consumer code")[0]], (
        "README.md's In application code must show docs/python.md's first Producer code "
        "and Consumer code snippets as they are"
    )
