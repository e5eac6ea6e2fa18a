"""A request that can never be sent costs only the entry or key at fault.

The handlers' clients skip botocore's parameter validation
(``publishing.table_client``, ``sinks.sink_client``), so a malformed request
no longer fails as a local ``ParamValidationError``: botocore's serializer
raises whatever it happens to (a ``KeyError`` for a key member no attribute
type has), or AWS refuses the whole call. Either way, nothing else is lost or
held back: a delete chunk is split and only its bad key is left over for the
sweeper, and the batch succeeds.

The clients here are real botocore clients without validation; their HTTP
answers are canned at ``before-send``, so the serializer runs for real.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import ClientError

from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies, table_client
from dynamodb_outbox.sinks import EventBridgeSink, SnsSink, sink_client
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from tests.factories import make_envelope, outbox_stream_record, sequence_numbers


@pytest.fixture(autouse=True)
def aws_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "eu-west-1",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    yield


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.data


def _answer(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    def respond(request: AWSPreparedRequest) -> AWSResponse:
        return AWSResponse(request.url, status, headers or {}, _Body(json.dumps(body).encode()))

    return respond


class CannedTable:
    """Answers a table client's requests; records the keys each delete asked for.

    A request holding a key in ``refused`` is refused whole (DynamoDB's
    ``ValidationException``), as DynamoDB does with a key that fits no item.
    """

    def __init__(self, refused: frozenset[str] = frozenset()) -> None:
        self.refused = refused
        self.deleted: list[str] = []

    def __call__(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse:
        body = json.loads(request.body or b"{}")
        for requests in body.get("RequestItems", {}).values():
            keys = [r["DeleteRequest"]["Key"]["SK"]["S"] for r in requests]
            if self.refused.intersection(keys):
                error = {
                    "__type": "com.amazonaws.dynamodb.v20120810#ValidationException",
                    "message": "The provided key element does not match the schema",
                }
                return _answer(400, error)(request)
            self.deleted.extend(keys)
        answer: Callable[[AWSPreparedRequest], AWSResponse] = _answer(200, {"UnprocessedItems": {}})
        return answer(request)


def _accept_every_event(request: AWSPreparedRequest, **_: Any) -> AWSResponse:
    entries = json.loads(request.body or b"{}")["Entries"]
    answer = {"FailedEntryCount": 0, "Entries": [{"EventId": "e"} for _ in entries]}
    return _answer(200, answer)(request)


def test_a_delete_key_the_serializer_cannot_take_is_the_only_one_left_over() -> None:
    # GIVEN the handlers' table client (no validation) and three published
    # events, the second with a key member no DynamoDB attribute type has
    table, events = table_client(), sink_client("events")
    canned = CannedTable()
    table.meta.events.register("before-send", canned)
    events.meta.events.register("before-send", _accept_every_event)
    seq = sequence_numbers()
    records = [outbox_stream_record(make_envelope(), "ORDER#1", next(seq)) for _ in range(3)]
    records[1]["dynamodb"]["Keys"]["PK"] = {"X": "ORDER#1"}
    good = [records[i]["dynamodb"]["Keys"]["SK"]["S"] for i in (0, 2)]

    # WHEN the publisher handles the batch
    result = publish_stream_batch(
        records,  # type: ignore[arg-type]
        PublishDependencies(
            EventBridgeSink(events, "bus"), "orders", table, table_keys=DEFAULT_TABLE_KEYS
        ),
    )

    # THEN the batch succeeds, its neighbours are deleted, and only the bad key
    # is left over (for the sweeper: a duplicate later, never a loss)
    assert result.response() == {"batchItemFailures": []}
    assert result.published == 3
    assert result.deleted == 2
    assert result.delete_leftovers == 1
    assert sorted(canned.deleted) == sorted(good)


class ProcessDied(Exception):
    """Not the request's fault: what a crash injected into the delete looks like."""


def test_an_exception_that_is_not_the_requests_fault_fails_the_invocation() -> None:
    # GIVEN the handlers' clients, and a delete that raises something neither
    # botocore nor its serializer raise (the process dying mid-call, a bug)
    table, events = table_client(), sink_client("events")

    def die(request: AWSPreparedRequest, **_: Any) -> AWSResponse:
        raise ProcessDied("injected")

    table.meta.events.register("before-send", die)
    events.meta.events.register("before-send", _accept_every_event)
    seq = sequence_numbers()
    records = [outbox_stream_record(make_envelope(), "ORDER#1", next(seq)) for _ in range(3)]

    # WHEN the publisher handles the batch, THEN the invocation fails (the batch
    # is retried, its events published again and absorbed by idempotency): the
    # keys are neither split one by one nor quietly left over as unsendable
    with pytest.raises(ProcessDied):
        publish_stream_batch(
            records,  # type: ignore[arg-type]
            PublishDependencies(
                EventBridgeSink(events, "bus"), "orders", table, table_keys=DEFAULT_TABLE_KEYS
            ),
        )


