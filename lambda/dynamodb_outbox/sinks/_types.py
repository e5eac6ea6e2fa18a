"""What every sink shares: the event sent, the answer per entry, the rules and the sink protocols.

Also the clients sinks send with (:func:`sink_client`, the part of each boto3
client a sink uses), and the few helpers both sinks' rules use to tell why an
event can never be sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Literal,
    NamedTuple,
    NotRequired,
    Protocol,
    TypedDict,
    overload,
)

from dynamodb_outbox.envelope import Envelope

if TYPE_CHECKING:
    # boto3-stubs (dev only, requirements-dev.txt): the clients' real types.
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sns import SNSClient

__all__ = [
    "EntryResult",
    "EventsClient",
    "OutboundEvent",
    "Sink",
    "SinkError",
    "SinkRules",
    "SnsClient",
    "sink_client",
]

# --------------------------------------------------------------------------- clients


# The entry shapes match boto3-stubs' (mypy_boto3_events, mypy_boto3_sns) key for
# key, so that the real clients satisfy these Protocols under mypy. For the type
# checker only: each TypedDict costs a cold start about 0.1 ms to define.
if TYPE_CHECKING:

    class PutEventsRequestEntry(TypedDict, total=False):
        Time: datetime | str
        Source: str
        Resources: Sequence[str]
        DetailType: str
        Detail: str
        EventBusName: str
        TraceHeader: str

    class SnsMessageAttributeValue(TypedDict):
        DataType: str
        StringValue: str

    class PublishBatchRequestEntry(TypedDict):
        Id: str
        Message: str
        Subject: NotRequired[str]
        MessageStructure: NotRequired[str]
        #: of :class:`SnsMessageAttributeValue` (the stubs' value type also has BinaryValue)
        MessageAttributes: NotRequired[Mapping[str, Any]]
        MessageDeduplicationId: NotRequired[str]
        MessageGroupId: NotRequired[str]


class EventsClient(Protocol):
    """The part of the boto3 EventBridge client a sink uses."""

    def put_events(self, *, Entries: list[PutEventsRequestEntry]) -> Mapping[str, Any]: ...


@overload
def sink_client(service: Literal["dynamodb"]) -> DynamoDBClient: ...
@overload
def sink_client(service: Literal["events"]) -> EventBridgeClient: ...
@overload
def sink_client(service: Literal["sns"]) -> SNSClient: ...
def sink_client(service: Literal["dynamodb", "events", "sns"]) -> object:
    """The boto3 client a sink sends with (``events`` or ``sns``): no parameter validation.

    botocore checks every request against the API's model before sending it:
    for ``PutEvents`` and ``PublishBatch`` that is types, required members and
    minimum lengths, about a tenth of the publisher's CPU per event. The sink's
    own rules (:meth:`SinkRules.check`, and the envelope's checks before them)
    already hold every entry to more than that, and a test builds the requests
    of the edge events those rules let through and passes each one through
    botocore's validator (``tests/unit/test_sink_checks_once.py``), so the check
    is made once, not twice. Region and endpoint come from the environment, as
    :func:`dynamodb_outbox.settings.boto3_client`'s do. The handlers' table
    client: :func:`dynamodb_outbox.publishing.table_client`.
    """
    import boto3
    from botocore.config import Config

    return boto3.client(service, config=Config(parameter_validation=False))


class SnsClient(Protocol):
    """The part of the boto3 SNS client a sink uses."""

    def publish_batch(
        self, *, TopicArn: str, PublishBatchRequestEntries: list[PublishBatchRequestEntry]
    ) -> Mapping[str, Any]: ...


# ----------------------------------------------------------------------------- events


class OutboundEvent(NamedTuple):
    """An event ready to send: its envelope, the exact JSON the writer committed, its UTC time."""

    envelope: Envelope
    body: str
    time: datetime

    @classmethod
    def of(cls, envelope: Envelope, body: str | None = None) -> OutboundEvent:
        """The event of ``envelope``, sending ``body`` (default: the envelope's own JSON)."""
        return cls(envelope, envelope.to_json() if body is None else body, envelope.utc_time)


class EntryResult(NamedTuple):
    """What the transport said about one entry of a call."""

    error_code: str | None = None
    error_message: str | None = None
    retryable: bool = False

    @property
    def ok(self) -> bool:
        return self.error_code is None


_ACCEPTED: Final = EntryResult()


class SinkError(Exception):
    """The call failed as a whole: nothing is known about any of its entries."""


# ------------------------------------------------------------------------------ rules


class SinkRules(Protocol):
    """What one transport can carry; needs no client."""

    @property
    def name(self) -> str:
        """The API, as metrics and messages name it: ``PutEvents`` or ``PublishBatch``."""
        ...

    @property
    def max_entries(self) -> int: ...

    @property
    def max_request_bytes(self) -> int:
        """Inclusive upper bound on the sum of :meth:`entry_size` over one call (and one entry)."""
        ...

    def entry_size(self, event: OutboundEvent) -> int:
        """Bytes the transport counts for ``event``; ``UnicodeEncodeError`` if not UTF-8."""
        ...

    @property
    def max_delivery_bytes(self) -> int:
        """Inclusive upper bound on :meth:`delivery_size`: what a consumer queue can take."""
        ...

    def delivery_size(self, event: OutboundEvent) -> int:
        """The longest SQS message (with what a DLQ adds left out) ``event`` can become.

        Past the API the event is wrapped for the queue (EventBridge's event,
        SNS's notification): see :mod:`dynamodb_outbox.sizes`.
        """
        ...

    def refusal(self, event: OutboundEvent) -> str | None:
        """Why the transport would never accept ``event`` besides its size, or None."""
        ...

    def check(self, event: OutboundEvent) -> tuple[int, str | None]:
        """:meth:`entry_size`, and why ``event`` can never be sent (None if it can), at once.

        The publisher's one pass over an event: over :attr:`max_request_bytes`,
        over :attr:`max_delivery_bytes` or a :meth:`refusal`, told in that
        order, each as the reason its item is quarantined. What depends only on
        the event's source and type is worked out once per pair.
        ``UnicodeEncodeError`` as :meth:`entry_size`.
        """
        ...

    @property
    def orders_by_subject(self) -> bool:
        """Whether the transport keeps the events of one subject in order (SNS FIFO).

        The publisher then never lets a later event of a subject overtake an
        earlier one that failed (see :mod:`dynamodb_outbox.publishing`).
        """
        ...


def _utf8_length(text: str) -> int:
    # An ASCII string's length is its UTF-8 size; isascii() reads a flag, not the text.
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _verdict(
    rules: SinkRules, size: int, delivered: int, refusal: Callable[[], str | None]
) -> str | None:
    """Why an event of ``size`` entry bytes, ``delivered`` bytes at most, can never be sent."""
    if size > rules.max_request_bytes:
        return f"event too large for {rules.name}: {size} bytes, limit {rules.max_request_bytes}"
    if delivered > rules.max_delivery_bytes:
        # Sent, it would be lost between the bus or topic and the queue.
        return (
            f"event too large for the consumer queues after {rules.name}: up to {delivered} "
            f"bytes delivered, limit {rules.max_delivery_bytes}"
        )
    why = refusal()
    return None if why is None else f"{rules.name} cannot take it: {why}"


# ------------------------------------------------------------------------------ sinks


class Sink(Protocol):
    """Where events go. One :meth:`send` is one API call, in the order given."""

    @property
    def rules(self) -> SinkRules: ...

    def send(self, events: Sequence[OutboundEvent]) -> list[EntryResult]:
        """One result per event, aligned with ``events``.

        Raises :class:`SinkError` or a botocore error when the call itself
        failed; any other exception means the request could not be built from
        these events (nothing was sent).
        """
        ...
