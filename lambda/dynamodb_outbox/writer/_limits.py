"""DynamoDB's limits on one ``TransactWriteItems``, checked before the call.

DynamoDB refuses a transaction with more than 100 actions, over 4 MB, with an
item over 400 KB or with two actions on the same item, and it does so with a
terse ``ValidationException`` after a network round trip: :func:`check_limits`
raises an :class:`~dynamodb_outbox.writer.InvalidWrite` subclass that names the
rule, the action and the figure instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from dynamodb_outbox.writer._errors import (
    DuplicateItemInTransaction,
    InvalidWrite,
    ItemTooLarge,
    Role,
    TooManyActions,
    TransactionTooLarge,
)

# --------------------------------------------------------------------------- limits

MAX_TRANSACTION_ACTIONS: Final = 100
"""``TransactWriteItems`` accepts at most 100 actions."""

MAX_TRANSACTION_BYTES: Final = 4 * 1024 * 1024
"""Aggregate size of the items of one transaction (AWS: "4 MB")."""

MAX_ITEM_BYTES: Final = 400 * 1024
"""Largest DynamoDB item (AWS: "400 KB"); sizes are estimated from above, see :func:`item_size`."""

MAX_NESTING_LEVELS: Final = 32
"""DynamoDB "supports nested attributes up to 32 levels deep"."""

MAX_CLIENT_REQUEST_TOKEN_LENGTH: Final = 36

MAX_EVENT_ID_LEAD_SECONDS: Final = 300
"""How far in the future a caller's ``event_id`` may be (clock skew). The sweeper
finds pending events by the time in their id (``SK < OUTBOX#<ULID of now - min
age>``): an id far ahead would hide its event from the sweeper until then."""


@dataclass(frozen=True)
class Action:
    """One action of the transaction being built, with what the checks need to know."""

    request: dict[str, Any]
    label: str
    role: Role
    identity: tuple[Any, ...] | None
    size: int


def check_limits(actions: Sequence[Action]) -> None:
    if len(actions) > MAX_TRANSACTION_ACTIONS:
        raise TooManyActions(
            f"the transaction has {len(actions)} actions; TransactWriteItems allows at most "
            f"{MAX_TRANSACTION_ACTIONS}",
            limit=MAX_TRANSACTION_ACTIONS,
            actual=len(actions),
        )
    seen: dict[tuple[Any, ...], int] = {}
    for index, action in enumerate(actions):
        # Only a Put's size is known here; an Update's resulting item is checked by AWS.
        if "Put" in action.request and action.size > MAX_ITEM_BYTES:
            raise ItemTooLarge(
                f"action {index} ({action.label}) is about {action.size} bytes, over "
                f"DynamoDB's item limit of {MAX_ITEM_BYTES} bytes (estimate rounds up)",
                limit=MAX_ITEM_BYTES,
                actual=action.size,
                index=index,
            )
        if action.identity is None:
            continue
        if action.identity in seen:
            first = seen[action.identity]
            raise DuplicateItemInTransaction(
                f"action {index} ({action.label}) and action {first} "
                f"({actions[first].label}) target the same item; TransactWriteItems allows "
                "one action per item (put a check on the entity into its condition instead)",
                first_index=first,
                second_index=index,
            )
        seen[action.identity] = index
    total = sum(action.size for action in actions)
    if total > MAX_TRANSACTION_BYTES:
        raise TransactionTooLarge(
            f"the transaction's items add up to about {total} bytes, over the "
            f"TransactWriteItems limit of {MAX_TRANSACTION_BYTES} bytes",
            limit=MAX_TRANSACTION_BYTES,
            actual=total,
        )


def check_token(token: Any) -> None:
    if not isinstance(token, str) or not 1 <= len(token) <= MAX_CLIENT_REQUEST_TOKEN_LENGTH:
        actual = len(token) if isinstance(token, str) else type(token).__name__
        raise InvalidWrite(
            "client_request_token must be a string of 1 to "
            f"{MAX_CLIENT_REQUEST_TOKEN_LENGTH} characters, got {actual}"
        )


def item_identity(table: str, key: Mapping[str, Any]) -> tuple[Any, ...]:
    """A hashable id of (table, key); numbers are normalised because 1 and 1.0 are one key."""
    parts = []
    for name in sorted(key):
        value = key[name]
        ((kind, data),) = value.items()
        if kind == "N":
            with contextlib.suppress(InvalidOperation):
                data = str(Decimal(data).normalize())
        elif kind == "B":
            data = bytes(data) if not isinstance(data, str) else data.encode()
        parts.append((name, kind, data))
    return (table, tuple(parts))
