"""Transactional outbox on DynamoDB: writer, stream publisher and consumer toolkit.

The names application code uses are importable from here::

    from dynamodb_outbox import Condition, Envelope, OutboxConsumer, OutboxWriter

They are loaded on first use (PEP 562), so a Lambda handler that imports
``dynamodb_outbox.publisher`` does not also pay for the consumer's Powertools
idempotency imports. The public API is these names and the ``__all__`` of the
modules docs/python.md lists under "The public API" (writer, consumer,
envelope, event_ids, ledger, table_keys); the README's Versioning section
promises them. The other modules are the functions' internals (importable, not
promised); ``local`` (the local runtime), ``testing`` (the test kit) and
``ops`` (``outbox-ops``) are wings with faces of their own.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

__version__ = "0.2.0"

if TYPE_CHECKING:
    from dynamodb_outbox.consumer import OutboxConsumer, parse_body
    from dynamodb_outbox.envelope import Envelope, InvalidEnvelope
    from dynamodb_outbox.event_ids import event_id_for, new_event_id
    from dynamodb_outbox.payload_json import PayloadNotEncodable
    from dynamodb_outbox.routing import Router, UnroutedEvent
    from dynamodb_outbox.settings import ConfigurationError
    from dynamodb_outbox.writer import (
        CancellationReason,
        Condition,
        DuplicateItemInTransaction,
        EventTooLarge,
        IdempotentParameterMismatch,
        InvalidWrite,
        ItemTooLarge,
        LimitExceeded,
        NoEvents,
        OutboxWriteError,
        OutboxWriter,
        TooManyActions,
        TransactionCancelled,
        TransactionInProgress,
        TransactionTooLarge,
        UnpublishableEvent,
        WriteResult,
        condition_check_action,
        delete_action,
        is_retryable,
        put_action,
        update_action,
    )

_EXPORTS: Final = {
    "OutboxConsumer": "consumer",
    "parse_body": "consumer",
    "Envelope": "envelope",
    "InvalidEnvelope": "envelope",
    "event_id_for": "event_ids",
    "new_event_id": "event_ids",
    "PayloadNotEncodable": "payload_json",
    "ConfigurationError": "settings",
    "Router": "routing",
    "UnroutedEvent": "routing",
    "CancellationReason": "writer",
    "Condition": "writer",
    "DuplicateItemInTransaction": "writer",
    "EventTooLarge": "writer",
    "IdempotentParameterMismatch": "writer",
    "InvalidWrite": "writer",
    "ItemTooLarge": "writer",
    "LimitExceeded": "writer",
    "NoEvents": "writer",
    "OutboxWriteError": "writer",
    "OutboxWriter": "writer",
    "TooManyActions": "writer",
    "TransactionCancelled": "writer",
    "TransactionInProgress": "writer",
    "TransactionTooLarge": "writer",
    "UnpublishableEvent": "writer",
    "WriteResult": "writer",
    "condition_check_action": "writer",
    "delete_action": "writer",
    "is_retryable": "writer",
    "put_action": "writer",
    "update_action": "writer",
}

__all__ = [
    "CancellationReason",
    "Condition",
    "ConfigurationError",
    "DuplicateItemInTransaction",
    "Envelope",
    "EventTooLarge",
    "IdempotentParameterMismatch",
    "InvalidEnvelope",
    "InvalidWrite",
    "ItemTooLarge",
    "LimitExceeded",
    "NoEvents",
    "OutboxConsumer",
    "OutboxWriteError",
    "OutboxWriter",
    "PayloadNotEncodable",
    "Router",
    "TooManyActions",
    "TransactionCancelled",
    "TransactionInProgress",
    "TransactionTooLarge",
    "UnpublishableEvent",
    "UnroutedEvent",
    "WriteResult",
    "__version__",
    "condition_check_action",
    "delete_action",
    "event_id_for",
    "is_retryable",
    "new_event_id",
    "parse_body",
    "put_action",
    "update_action",
]


if not TYPE_CHECKING:
    # Hidden from type checkers: they see the imports above and nothing else, so
    # a misspelt or unexported name fails `mypy --strict` as it fails at run time.

    def __getattr__(name: str) -> Any:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'dynamodb_outbox' has no attribute {name!r}")
        value = getattr(importlib.import_module(f"dynamodb_outbox.{module}"), name)
        globals()[name] = value  # later lookups skip __getattr__
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
