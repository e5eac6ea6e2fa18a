"""Each check on an outgoing event is made once, and none is lost on the way.

* ``SinkRules.check`` (the publisher's one pass) says what ``entry_size``,
  ``delivery_size`` and ``refusal`` say (the writer's three questions), in the
  order the publisher reports them, for events on either side of every rule.
* What depends only on an event's source and type is worked out once per pair.
* The handlers send with botocore's parameter validation off
  (``sinks.sink_client``, ``publishing.table_client``): every request a sink
  builds for an event its rules let through passes that validation, so turning
  it off drops a second check, not a first one. (The table's requests are sent
  through validating clients by the functional tests.)
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.exceptions import ParamValidationError
from botocore.validate import ParamValidator

from dynamodb_outbox import publisher, sinks, sweeper
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.publishing import table_client
from dynamodb_outbox.sinks import (
    PUT_EVENTS_MAX_DETAIL_TYPE_LENGTH,
    PUT_EVENTS_MAX_SOURCE_LENGTH,
    EventBridgeSink,
    OutboundEvent,
    SinkRules,
    SnsSink,
    _eventbridge,
    rules_for,
)

TOPIC = "arn:aws:sns:eu-west-1:123456789012:orders"
FIFO_TOPIC = "arn:aws:sns:eu-west-1:123456789012:orders.fifo"
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
ASTRAL = "\U0001f600"  # two UTF-16 units, four UTF-8 bytes


def _event(**fields: Any) -> OutboundEvent:
    values: dict[str, Any] = {
        "type": "OrderPlaced",
        "source": "shop.orders",
        "subject": "ORDER#1",
        "data": {"total": 42.5},
    }
    values.update(fields)
    return OutboundEvent.of(Envelope(**values))


def _events() -> Iterator[OutboundEvent]:
    """Events on either side of each rule of each sink, and some that break none."""
    yield _event()
    yield _event(traceparent=TRACEPARENT, correlation_id="c-1", sequence=7)
    yield _event(time="1969-12-31T23:59:59Z")  # sent without Time
    yield _event(type="t" * PUT_EVENTS_MAX_DETAIL_TYPE_LENGTH)
    yield _event(type="t" * (PUT_EVENTS_MAX_DETAIL_TYPE_LENGTH + 1))
    yield _event(type=ASTRAL * (PUT_EVENTS_MAX_DETAIL_TYPE_LENGTH // 2))
    yield _event(type=ASTRAL * (PUT_EVENTS_MAX_DETAIL_TYPE_LENGTH // 2) + "t")
    yield _event(source="s" * PUT_EVENTS_MAX_SOURCE_LENGTH)
    yield _event(source="s" * (PUT_EVENTS_MAX_SOURCE_LENGTH + 1))
    yield _event(source="AWS.orders")
    yield _event(source="café", type="Commandé", data={"note": "déjà vu " + ASTRAL})
    yield _event(type="Order\x01Placed")  # no XML character: SNS refuses it
    yield _event(data={"n": 2**63 - 1, "m": -(2**63)})
    yield _event(data={"n": 2**63})
    yield _event(data={"text": "12345678901234567890"})  # digits in a string only
    yield _event(subject="S" * 128)
    yield _event(subject="S" * 129)  # too long for a FIFO group
    yield _event(subject="ORDER 1")  # a blank: no FIFO group either
    for size in (200_000, 255_000, 262_000):
        yield _event(data={"blob": "x" * size})
        yield _event(data={"blob": "é" * (size // 2)})


ALL_RULES = {name: rules_for(name) for name in ("eventbridge", "sns", "sns_fifo")}


def _three_questions(rules: SinkRules, event: OutboundEvent) -> tuple[int, str | None]:
    """What the publisher said before ``check``: its three questions, asked in order."""
    size = rules.entry_size(event)
    if size > rules.max_request_bytes:
        return (
            size,
            f"event too large for {rules.name}: {size} bytes, limit {rules.max_request_bytes}",
        )
    delivered = rules.delivery_size(event)
    if delivered > rules.max_delivery_bytes:
        return size, (
            f"event too large for the consumer queues after {rules.name}: up to {delivered} "
            f"bytes delivered, limit {rules.max_delivery_bytes}"
        )
    refusal = rules.refusal(event)
    return size, None if refusal is None else f"{rules.name} cannot take it: {refusal}"


@pytest.mark.parametrize("publish_to", sorted(ALL_RULES))
def test_check_says_what_the_three_questions_say(publish_to: str) -> None:
    # GIVEN events on either side of every rule
    rules = ALL_RULES[publish_to]
    verdicts = set()
    for event in _events():
        # WHEN the publisher's one pass checks each
        # THEN it gives the entry size and the reason the three questions give
        assert rules.check(event) == _three_questions(rules, event), event.envelope
        verdicts.add(rules.check(event)[1] is None)
    assert verdicts == {True, False}  # both sides of the rules were met


def test_checks_of_a_source_and_type_are_made_once_per_pair() -> None:
    # GIVEN 100 events of one source and type, never seen before
    events = [_event(source="once.per.pair", data={"n": n}) for n in range(100)]
    misses = _eventbridge._cached_eventbridge_head.cache_info().misses

    # WHEN the EventBridge rules check them all
    for event in events:
        rules_for("eventbridge").check(event)

    # THEN the pair's sizes and refusal were worked out once
    assert _eventbridge._cached_eventbridge_head.cache_info().misses == misses + 1


@pytest.mark.parametrize("publish_to", sorted(ALL_RULES))
def test_long_sources_and_types_are_not_kept_across_events(publish_to: str) -> None:
    # GIVEN 40 events whose types are 120,000 characters, each type different
    # (a writer may store them; PutEvents refuses them, SNS takes them)
    rules = ALL_RULES[publish_to]
    long_types = 40
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        # WHEN the rules check each, and the events are dropped
        for n in range(long_types):
            rules.check(_event(type=f"T{n}" + "x" * 120_000))
            rules.check(_event(source=f"s{n}" + "s" * 120_000))
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()

    # THEN none of them is kept (a cache of every pair would hold ~10 MB)
    assert retained < 1_000_000, retained


# ------------------------------------------------------------- botocore validation


class Capturing:
    """Records the requests a sink makes; accepts every entry."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def put_events(self, **request: Any) -> dict[str, Any]:
        self.requests.append(("events:PutEvents", request))
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "x"} for _ in request["Entries"]]}

    def publish_batch(self, **request: Any) -> dict[str, Any]:
        self.requests.append(("sns:PublishBatch", request))
        entries = request["PublishBatchRequestEntries"]
        return {"Successful": [{"Id": entry["Id"]} for entry in entries], "Failed": []}


