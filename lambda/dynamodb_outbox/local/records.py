"""Lambda events built from an :class:`~dynamodb_outbox.envelope.Envelope`, for unit tests.

A consumer's test should not need a bus, a queue or a stream to hand its
handler one event: these build the records Lambda would pass, in AWS's shapes
(the ``SQSEvent`` and ``DynamoDBStreamEvent`` of the package's wire types)::

    event = sqs_event([sqs_record(eventbridge_body(envelope))])
    assert handler(event, LambdaContext()) == {"batchItemFailures": []}

* :func:`eventbridge_body`, :func:`sns_raw_body`: the message body a consumer
  queue receives from an EventBridge rule (the whole event, the envelope in
  ``detail``) or from SNS with raw delivery (the envelope itself), the two
  ways the module wires consumers.
* :func:`sqs_record` / :func:`sqs_event`: the records of an SQS event source
  mapping; :func:`consumer_event` does both for a list of envelopes.
* :func:`outbox_stream_record` / :func:`stream_event`: the ``INSERT`` record of
  the outbox item the writer commits for an envelope, for the publisher.

To run the handlers through the mappings the module deploys instead
(batching, partial batch responses, retries, DLQs), use
:class:`~dynamodb_outbox.local.LocalRuntime`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Final, Literal

from dynamodb_outbox.consumer import SQSEvent, SQSRecord, SQSRecordAttributes
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.outbox_item import DEFAULT_PENDING_SHARDS, outbox_item
from dynamodb_outbox.sizes import is_fifo
from dynamodb_outbox.stream_types import DynamoDBStreamEvent, DynamoDBStreamRecord
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS, TableKeys

__all__ = [
    "ACCOUNT_ID",
    "REGION",
    "consumer_event",
    "eventbridge_body",
    "outbox_stream_record",
    "sns_raw_body",
    "sqs_event",
    "sqs_record",
    "stream_event",
]

REGION: Final = "us-east-1"
ACCOUNT_ID: Final = "123456789012"
_QUEUE_ARN: Final = f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:consumer"
_STREAM_ARN: Final = (
    f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/outbox/stream/2024-01-01T00:00:00.000"
)


def eventbridge_body(envelope: Envelope, *, detail_type: str | None = None) -> str:
    """The body an SQS target of an EventBridge rule receives: the whole event.

    ``detail`` is the envelope's own JSON (:meth:`Envelope.to_json`), so data
    holding ``Decimal`` keeps its exact digits, as on the bus.
    """
    wrapper = json.dumps(
        {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": envelope.type if detail_type is None else detail_type,
            "source": envelope.source,
            "account": ACCOUNT_ID,
            "time": envelope.time,
            "region": REGION,
            "resources": [],
            "detail": None,
        }
    )
    # "detail" is the last key: put the envelope's JSON where json.dumps wrote null.
    return f"{wrapper.removesuffix('null}')}{envelope.to_json()}}}"


def sns_raw_body(envelope: Envelope) -> str:
    """The body of a queue subscribed to SNS with raw message delivery: the envelope."""
    return envelope.to_json()


def sqs_record(
    body: str,
    *,
    message_id: str | None = None,
    receive_count: int = 1,
    queue_arn: str = _QUEUE_ARN,
    group_id: str | None = None,
) -> SQSRecord:
    """One record of an SQS event; ``message_id`` defaults to a fresh UUID.

    A ``queue_arn`` ending in ``.fifo`` gets the FIFO attributes, with
    ``group_id`` (default ``"group"``) as the ``MessageGroupId``.
    """
    attributes: SQSRecordAttributes = {
        "ApproximateReceiveCount": str(receive_count),
        "SentTimestamp": "1700000000000",
        "SenderId": "AIDAEXAMPLE",
        "ApproximateFirstReceiveTimestamp": "1700000000000",
    }
    if is_fifo(queue_arn):
        attributes["MessageGroupId"] = group_id or "group"
        attributes["MessageDeduplicationId"] = uuid.uuid4().hex
        attributes["SequenceNumber"] = str(uuid.uuid4().int % 10**20)
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": f"handle-{uuid.uuid4().hex}",
        "body": body,
        "attributes": attributes,
        "messageAttributes": {},
        "md5OfBody": "0" * 32,
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": REGION,
    }


def sqs_event(records: Iterable[SQSRecord]) -> SQSEvent:
    """The event an SQS event source mapping passes to the function."""
    return {"Records": list(records)}


def consumer_event(
    envelopes: Iterable[Envelope], *, via: Literal["eventbridge", "sns"] = "eventbridge"
) -> SQSEvent:
    """One SQS event carrying ``envelopes`` as the module's consumer queue receives them."""
    body = eventbridge_body if via == "eventbridge" else sns_raw_body
    return sqs_event(sqs_record(body(envelope)) for envelope in envelopes)


def outbox_stream_record(
    pk: str,
    envelope: Envelope,
    sequence_number: str,
    *,
    pending_shards: int = DEFAULT_PENDING_SHARDS,
    event_source_arn: str = _STREAM_ARN,
    table_keys: TableKeys = DEFAULT_TABLE_KEYS,
) -> DynamoDBStreamRecord:
    """The ``INSERT`` stream record of the outbox item the writer commits for ``envelope``.

    ``pk`` is the entity's partition key; ``sequence_number`` is the record's
    ``itemIdentifier`` in the publisher's partial batch response (numeric
    text; order them as the stream would). ``table_keys`` names the table's
    key attributes, as the publisher's must.
    """
    partition_key, sort_key = table_keys.names
    item = outbox_item(pk, envelope, pending_shards, partition_key=partition_key, sort_key=sort_key)
    return {
        "eventID": uuid.uuid4().hex,
        "eventName": "INSERT",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": {
            "ApproximateCreationDateTime": 1_700_000_000.0,
            "Keys": table_keys.key_of(item),
            "NewImage": item,
            "SequenceNumber": sequence_number,
            "SizeBytes": len(json.dumps(item)),
            "StreamViewType": "NEW_IMAGE",
        },
        "eventSourceARN": event_source_arn,
    }


def stream_event(records: Iterable[DynamoDBStreamRecord]) -> DynamoDBStreamEvent:
    """The event a DynamoDB stream event source mapping passes to the function."""
    return {"Records": list(records)}
