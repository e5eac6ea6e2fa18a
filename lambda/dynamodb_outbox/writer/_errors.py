"""The writer's errors, and how a failed ``TransactWriteItems`` becomes one of them.

::

    OutboxWriteError                   anything the writer raises itself
    ├── InvalidWrite (ValueError)      refused before calling AWS: nothing sent
    │   ├── NoEvents
    │   ├── DuplicateItemInTransaction
    │   ├── UnpublishableEvent
    │   └── LimitExceeded              .limit, .actual, .index
    │       ├── TooManyActions
    │       ├── TransactionTooLarge
    │       ├── ItemTooLarge
    │       └── EventTooLarge
    ├── TransactionCancelled           .reasons: one CancellationReason per action
    ├── IdempotentParameterMismatch
    └── TransactionInProgress

Other AWS errors (throttling, missing table, access denied...) propagate as
botocore ``ClientError``. The exceptions and :func:`is_retryable` are
re-exported by :mod:`dynamodb_outbox.writer` (and the package); the rest is the
writer's own plumbing.
"""

from __future__ import annotations

import copyreg
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from boto3.dynamodb.types import Binary, TypeDeserializer
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotocoreConnectionError

__all__ = [
    "CancellationReason",
    "DescribedAction",
    "DuplicateItemInTransaction",
    "EventTooLarge",
    "IdempotentParameterMismatch",
    "InvalidWrite",
    "ItemTooLarge",
    "LimitExceeded",
    "NoEvents",
    "OutboxWriteError",
    "Role",
    "TooManyActions",
    "TransactionCancelled",
    "TransactionInProgress",
    "TransactionTooLarge",
    "UnpublishableEvent",
    "is_retryable",
    "translate_client_error",
]

_RETRYABLE_CODES: Final = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
)
"""Cancellation reasons that a later attempt may not meet (AWS's list in
``TransactionCanceledException``); ``ConditionalCheckFailed``,
``ItemCollectionSizeLimitExceeded`` and ``ValidationError`` would fail again."""

_RETRYABLE_REQUEST_ERRORS: Final = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
    }
)
"""Error codes of a whole ``TransactWriteItems`` request that AWS says to retry
with backoff (throttling, server errors); botocore's own retries have already
been spent when one reaches the caller (DynamoDB Developer Guide, "Error
handling with DynamoDB": "OK to retry? Yes")."""

Role = Literal["entity", "event", "extra"]
"""Which part of a write an action is: the entity Put, an outbox Put, or a caller's action."""


class DescribedAction(Protocol):
    """What error messages need of an action of the transaction."""

    @property
    def label(self) -> str: ...

    @property
    def role(self) -> Role: ...


class OutboxWriteError(Exception):
    """Base of the writer's own errors, so callers can catch the writer as a whole.

    AWS errors the writer cannot explain better (throttling, missing table,
    access denied...) propagate unchanged as botocore ``ClientError``.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle (multiprocessing, caches, test runners) rebuilds an exception
        # from its args alone, which the subclasses' extra figures (limit,
        # reasons, index...) are not in: rebuild without __init__, then restore them.
        newobj = copyreg.__newobj__  # type: ignore[attr-defined]  # (not in typeshed)
        return (newobj, (type(self), *self.args), self.__dict__)


class InvalidWrite(OutboxWriteError, ValueError):
    """The write was refused before calling AWS; nothing was sent, nothing was written."""


class NoEvents(InvalidWrite):
    """An outbox write without an event: usually a bug that silently drops the event."""


class DuplicateItemInTransaction(InvalidWrite):
    """Two actions target the same item, which ``TransactWriteItems`` rejects as a whole."""

    def __init__(self, message: str, first_index: int, second_index: int) -> None:
        super().__init__(message)
        self.first_index = first_index
        self.second_index = second_index


class LimitExceeded(InvalidWrite):
    """A DynamoDB or bus limit would be exceeded; ``limit`` and ``actual`` are the figures."""

    def __init__(self, message: str, *, limit: int, actual: int, index: int | None = None) -> None:
        super().__init__(message)
        self.limit = limit
        self.actual = actual
        self.index = index


class TooManyActions(LimitExceeded):
    """More than :data:`MAX_TRANSACTION_ACTIONS` actions in one transaction."""


class TransactionTooLarge(LimitExceeded):
    """The items of the transaction add up to more than :data:`MAX_TRANSACTION_BYTES`."""


class ItemTooLarge(LimitExceeded):
    """One item is over :data:`MAX_ITEM_BYTES`; ``index`` is its action."""


class EventTooLarge(LimitExceeded):
    """Over its sink's size limit, the event could never be published; ``index`` is its action."""


class UnpublishableEvent(InvalidWrite):
    """The table's sink would never accept the event (a field it refuses); ``index``: its action."""

    def __init__(self, message: str, *, index: int) -> None:
        super().__init__(message)
        self.index = index


