"""The producer's trace: found when an event is written, sent as PutEvents' TraceHeader.

X-Ray header <-> W3C traceparent (same trace id, parent and sampled flag), the
three places the writer looks (OpenTelemetry, the X-Ray SDK, Lambda's
``_X_AMZN_TRACE_ID``), and what the writer and the EventBridge sink do with it.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from dynamodb_outbox import trace_context
from dynamodb_outbox.sinks import EventBridgeSink, OutboundEvent, SnsSink
from dynamodb_outbox.trace_context import ENV_LAMBDA_TRACE_HEADER, TraceContext
from dynamodb_outbox.writer import InvalidWrite, OutboxWriter
from tests.factories import make_envelope

# AWS's example header (X-Ray developer guide, "Tracing header"), with Lambda's Lineage.
XRAY_HEADER = (
    "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a87bd80c:0"
)
TRACEPARENT = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"


class RecordingClient:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return {}


@pytest.fixture
def no_tracer(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OpenTelemetry, no X-Ray SDK in use, not in a Lambda invocation."""
    monkeypatch.delenv(ENV_LAMBDA_TRACE_HEADER, raising=False)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # import raises ImportError
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)
    monkeypatch.delitem(sys.modules, "aws_xray_sdk.core", raising=False)


# ------------------------------------------------------------------ conversions


