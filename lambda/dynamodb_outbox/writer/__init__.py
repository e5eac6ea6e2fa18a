"""Write an entity and the events it announces in one DynamoDB transaction.

The outbox only works if the entity and its outbox items commit together: an
event without its change is a lie, a change without its event is lost. So every
write is ONE ``TransactWriteItems``: a Put of the entity, one Put per event
(partition key = the entity's, sort key = ``OUTBOX#<event id>``), and any extra
actions the caller needs in the same unit (:func:`condition_check_action`,
:func:`update_action`, :func:`delete_action`, :func:`put_action`).

The public face is :data:`__all__`; it is what docs/python.md documents and the
README's Versioning section promises. The pieces live in private modules, one
concern each:

- ``_writer``: :class:`OutboxWriter` and :class:`WriteResult`;
- ``_conditions``: the condition language (:class:`Condition`, the extra actions);
- ``_attribute_values``: plain Python to attribute values, and their sizes;
- ``_limits``: DynamoDB's transaction limits, checked before the call;
- ``_errors``: the exception tree and how a failed transaction maps onto it.

This package ships to application code (Lambda layer): it imports only the
standard library, boto3/botocore, python-ulid, the envelope and sink rules and
the trace context finder.
"""

from __future__ import annotations

from dynamodb_outbox._public_names import present_as
from dynamodb_outbox.writer._conditions import (
    Condition,
    TransactItem,
    condition_check_action,
    delete_action,
    put_action,
    update_action,
)
from dynamodb_outbox.writer._errors import (
    CancellationReason,
    DuplicateItemInTransaction,
    EventTooLarge,
    IdempotentParameterMismatch,
    InvalidWrite,
    ItemTooLarge,
    LimitExceeded,
    NoEvents,
    OutboxWriteError,
    TooManyActions,
    TransactionCancelled,
    TransactionInProgress,
    TransactionTooLarge,
    UnpublishableEvent,
    is_retryable,
)
from dynamodb_outbox.writer._writer import OutboxWriter, WriteResult

__all__ = [
    "CancellationReason",
    "Condition",
    "DuplicateItemInTransaction",
    "EventTooLarge",
    "IdempotentParameterMismatch",
    "InvalidWrite",
    "ItemTooLarge",
    "LimitExceeded",
    "NoEvents",
    "OutboxWriteError",
    "OutboxWriter",
    "TooManyActions",
    "TransactItem",
    "TransactionCancelled",
    "TransactionInProgress",
    "TransactionTooLarge",
    "UnpublishableEvent",
    "WriteResult",
    "condition_check_action",
    "delete_action",
    "is_retryable",
    "put_action",
    "update_action",
]

# The public names say where to import them from (as httpx does): tracebacks,
# reprs and pickles name dynamodb_outbox.writer, not the module they live in.
present_as(__name__, *(globals()[name] for name in __all__))