def test_a_delete_dynamodb_refuses_is_split_and_only_the_refused_key_left_over() -> None:
    # GIVEN 30 published events (two delete chunks), DynamoDB refusing any
    # request that holds the 5th key (a ValidationException for the whole call)
    table, events = table_client(), sink_client("events")
    seq = sequence_numbers()
    records = [outbox_stream_record(make_envelope(), "ORDER#1", next(seq)) for _ in range(30)]
    keys = [record["dynamodb"]["Keys"]["SK"]["S"] for record in records]
    canned = CannedTable(refused=frozenset({keys[4]}))
    table.meta.events.register("before-send", canned)
    events.meta.events.register("before-send", _accept_every_event)

    # WHEN the publisher handles the batch
    result = publish_stream_batch(
        records,  # type: ignore[arg-type]
        PublishDependencies(
            EventBridgeSink(events, "bus"), "orders", table, table_keys=DEFAULT_TABLE_KEYS
        ),
    )

    # THEN the refused request is not retried as it was, but split: every other
    # key of its chunk is deleted, and only the refused one is left over
    assert result.response() == {"batchItemFailures": []}
    assert (result.published, result.deleted, result.delete_leftovers) == (30, 29, 1)
    assert sorted(canned.deleted) == sorted(keys[:4] + keys[5:])


# ------------------------------------------------------------ calls AWS refuses

REFUSE_ME = "refuse-me"
TOPIC = "arn:aws:sns:eu-west-1:123456789012:orders"


class RefusingEvents:
    """PutEvents refusing, as a whole, any call that holds an entry marked REFUSE_ME."""

    def __init__(self) -> None:
        self.published: list[str] = []

    def put_events(self, *, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        ids = [json.loads(entry["Detail"])["id"] for entry in Entries]
        if any(REFUSE_ME in entry["Detail"] for entry in Entries):
            raise ClientError(
                {"Error": {"Code": "ValidationException", "Message": "1 validation error"}},
                "PutEvents",
            )
        self.published.extend(ids)
        return {"FailedEntryCount": 0, "Entries": [{"EventId": i} for i in ids]}


class RefusingTopic:
    """PublishBatch refusing, as a whole, any call that holds a message marked REFUSE_ME."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.published: list[str] = []

    def publish_batch(self, *, TopicArn: str, PublishBatchRequestEntries: list[Any]) -> Any:
        entries = PublishBatchRequestEntries
        if any(REFUSE_ME in entry["Message"] for entry in entries):
            raise ClientError(
                {"Error": {"Code": self.code, "Message": "Invalid parameter"}}, "PublishBatch"
            )
        self.published.extend(json.loads(entry["Message"])["id"] for entry in entries)
        return {"Successful": [{"Id": entry["Id"]} for entry in entries], "Failed": []}


class QuarantiningTable:
    def __init__(self) -> None:
        self.quarantined: list[tuple[str, str]] = []

    def update_item(self, **kwargs: Any) -> dict[str, Any]:
        reason = kwargs["ExpressionAttributeValues"][":reason"]["S"]
        self.quarantined.append((kwargs["Key"]["SK"]["S"], reason))
        return {}

    def batch_write_item(self, **kwargs: Any) -> dict[str, Any]:
        return {"UnprocessedItems": {}}


def _refused_sinks() -> Iterator[tuple[str, Any, Any]]:
    events = RefusingEvents()
    yield "ValidationException", EventBridgeSink(events, "bus"), events
    for code in ("InvalidParameter", "ParameterValueInvalid", "ValidationException"):
        topic = RefusingTopic(code)
        yield code, SnsSink(topic, TOPIC), topic


@pytest.mark.parametrize("case", range(4))
def test_a_call_aws_refuses_as_malformed_quarantines_only_the_entry_at_fault(case: int) -> None:
    # GIVEN 10 events, the 4th one AWS refuses (the call as a whole) though the
    # sink's rules let it through
    code, sink, client = list(_refused_sinks())[case]
    seq = sequence_numbers()
    envelopes = [make_envelope(data={"n": n}) for n in range(10)]
    envelopes[3] = make_envelope(data={"note": REFUSE_ME})
    records = [outbox_stream_record(e, "ORDER#1", next(seq)) for e in envelopes]
    table = QuarantiningTable()

    # WHEN the publisher handles the batch
    result = publish_stream_batch(
        records,  # type: ignore[arg-type]
        PublishDependencies(
            sink,
            "orders",
            table,  # type: ignore[arg-type]
            table_keys=DEFAULT_TABLE_KEYS,
        ),
    )

    # THEN the batch succeeds: the neighbours are published, the refused entry
    # alone is quarantined with AWS's code in its reason, nothing checkpointed
    assert result.response() == {"batchItemFailures": []}
    assert sorted(client.published) == sorted(e.id for i, e in enumerate(envelopes) if i != 3)
    assert [sk for sk, _ in table.quarantined] == [f"OUTBOX#{envelopes[3].id}"]
    assert code in table.quarantined[0][1]
