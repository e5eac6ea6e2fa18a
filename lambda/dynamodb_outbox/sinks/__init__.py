"""The transports events leave by, and the rules each one imposes on an event.

A sink is one API: :class:`EventBridgeSink` (``PutEvents`` on a bus) or
:class:`SnsSink` (``PublishBatch`` on a topic). What a sink can carry is
described by its :class:`SinkRules`, which need no client, so that two parts
share one definition:

* the writer refuses up front an event the sink the table publishes to would
  never accept (:func:`rules_for` turns the module's ``publish_to`` into rules);
* the publisher quarantines such an event when one reaches the table anyway
  (an older writer, a hand-written item), before any call, so that it cannot
  fail the call of its neighbours.

Per-entry failures are classified by one rule for both sinks: an entry is
poison only when its error code says the entry itself is malformed. Every other
code, including authorisation, KMS and codes AWS adds later, is retried: a
configuration mistake then blocks publishing and fires the alarms instead of
quarantining every event, and once it is fixed the events flow again.

Only the standard library, the envelope and the trace context are imported
here, so the writer can use the rules without pulling in boto3's clients or
Powertools.

The producer's trace travels with each event: in the envelope's
``traceparent`` always, and as PutEvents' per-entry ``TraceHeader`` (X-Ray
form), which EventBridge hands to its targets. SNS has no per-message
equivalent: PublishBatch entries have no trace field, SNS takes the trace from
the request's ``X-Amzn-Trace-Id`` header (one per call, shared by events of
different producers), so on SNS paths the consumer reads the trace from the
event itself.

The pieces live in private modules, one concern each:

- ``_publish_to``: the one ``publish_to`` parser, and :func:`rules_for`;
- ``_types``: :class:`OutboundEvent`, :class:`EntryResult`, :class:`SinkError`,
  the :class:`SinkRules` and :class:`Sink` protocols, :func:`sink_client` and
  the client protocols;
- ``_eventbridge``: ``PutEvents``' rules and :class:`EventBridgeSink`;
- ``_sns``: ``PublishBatch``'s rules, topic ARNs and :class:`SnsSink`, loaded
  the first time one of its names is used: a publisher to EventBridge never
  needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from dynamodb_outbox.sinks._eventbridge import (
    EVENTBRIDGE_RULES,
    POISON_PUT_EVENTS_CODES,
    PUT_EVENTS_MAX_DETAIL_TYPE_LENGTH,
    PUT_EVENTS_MAX_ENTRIES,
    PUT_EVENTS_MAX_SOURCE_LENGTH,
    PUT_EVENTS_TIME_BYTES,
    EventBridgeRules,
    EventBridgeSink,
    put_events_entry_size,
)
from dynamodb_outbox.sinks._publish_to import (
    PUBLISH_TO,
    PUBLISH_TO_EVENTBRIDGE,
    PUBLISH_TO_SNS,
    PUBLISH_TO_SNS_FIFO,
    PublishTo,
    parse_publish_to,
    rules_for,
)
from dynamodb_outbox.sinks._types import (
    EntryResult,
    EventsClient,
    OutboundEvent,
    Sink,
    SinkError,
    SinkRules,
    SnsClient,
    sink_client,
)
from dynamodb_outbox.sizes import PUT_EVENTS_MAX_REQUEST_BYTES

if TYPE_CHECKING:
    from dynamodb_outbox.sinks._sns import (
        POISON_SNS_CODES,
        SNS_ATTRIBUTE_OVERHEAD_BYTES,
        SNS_FIFO_RULES,
        SNS_MAX_ENTRIES,
        SNS_MAX_REQUEST_BYTES,
        SNS_MESSAGE_ATTRIBUTES,
        SNS_RULES,
        SnsRules,
        SnsSink,
        TopicArn,
        parse_topic_arn,
        sns_entry_size,
    )

__all__ = [
    "EVENTBRIDGE_RULES",
    "POISON_PUT_EVENTS_CODES",
    "POISON_SNS_CODES",
    "PUBLISH_TO",
    "PUBLISH_TO_EVENTBRIDGE",
    "PUBLISH_TO_SNS",
    "PUBLISH_TO_SNS_FIFO",
    "PUT_EVENTS_MAX_DETAIL_TYPE_LENGTH",
    "PUT_EVENTS_MAX_ENTRIES",
    "PUT_EVENTS_MAX_REQUEST_BYTES",
    "PUT_EVENTS_MAX_SOURCE_LENGTH",
    "PUT_EVENTS_TIME_BYTES",
    "SNS_ATTRIBUTE_OVERHEAD_BYTES",
    "SNS_FIFO_RULES",
    "SNS_MAX_ENTRIES",
    "SNS_MAX_REQUEST_BYTES",
    "SNS_MESSAGE_ATTRIBUTES",
    "SNS_RULES",
    "EntryResult",
    "EventBridgeRules",
    "EventBridgeSink",
    "EventsClient",
    "OutboundEvent",
    "PublishTo",
    "Sink",
    "SinkError",
    "SinkRules",
    "SnsClient",
    "SnsRules",
    "SnsSink",
    "TopicArn",
    "parse_publish_to",
    "parse_topic_arn",
    "put_events_entry_size",
    "rules_for",
    "sink_client",
    "sns_entry_size",
]

#: The names :mod:`dynamodb_outbox.sinks._sns` defines, imported at their first use
#: (as the package's do): it costs a cold start about 0.4 ms, which a publisher,
#: sweeper or writer on EventBridge never needs to pay.
_SNS_NAMES: Final = frozenset(
    {
        "POISON_SNS_CODES",
        "SNS_ATTRIBUTE_OVERHEAD_BYTES",
        "SNS_FIFO_RULES",
        "SNS_MAX_ENTRIES",
        "SNS_MAX_REQUEST_BYTES",
        "SNS_MESSAGE_ATTRIBUTES",
        "SNS_RULES",
        "SnsRules",
        "SnsSink",
        "TopicArn",
        "parse_topic_arn",
        "sns_entry_size",
    }
)

if not TYPE_CHECKING:
    # Hidden from type checkers: they see the imports above and nothing else.

    def __getattr__(name: str) -> Any:
        if name not in _SNS_NAMES:
            raise AttributeError(f"module 'dynamodb_outbox.sinks' has no attribute {name!r}")
        from dynamodb_outbox.sinks import _sns

        value = getattr(_sns, name)
        globals()[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | _SNS_NAMES)
