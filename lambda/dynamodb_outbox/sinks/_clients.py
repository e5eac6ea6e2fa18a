"""The clients sinks send with: the boto3 factory, and the part of each client a sink uses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    NotRequired,
    Protocol,
    TypedDict,
    overload,
)

if TYPE_CHECKING:
    # boto3-stubs (dev only, requirements-dev.txt): the clients' real types.
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sns import SNSClient

__all__ = ["EventsClient", "SnsClient", "sink_client"]


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