@dataclass(frozen=True)
class CancellationReason:
    """Why DynamoDB cancelled one action of a transaction.

    ``code`` is ``None`` for an action that did not cause the cancellation (AWS
    reports the string ``"None"`` for them). ``role`` says which part of the
    write the action was: ``"entity"``, ``"event"`` or ``"extra"``.

    ``item`` is the item as it was when the action's condition failed, when the
    condition asked for it (``Condition(..., return_old_item=True)``), in plain
    Python as boto3's ``Table`` resource reads it: numbers as ``Decimal``
    (exact; a payload takes them as they are), binary as ``bytes``, sets as
    ``set``.
    """

    index: int
    label: str
    role: Role
    code: str | None
    message: str | None = None
    item: Mapping[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return self.code is not None

    def describe(self) -> str:
        text = f"action {self.index} ({self.label}): {self.code}"
        return f"{text} — {self.message}" if self.message else text


class TransactionCancelled(OutboxWriteError):
    """DynamoDB cancelled the transaction; nothing of it was written.

    ``reasons`` has one entry per action, in request order, so a caller can tell
    "the entity already exists" (``ConditionalCheckFailed`` on the entity) from
    "another writer touched the same item" (``TransactionConflict``, worth a
    retry) without parsing the message.
    """

    def __init__(self, message: str, reasons: Sequence[CancellationReason]) -> None:
        super().__init__(message)
        self.reasons: list[CancellationReason] = list(reasons)

    @property
    def failures(self) -> list[CancellationReason]:
        """The actions that caused the cancellation."""
        return [reason for reason in self.reasons if reason.failed]

    @property
    def conditional_check_failed(self) -> bool:
        """True when a condition (the entity's or an extra action's) was not met."""
        return any(reason.code == "ConditionalCheckFailed" for reason in self.reasons)

    @property
    def retryable(self) -> bool:
        """True when every failure is transient (conflict or throttling): retrying may succeed."""
        failures = self.failures
        return bool(failures) and all(reason.code in _RETRYABLE_CODES for reason in failures)


class IdempotentParameterMismatch(OutboxWriteError):
    """A ``client_request_token`` was reused within 10 minutes for a different request."""


class TransactionInProgress(OutboxWriteError):
    """A request with the same ``client_request_token`` is still being processed."""


# -------------------------------------------------------------- error translation

_CODES_IN_MESSAGE: Final = re.compile(r"\[([^\[\]]*)\]\s*$")


def translate_client_error(error: ClientError, actions: Sequence[DescribedAction]) -> Exception:
    """The writer's own error for ``error``, or ``error`` itself when there is nothing to add."""
    code = error.response.get("Error", {}).get("Code", "")
    aws_message = error.response.get("Error", {}).get("Message", "") or str(error)
    if code == "TransactionCanceledException":
        return _cancelled(error, actions, aws_message)
    if code == "IdempotentParameterMismatchException":
        return IdempotentParameterMismatch(
            "the client_request_token was already used in the last 10 minutes for a request "
            "with different parameters; reuse a token only to retry the very same write "
            f"(same envelopes), or use a new token ({aws_message})"
        )
    if code == "TransactionInProgressException":
        return TransactionInProgress(
            "a request with the same client_request_token is still in progress; retry later "
            f"with the same token and parameters ({aws_message})"
        )
    return error


def _cancelled(
    error: ClientError, actions: Sequence[DescribedAction], aws_message: str
) -> TransactionCancelled:
    raw: list[Mapping[str, Any]] = list(error.response.get("CancellationReasons") or [])
    if not raw:
        # Some emulators and older SDKs give the codes only in the message:
        # "... [ConditionalCheckFailed, None]".
        match = _CODES_IN_MESSAGE.search(aws_message)
        if match:
            raw = [{"Code": c.strip()} for c in match.group(1).split(",") if c.strip()]
    if len(raw) != len(actions):
        return TransactionCancelled(
            f"transaction cancelled; AWS returned {len(raw)} cancellation reason(s) for "
            f"{len(actions)} action(s), so they cannot be matched to actions: {aws_message}",
            [],
        )
    reasons = [
        CancellationReason(
            index=index,
            label=action.label,
            role=action.role,
            code=None if reason.get("Code") in (None, "None") else str(reason["Code"]),
            message=reason.get("Message"),
            item=_plain_item(reason.get("Item")),
        )
        for index, (action, reason) in enumerate(zip(actions, raw, strict=True))
    ]
    failures = [reason.describe() for reason in reasons if reason.failed]
    detail = "; ".join(failures) if failures else f"no action named as the cause: {aws_message}"
    return TransactionCancelled(f"transaction cancelled: {detail}", reasons)


_DESERIALIZER: Final = TypeDeserializer()


def _plain_item(item: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if item is None:
        return None
    return {name: _plain(_DESERIALIZER.deserialize(value)) for name, value in item.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Binary):
        return bytes(value.value)  # type: ignore[attr-defined]  # boto3-stubs omit Binary.value
    if isinstance(value, dict):
        return {key: _plain(element) for key, element in value.items()}
    if isinstance(value, list):
        return [_plain(element) for element in value]
    if isinstance(value, set):
        return {_plain(element) for element in value}
    return value


# ------------------------------------------------------------------ retry decision


def is_retryable(exc: BaseException) -> bool:
    """Whether the same write, sent again later, may succeed: the one test a caller needs.

    True for a transaction cancelled only by conflicts or throttling
    (:attr:`TransactionCancelled.retryable`), a request with the same token
    still in progress (:class:`TransactionInProgress`), a request throttled or
    failed by the server as a whole (``ProvisionedThroughputExceededException``,
    ``ThrottlingException``, ``RequestLimitExceeded``, ``InternalServerError``,
    ``ServiceUnavailable``, any HTTP 5xx) and a connection that failed or timed
    out. False for everything else: a condition not met, a write refused before
    calling AWS, a token reused for another request, access denied, a missing
    table, and exceptions that are not the writer's or AWS's.

    Retry with backoff, the same envelopes and the same ``client_request_token``:
    after a timeout the first attempt may have committed, and only the same
    request is recognised (within 10 minutes by the token, later by the outbox
    item's ``attribute_not_exists`` condition).
    """
    if isinstance(exc, TransactionCancelled):
        return exc.retryable
    if isinstance(exc, TransactionInProgress):
        return True
    if isinstance(exc, OutboxWriteError):
        return False
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return code in _RETRYABLE_REQUEST_ERRORS or (
            isinstance(status, int) and 500 <= status <= 599
        )
    return isinstance(exc, BotocoreConnectionError | HTTPClientError)
