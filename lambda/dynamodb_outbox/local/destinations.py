"""The on-failure destination of a stream mapping, and the record sent to it.

When retries or record age run out, Lambda discards the batch and sends a
record *describing* it to the ``OnFailure`` destination. For SQS and SNS that
record holds metadata only (shard, sequence range, arrival times, size) —
never the records themselves — so the outbox item in the table stays the only
copy of the event.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .config import arn_parts
from .events import iso_timestamp

__all__ = ["Condition", "DiscardedBatch", "SqsDestination", "stream_failure_record"]

Condition = Literal["RetryAttemptsExhausted", "RecordAgeExceeded"]


@dataclass(frozen=True)
class DiscardedBatch:
    """The facts about a discarded batch that its failure record reports."""

    shard_id: str
    stream_arn: str
    sequence_numbers: Sequence[str]
    arrival_times: Sequence[float]


def stream_failure_record(
    batch: DiscardedBatch,
    *,
    condition: Condition,
    function_arn: str,
    request_id: str,
    invoke_count: int,
    function_error: str | None,
    now: float,
) -> dict[str, Any]:
    """The JSON body Lambda sends for a discarded stream batch (SQS/SNS destinations).

    ``responseContext.functionError`` is present only when the last invocation
    raised ("Unhandled"); a batch discarded for its age before any invocation
    reports ``approximateInvokeCount`` 0.
    """
    response_context: dict[str, Any] = {"statusCode": 200, "executedVersion": "$LATEST"}
    if function_error is not None:
        response_context["functionError"] = function_error
    return {
        "requestContext": {
            "requestId": request_id,
            "functionArn": function_arn,
            "condition": condition,
            "approximateInvokeCount": invoke_count,
        },
        "responseContext": response_context,
        "version": "1.0",
        "timestamp": iso_timestamp(now),
        "DDBStreamBatchInfo": {
            "shardId": batch.shard_id,
            "startSequenceNumber": batch.sequence_numbers[0],
            "endSequenceNumber": batch.sequence_numbers[-1],
            "approximateArrivalOfFirstRecord": iso_timestamp(batch.arrival_times[0]),
            "approximateArrivalOfLastRecord": iso_timestamp(batch.arrival_times[-1]),
            "batchSize": len(batch.sequence_numbers),
            "streamArn": batch.stream_arn,
        },
    }


class SqsDestination:
    """An SQS queue named by ARN, resolved once to its URL."""

    def __init__(self, queue_arn: str, sqs_client: Any) -> None:
        _, _, account, name = arn_parts(queue_arn)
        self.arn = queue_arn
        self._sqs = sqs_client
        self.url: str = sqs_client.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)[
            "QueueUrl"
        ]

    def send(self, record: dict[str, Any]) -> None:
        self._sqs.send_message(QueueUrl=self.url, MessageBody=json.dumps(record))
