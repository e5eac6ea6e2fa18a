"""Consumer toolkit: one function per event, a correct partial batch response per batch.

A consumer of the outbox reads an SQS queue fed by EventBridge or SNS. Delivery
is at least once end to end (stream retries, sweeper re-publishes, target
retries, SQS redelivery), so the same event can arrive more than once, in the
same batch or days later. This module turns "a function that handles ONE
event" into a Lambda handler that:

* handles every record on its own and answers with
  ``{"batchItemFailures": [{"itemIdentifier": <messageId>}]}`` (the mapping
  must set ``FunctionResponseTypes = ["ReportBatchItemFailures"]``), so one bad
  message returns to the queue, and after ``maxReceiveCount`` to the DLQ,
  while the rest of the batch is deleted;
* never answers with an empty or null identifier: Lambda reads that as "the
  whole batch failed" (docs/aws-semantics.md, "Partial batch responses"). A record that
  cannot be named is reported by raising instead, on purpose and loudly;
* on FIFO queues stops a message group at its first failure and returns that
  message plus every later message of its group, because processing past it
  would break the group's order, while the other groups of the batch carry on
  (Powertools' ``SqsFifoPartialProcessor(skip_group_on_error=True)``); a FIFO
  message without a group id stops the whole batch, the safe reading;
* runs the function at most once per event id and consumer, through Powertools
  idempotency on DynamoDB: a redelivered event is skipped (success), a failed
  attempt leaves no record (Powertools deletes it) so the retry runs, and an
  event another invocation is still processing fails here so it comes back
  later instead of running twice concurrently;
* treats an event replayed from the bus's archive like any redelivery (skipped
  when done), except when the replay's name asks this consumer to reprocess
  it: then once more per such replay (:mod:`dynamodb_outbox.replays`);
* refuses, without processing it, a message its bus or topic cannot have
  delivered (:mod:`dynamodb_outbox.sender_checks`): a replay name counts only
  on an EventBridge event from the bus the module configured.

"Once" has one gap no consumer-side library can close: if the function
succeeds but saving the COMPLETED record then fails, the message comes back and
runs again after the in-progress window. Effects that must never repeat need
their own conditional write; the reference consumer's ledger
(:mod:`dynamodb_outbox.ledger`) counts runs so that such a repeat shows.

Usage::

    from dynamodb_outbox.consumer import OutboxConsumer
    from dynamodb_outbox.envelope import Envelope

    consumer = OutboxConsumer(idempotency_table=os.environ["OUTBOX_IDEMPOTENCY_TABLE"])

    @consumer.handler
    def handler(event: Envelope) -> None:
        ...  # raise to fail this message only

An ``async def`` function works the same way: each event is awaited to the end,
under the same idempotency and partial batch rules, on one event loop kept for
the life of the process (:mod:`dynamodb_outbox.consumer._loop`), several
events at once (:mod:`dynamodb_outbox.consumer._batch`). A plain function that
*returns* an awaitable fails its message instead: nothing awaited it, so
nothing may be recorded as done. Whatever the function raises fails its
message only, ``KeyboardInterrupt`` excepted (:mod:`dynamodb_outbox.consumer._errors`);
no record is started that is not expected to end before the timeout
(:mod:`dynamodb_outbox.consumer._deadline`).

The handler's Lambda needs, on the idempotency table: ``dynamodb:PutItem``,
``dynamodb:GetItem``, ``dynamodb:UpdateItem``, ``dynamodb:DeleteItem``; on the
queue (for the event source mapping): ``sqs:ReceiveMessage``,
``sqs:DeleteMessage``, ``sqs:GetQueueAttributes``.

The public face is :data:`__all__` (what docs/python.md documents and the
README's Versioning section promises). The pieces live in private modules:
``_consumer`` (the facade), ``_messages`` (the SQS wire shapes and
:func:`parse_body`), ``_processing`` (one batch), ``_idempotency`` (the adapter
over Powertools idempotency), ``_batch``, ``_deadline``, ``_loop``,
``_handover`` (an async record's coroutine between its worker and the loop),
``_errors`` and ``_logging``.
"""

from __future__ import annotations

from dynamodb_outbox._public_names import present_as
from dynamodb_outbox.consumer._consumer import OutboxConsumer
from dynamodb_outbox.consumer._deadline import RecordDurations
from dynamodb_outbox.consumer._messages import (
    LambdaHandler,
    MalformedBatch,
    SQSEvent,
    SQSRecord,
    SQSRecordAttributes,
    parse_body,
)
from dynamodb_outbox.consumer._processing import process_sqs_batch
from dynamodb_outbox.sender_checks import ExpectedSender
from dynamodb_outbox.stream_types import BatchItemFailure, PartialBatchResponse

__all__ = [
    "BatchItemFailure",
    "ExpectedSender",
    "LambdaHandler",
    "MalformedBatch",
    "OutboxConsumer",
    "PartialBatchResponse",
    "RecordDurations",
    "SQSEvent",
    "SQSRecord",
    "SQSRecordAttributes",
    "parse_body",
    "process_sqs_batch",
]

# The public names say where to import them from (as httpx does): tracebacks,
# reprs and pickles name dynamodb_outbox.consumer, not the module they live in.
present_as(__name__, *(globals()[name] for name in __all__))
