"""What a publication takes and gives back.

It takes :class:`PublishDependencies` (the sink, the table client, the retry
policy) and logs to the publisher's logger; it gives back a :class:`PublishResult`.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Generic,
    Literal,
    NamedTuple,
    Protocol,
    TypeVar,
)

from aws_lambda_powertools import Logger

from dynamodb_outbox._clock import utc_now
from dynamodb_outbox.sinks import Sink
from dynamodb_outbox.stream_types import AttributeMap, PartialBatchResponse
from dynamodb_outbox.table_keys import TableKeys

if TYPE_CHECKING:
    # boto3-stubs (dev only, requirements-dev.txt): the client's real type.
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "DEFAULT_DELETE_RETRIES",
    "DEFAULT_RETRY",
    "DEFAULT_SERVICE_NAME",
    "PublishDependencies",
    "PublishResult",
    "PublisherDynamoDBClient",
    "RetryPolicy",
    "logger",
    "table_client",
]

DEFAULT_SERVICE_NAME: Final = "dynamodb-outbox-publisher"


class RetryPolicy(NamedTuple):
    """How entries that failed retryably are retried within one invocation.

    Each retry waits with exponential backoff and full jitter (a uniform draw
    up to ``base_seconds * 2**(attempt - 1)``, at most ``cap_seconds``). With a
    time budget (``time_left``) entries are retried for as long as it lasts,
    keeping ``margin_seconds`` (at most a fifth of the budget found at the
    start) for the deletes; without one, each entry gets ``max_attempts``.
    """

    base_seconds: float = 0.05
    cap_seconds: float = 2.0
    max_attempts: int = 5
    margin_seconds: float = 5.0
    jitter: Callable[[], float] = random.random

    def delay(self, attempt: int) -> float:
        ceiling = min(self.cap_seconds, self.base_seconds * 2.0 ** (attempt - 1))
        return float(self.jitter()) * ceiling


DEFAULT_RETRY: Final = RetryPolicy()

DEFAULT_DELETE_RETRIES: Final = 5

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", DEFAULT_SERVICE_NAME))


# --------------------------------------------------------------------------- clients


def table_client() -> DynamoDBClient:
    """The DynamoDB client the publisher and the sweeper use: no parameter validation.

    botocore checks each request against the API's model before sending it;
    for a ``BatchWriteItem`` of 25 deletes that is about 6.6 us per key, as much
    as the publisher's own checks of an event. Every request the handlers send
    to the table is built here from fixed expressions and from keys and items
    DynamoDB itself returned (a stream record's keys, an index page, a read
    back), and the functional tests send each kind through validating clients.
    A request that were malformed anyway fails differently: DynamoDB refuses
    it (``ValidationException``), or botocore's serializer raises what it
    happens to (a ``KeyError`` for a key member no attribute type has, a
    ``TypeError``), instead of botocore's ``ParamValidationError``. Every path
    treats them alike: a delete request is split and only its key at fault is
    left over for the sweeper; a quarantine marker that cannot be written
    leaves the item pending for an operator; a failed read fails the run. Region and endpoint come
    from the environment. The sinks' clients: :func:`~dynamodb_outbox.sinks.sink_client`.
    """
    import boto3
    from botocore.config import Config

    return boto3.client("dynamodb", config=Config(parameter_validation=False))


class PublisherDynamoDBClient(Protocol):
    """The part of the boto3 DynamoDB client the publisher uses."""

    def update_item(
        self,
        *,
        TableName: str,
        Key: AttributeMap,
        UpdateExpression: str,
        ConditionExpression: str,
        ExpressionAttributeNames: dict[str, str],
        ExpressionAttributeValues: AttributeMap,
    ) -> Mapping[str, Any]: ...

    def batch_write_item(self, *, RequestItems: Mapping[str, Any]) -> Mapping[str, Any]: ...

    # On the ordered path, a partition's pending sequences (subject_sequences.py).
    def query(
        self,
        *,
        TableName: str,
        KeyConditionExpression: str,
        ExpressionAttributeNames: Mapping[str, str],
        ExpressionAttributeValues: Mapping[str, Any],
        IndexName: str = ...,
        ScanIndexForward: bool = ...,
        Limit: int = ...,
        ExclusiveStartKey: Mapping[str, Any] = ...,
        ProjectionExpression: str = ...,
        Select: Literal["SPECIFIC_ATTRIBUTES"] = ...,
        ConsistentRead: bool = ...,
    ) -> Mapping[str, Any]: ...

    # On the ordered path, the lower pending events sent before a later one.
    def batch_get_item(self, *, RequestItems: dict[str, Any]) -> Mapping[str, Any]: ...


ClientT = TypeVar("ClientT", bound=PublisherDynamoDBClient, covariant=True)


class PublishDependencies(NamedTuple, Generic[ClientT]):
    """What publishing needs, made once and passed as one value.

    The sink and the table its items are deleted from (through
    ``dynamodb_client``) and the names of that table's key attributes (no
    default: the module configures them, and ``PK``/``SK`` read on a table
    keyed otherwise would find no outbox item), then what tests replace:
    ``sleep`` and ``clock`` (the quarantine timestamp), how often a delete is
    retried, and the retry policy for entries that failed retryably.
    ``ClientT`` is the client's type: the sweeper's reads the pending index too.
    """

    sink: Sink
    table_name: str
    dynamodb_client: ClientT
    table_keys: TableKeys
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], datetime] = utc_now
    delete_retries: int = DEFAULT_DELETE_RETRIES
    retry: RetryPolicy = DEFAULT_RETRY


# ---------------------------------------------------------------------------- result


@dataclass
class PublishResult:
    """What one batch did; :meth:`response` is what Lambda gets back."""

    records: int = 0
    published: int = 0
    quarantined: int = 0
    #: poison records whose item was already gone (published and deleted elsewhere).
    quarantine_item_gone: int = 0
    #: poison records whose item DynamoDB refused to mark (left pending, logged as errors).
    quarantine_unmarkable: int = 0
    #: not outbox inserts (the mapping filter should have dropped them).
    skipped: int = 0
    #: ordered sinks: sequenced events left pending for the sweeper because a lower
    #: sequence of their subject is still pending and could not be sent first.
    deferred: int = 0
    #: ordered sinks: lower pending sequences read from the table and sent first.
    sent_first: int = 0
    #: ordered sinks: partition Queries (or reads of lower sequences) that failed.
    sequence_read_failures: int = 0
    #: records without a readable key: nothing to publish or quarantine, logged.
    unreadable: int = 0
    #: entries (or quarantine writes) that failed retryably; a failed call counts
    #: every entry it carried.
    retryable_failures: int = 0
    deleted: int = 0
    delete_leftovers: int = 0
    send_calls: int = 0
    #: calls after which some entries had to be retried.
    retried_calls: int = 0
    quarantine_calls: int = 0
    delete_calls: int = 0
    #: index in the batch of the record Lambda retries from, if any.
    failure_position: int | None = None
    #: the failed candidate's checkpoint (a stream record's sequence number).
    failure_checkpoint: str | None = None
    failure_sequence_number: str | None = None
    #: ``should_continue`` said stop: candidates from ``stopped_at_position`` on
    #: were not attempted (they stay pending).
    stopped_at_position: int | None = None

    def response(self) -> PartialBatchResponse:
        if self.failure_sequence_number is None:
            return {"batchItemFailures": []}
        return {"batchItemFailures": [{"itemIdentifier": self.failure_sequence_number}]}