def test_xray_header_becomes_the_same_trace_in_w3c_form_without_lineage() -> None:
    context = TraceContext.from_xray_header(XRAY_HEADER)
    assert context == TraceContext(TRACEPARENT)
    assert context.xray_trace_id == "1-5759e988-bd862e3fe1be46a994272793"
    assert context.xray_header() == (
        "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    )


@pytest.mark.parametrize(("sampled", "flags"), [("0", "00"), ("?", "00"), ("1", "01")])
def test_only_sampled_1_sets_the_sampled_flag(sampled: str, flags: str) -> None:
    header = f"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled={sampled}"
    context = TraceContext.from_xray_header(header)
    assert context is not None and context.traceparent.endswith(f"-{flags}")
    assert context.xray_header().endswith(f"Sampled={int(flags)}")


@pytest.mark.parametrize(
    "header",
    [
        "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1",  # no parent: no span to continue
        "Root=1-5759e988-bd862e3fe1be46a99427279;Parent=53995c3f42cd8ad8",
        "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",
        "Root=1-00000000-000000000000000000000000;Parent=53995c3f42cd8ad8",
        "Parent=53995c3f42cd8ad8",
        "",
        None,
    ],
)
def test_an_unusable_xray_header_gives_no_trace(header: str | None) -> None:
    assert TraceContext.from_xray_header(header) is None


@pytest.mark.parametrize(
    "value",
    [
        "01-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01",
        "00-00000000000000000000000000000000-53995c3f42cd8ad8-01",
        "00-5759e988bd862e3fe1be46a994272793-0000000000000000-01",
        "00-5759E988BD862E3FE1BE46A994272793-53995c3f42cd8ad8-01",
        "Root=1-5759e988-bd862e3fe1be46a994272793",
        42,
    ],
)
def test_only_a_valid_version_00_traceparent_parses(value: object) -> None:
    assert TraceContext.parse(value) is None


# ------------------------------------------------------------------ finding it


def test_nothing_is_found_outside_any_trace(no_tracer: None) -> None:
    assert trace_context.current() is None


def test_lambdas_trace_header_is_found(no_tracer: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_LAMBDA_TRACE_HEADER, XRAY_HEADER)
    assert trace_context.current() == TraceContext(TRACEPARENT)


def test_the_xray_sdks_current_subsegment_is_the_parent(
    no_tracer: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an application traced by the X-Ray SDK (outside Lambda), inside a subsegment
    from aws_xray_sdk.core import xray_recorder
    from aws_xray_sdk.core.context import Context

    monkeypatch.setitem(sys.modules, "aws_xray_sdk.core", sys.modules["aws_xray_sdk.core"])
    monkeypatch.setattr(xray_recorder, "_context", Context())
    segment = xray_recorder.begin_segment("orders-api", sampling=1)
    subsegment = xray_recorder.begin_subsegment("place-order")
    try:
        found = trace_context.current()
    finally:
        xray_recorder.end_subsegment()
        xray_recorder.end_segment()

    # THEN the trace is the segment's and the parent the subsegment's
    assert found is not None
    assert found.xray_trace_id == segment.trace_id
    assert found.traceparent.split("-")[2] == subsegment.id
    assert found.sampled


def test_the_xray_sdk_outside_a_segment_gives_way_to_lambdas_header(
    no_tracer: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aws_xray_sdk.core import xray_recorder
    from aws_xray_sdk.core.context import Context

    monkeypatch.setitem(sys.modules, "aws_xray_sdk.core", sys.modules["aws_xray_sdk.core"])
    monkeypatch.setattr(xray_recorder, "_context", Context())
    monkeypatch.setenv(ENV_LAMBDA_TRACE_HEADER, XRAY_HEADER)
    assert trace_context.current() == TraceContext(TRACEPARENT)


def _fake_opentelemetry(trace_id: int, span_id: int, flags: int, state: str) -> types.ModuleType:
    span_context = types.SimpleNamespace(
        is_valid=trace_id != 0,
        trace_id=trace_id,
        span_id=span_id,
        trace_flags=flags,
        trace_state=types.SimpleNamespace(to_header=lambda: state),
    )
    span = types.SimpleNamespace(get_span_context=lambda: span_context)
    module = types.ModuleType("opentelemetry.trace")
    module.get_current_span = lambda: span  # type: ignore[attr-defined]
    return module


@pytest.fixture
def opentelemetry_span(no_tracer: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An active OpenTelemetry span, through the API the finder uses."""
    module = _fake_opentelemetry(0x5759E988BD862E3FE1BE46A994272793, 0xABCDEF0123456789, 1, "v=1")
    monkeypatch.setitem(sys.modules, "opentelemetry", types.ModuleType("opentelemetry"))
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", module)
    yield


def test_an_opentelemetry_span_wins_over_lambdas_header(
    opentelemetry_span: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_LAMBDA_TRACE_HEADER, XRAY_HEADER)
    assert trace_context.current() == TraceContext(
        "00-5759e988bd862e3fe1be46a994272793-abcdef0123456789-01", "v=1"
    )


def test_an_invalid_opentelemetry_span_is_no_trace(
    no_tracer: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", types.ModuleType("opentelemetry"))
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", _fake_opentelemetry(0, 0, 0, ""))
    assert trace_context.current() is None


def test_a_tracer_that_raises_never_fails_the_write(
    no_tracer: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = types.ModuleType("opentelemetry.trace")
    broken.get_current_span = lambda: 1 / 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "opentelemetry", types.ModuleType("opentelemetry"))
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", broken)
    monkeypatch.setenv(ENV_LAMBDA_TRACE_HEADER, XRAY_HEADER)
    assert trace_context.current() == TraceContext(TRACEPARENT)


# ------------------------------------------------------------------ the writer


def test_the_writer_records_the_callers_trace_in_the_event(
    no_tracer: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a producer running in a Lambda invocation
    monkeypatch.setenv(ENV_LAMBDA_TRACE_HEADER, XRAY_HEADER)
    writer = OutboxWriter("orders", RecordingClient(), source="shop.orders")  # type: ignore[arg-type]

    # WHEN it builds an event
    event = writer.new_event("ORDER#1", "OrderPlaced", {"n": 1})

    # THEN the event carries the invocation's trace as its traceparent
    assert event.traceparent == TRACEPARENT
    assert event.to_dict()["traceparent"] == TRACEPARENT


def test_an_explicit_traceparent_wins_and_a_malformed_one_is_refused(
    no_tracer: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_LAMBDA_TRACE_HEADER, XRAY_HEADER)
    writer = OutboxWriter("orders", RecordingClient(), source="shop.orders")  # type: ignore[arg-type]
    mine = "00-11111111111111111111111111111111-2222222222222222-00"
    event = writer.new_event("ORDER#1", "T", {}, traceparent=mine, tracestate="k=v")
    assert (event.traceparent, event.tracestate) == (mine, "k=v")
    with pytest.raises(InvalidWrite, match="is not a W3C traceparent"):
        writer.new_event("ORDER#1", "T", {}, traceparent="Root=1-5759e988-bd862e3f")


def test_an_event_with_a_given_id_captures_no_trace_so_a_retry_is_the_same_request(
    no_tracer: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the same request retried from two invocations (two traces)
    writer = OutboxWriter("orders", RecordingClient(), source="shop.orders")  # type: ignore[arg-type]
    event_id = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
    monkeypatch.setenv(ENV_LAMBDA_TRACE_HEADER, XRAY_HEADER)
    first = writer.new_event("ORDER#1", "T", {}, event_id=event_id)
    monkeypatch.setenv(ENV_LAMBDA_TRACE_HEADER, XRAY_HEADER.replace("53995c3f", "6a995c3f"))
    second = writer.new_event("ORDER#1", "T", {}, event_id=event_id)

    # THEN both build the same event, byte for byte
    assert first.to_json() == second.to_json()
    assert first.traceparent is None


# ------------------------------------------------------------------ the publisher


def test_putevents_entry_carries_the_events_trace_as_its_trace_header() -> None:
    sink = EventBridgeSink(object(), "bus")  # type: ignore[arg-type]
    traced = sink.entry(OutboundEvent.of(make_envelope(traceparent=TRACEPARENT)))
    untraced = sink.entry(OutboundEvent.of(make_envelope()))
    assert traced["TraceHeader"] == (
        "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    )
    assert "TraceHeader" not in untraced


def test_a_malformed_traceparent_from_an_old_item_is_published_without_a_trace_header() -> None:
    # Tracing is not worth an event: the envelope is sent as written, without the header.
    sink = EventBridgeSink(object(), "bus")  # type: ignore[arg-type]
    entry = sink.entry(OutboundEvent.of(make_envelope(traceparent="not-a-traceparent")))
    assert "TraceHeader" not in entry


def test_sns_entries_have_no_trace_field_the_trace_travels_in_the_message() -> None:
    sink = SnsSink(object(), "arn:aws:sns:eu-west-1:123456789012:orders")  # type: ignore[arg-type]
    envelope = make_envelope(traceparent=TRACEPARENT)
    entry = sink.entry(OutboundEvent.of(envelope), "0")
    assert set(entry) == {"Id", "Message", "MessageAttributes"}
    assert TRACEPARENT in entry["Message"]
