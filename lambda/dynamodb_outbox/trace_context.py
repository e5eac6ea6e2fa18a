"""The producer's trace context: found when an event is written, carried to its consumers.

An event records the trace it was written in as CloudEvents' distributed
tracing extension: ``traceparent`` (W3C Trace Context, ``00-<trace id>-<parent
id>-<flags>``) and, from OpenTelemetry, ``tracestate``. :func:`current` finds
it, first match wins:

1. OpenTelemetry's current span, when valid and the application uses
   ``opentelemetry`` (it is no dependency of this package);
2. the X-Ray SDK's current segment or subsegment, when the application has
   imported ``aws_xray_sdk`` (Powertools' Tracer does); its id is a better
   parent than Lambda's facade segment;
3. Lambda's ``_X_AMZN_TRACE_ID`` (the invocation's X-Ray header).

An X-Ray header and a ``traceparent`` carry the same three things: X-Ray's
``Root=1-<8 hex>-<24 hex>`` is the W3C trace id split after its eighth digit,
``Parent`` is the span id, ``Sampled=1`` the sampled flag (X-Ray has accepted
W3C trace ids from OpenTelemetry since 2023). So one ``traceparent`` is stored,
and :meth:`TraceContext.xray_header` gives the publisher the ``TraceHeader``
PutEvents takes. What does not convert is dropped: X-Ray's ``Lineage`` (Lambda's
recursive-loop counter, which must not count hops through a table) and
``Sampled=?`` (a deferred decision; written as not sampled). A header without
``Parent`` names no span to continue and is not recorded.

Finding a trace never fails a write: any error in a tracer means no trace.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["ENV_LAMBDA_TRACE_HEADER", "TraceContext", "current", "is_traceparent"]

#: Lambda sets the invocation's X-Ray trace header in this variable.
ENV_LAMBDA_TRACE_HEADER: Final = "_X_AMZN_TRACE_ID"

_TRACEPARENT: Final = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_XRAY_ROOT: Final = re.compile(r"1-([0-9a-f]{8})-([0-9a-f]{24})")
_SPAN_ID: Final = re.compile(r"[0-9a-f]{16}")
_SAMPLED_FLAG: Final = 0x01


def is_traceparent(value: object) -> bool:
    """A version-00 W3C ``traceparent`` whose trace and parent ids are not all zeros."""
    if not isinstance(value, str):
        return False
    match = _TRACEPARENT.fullmatch(value)
    return match is not None and int(match[1], 16) != 0 and int(match[2], 16) != 0


@dataclass(frozen=True)
class TraceContext:
    """A W3C trace context: ``traceparent`` and, optionally, ``tracestate``."""

    traceparent: str
    tracestate: str | None = None

    @classmethod
    def parse(cls, traceparent: object, tracestate: object = None) -> TraceContext | None:
        """The context of an event's ``traceparent``, or None when it is not a valid one."""
        if not is_traceparent(traceparent):
            return None
        state = tracestate if isinstance(tracestate, str) and tracestate else None
        return cls(str(traceparent), state)

    @classmethod
    def from_xray_header(cls, header: object) -> TraceContext | None:
        """The context of an X-Ray trace header (``Root=1-…;Parent=…;Sampled=1``), or None."""
        if not isinstance(header, str):
            return None
        fields = dict(part.strip().split("=", 1) for part in header.split(";") if "=" in part)
        root = _XRAY_ROOT.fullmatch(fields.get("Root", ""))
        parent = fields.get("Parent", "")
        if root is None or not _SPAN_ID.fullmatch(parent):
            return None
        flags = f"{_SAMPLED_FLAG:02x}" if fields.get("Sampled") == "1" else "00"
        return cls.parse(f"00-{root[1]}{root[2]}-{parent}-{flags}")

    @property
    def trace_id(self) -> str:
        """The 32 hex digits of the W3C trace id."""
        return self.traceparent[3:35]

    @property
    def xray_trace_id(self) -> str:
        """The trace id as X-Ray and Powertools' ``xray_trace_id`` write it: ``1-<8>-<24>``."""
        return f"1-{self.trace_id[:8]}-{self.trace_id[8:]}"

    @property
    def sampled(self) -> bool:
        return bool(int(self.traceparent[-2:], 16) & _SAMPLED_FLAG)

    def xray_header(self) -> str:
        """The X-Ray trace header of this context (PutEvents ``TraceHeader``)."""
        parent = self.traceparent[36:52]
        return f"Root={self.xray_trace_id};Parent={parent};Sampled={int(self.sampled)}"


def current() -> TraceContext | None:
    """The trace context the caller runs in (see the module docstring), or None."""
    for find in (_opentelemetry, _xray_sdk, _lambda_environment):
        with contextlib.suppress(Exception):
            context = find()
            if context is not None:
                return context
    return None


def _opentelemetry() -> TraceContext | None:
    # A span can only be active once the application has imported OpenTelemetry's
    # API; trying the import on every event would cost a failed path search
    # (~0.6 ms) where it is not installed.
    trace: Any = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return None
    flags = int(span_context.trace_flags)
    traceparent = f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{flags:02x}"
    return TraceContext.parse(traceparent, span_context.trace_state.to_header())


def _xray_sdk() -> TraceContext | None:
    # Only when the application uses the SDK: importing it here would make every
    # writer pay for it, and its recorder logs an error when no segment is open.
    core: Any = sys.modules.get("aws_xray_sdk.core")
    if core is None:
        return None
    recorder = core.xray_recorder
    # Lambda's context always has a (facade) segment; elsewhere, ask only inside one.
    in_lambda = type(recorder.context).__name__ == "LambdaContext"
    if not in_lambda and not getattr(getattr(recorder.context, "_local", None), "entities", None):
        return None
    entity = recorder.get_trace_entity()
    if entity is None:
        return None
    sampled = 1 if getattr(entity, "sampled", False) else 0
    return TraceContext.from_xray_header(
        f"Root={entity.trace_id};Parent={entity.id};Sampled={sampled}"
    )


def _lambda_environment() -> TraceContext | None:
    return TraceContext.from_xray_header(os.environ.get(ENV_LAMBDA_TRACE_HEADER))