def _validation_errors(operation: str, request: dict[str, Any]) -> str | None:
    service, name = operation.split(":")
    model = botocore.session.get_session().get_service_model(service).operation_model(name)
    report = ParamValidator().validate(request, model.input_shape)
    return report.generate_report() if report.has_errors() else None


@pytest.mark.parametrize(
    ("publish_to", "sink_of"),
    [
        ("eventbridge", lambda client: EventBridgeSink(client, "orders-bus")),
        ("sns", lambda client: SnsSink(client, TOPIC)),
        ("sns_fifo", lambda client: SnsSink(client, FIFO_TOPIC)),
    ],
)
def test_every_request_for_events_the_rules_let_through_passes_botocore_validation(
    publish_to: str, sink_of: Any
) -> None:
    # GIVEN the events each sink's rules let through, one per call and ten per call
    client = Capturing()
    sink = sink_of(client)
    sendable = [event for event in _events() if sink.rules.check(event)[1] is None]
    assert len(sendable) >= 10

    # WHEN the sink sends them
    for event in sendable:
        sink.send([event])
    sink.send(sendable[:10])

    # THEN botocore's validator finds nothing wrong with any request
    assert len(client.requests) == len(sendable) + 1
    for operation, request in client.requests:
        assert _validation_errors(operation, request) is None


def test_the_validator_used_above_does_find_a_bad_request() -> None:
    # GIVEN a PutEvents entry with an empty bus name and an empty trace header
    request = {"Entries": [{"Source": "s", "DetailType": "t", "Detail": "{}", "EventBusName": ""}]}
    request["Entries"][0]["TraceHeader"] = ""

    # THEN the validation the sinks' clients skip reports it
    assert _validation_errors("events:PutEvents", request) is not None
    assert _validation_errors("events:PutEvents", {"Entries": []}) is not None


@pytest.fixture
def aws_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "OUTBOX_TABLE_NAME": "orders",
        "OUTBOX_EVENT_BUS_NAME": "orders-bus",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("OUTBOX_PUBLISH_TO", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    publisher.default_runtime.cache_clear()
    sweeper.default_runtime.cache_clear()
    yield
    publisher.default_runtime.cache_clear()
    sweeper.default_runtime.cache_clear()


class _Sent(Exception):
    """The request got past botocore's validation and was about to go out."""


def _stop_before_sending(**_: Any) -> None:
    raise _Sent


#: A request botocore's validation refuses, per service: a required member missing, or a list
#: under its minimum.
_INVALID_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "events": ("put_events", {}),
    "sns": ("publish_batch", {"TopicArn": TOPIC}),
    "dynamodb": ("batch_write_item", {"RequestItems": {"orders": []}}),  # a list under its minimum
}


def _validates(client: Any) -> bool:
    """Whether ``client`` refuses an invalid request before sending it (never sends it)."""
    method, request = _INVALID_CALLS[client.meta.service_model.service_name]
    client.meta.events.register("before-send", _stop_before_sending)
    try:
        getattr(client, method)(**request)
    except ParamValidationError:
        return True
    except _Sent:
        return False
    raise AssertionError("the request neither failed validation nor reached before-send")


@pytest.mark.usefixtures("aws_environment")
def test_the_handlers_clients_skip_botocores_validation() -> None:
    # GIVEN the runtimes the publisher and the sweeper build from their environment
    for runtime in (publisher.default_runtime(), sweeper.default_runtime()):
        # THEN neither the sink's client nor the table's validates again what the
        # handlers built (the table's requests: publishing.table_client)
        assert not _validates(runtime.sink._client)  # type: ignore[attr-defined]
        assert not _validates(runtime.dynamodb_client)


@pytest.mark.usefixtures("aws_environment")
def test_the_client_factories_make_clients_without_validation() -> None:
    for service in ("events", "sns"):
        client = sinks.sink_client(service)  # type: ignore[call-overload]
        assert client.meta.service_model.service_name == service
        assert not _validates(client)
    assert not _validates(table_client())
    # and the check above tells a validating client apart
    assert _validates(boto3.client("events"))


def test_a_naive_time_never_reaches_a_sink() -> None:
    # The one value botocore's serialiser would take either way: EventBridge's
    # Time is the envelope's time, always aware (converted to UTC).
    event = _event()
    assert isinstance(event.time, datetime)
    assert event.time.tzinfo is not None
