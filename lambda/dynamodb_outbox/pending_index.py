"""The sparse pending index: its keys, how it is read, and what "pending" means.

Only pending outbox items carry the shard attribute (a quarantined item has it
removed), so the index holds exactly the events not yet published. Shared by
the sweeper and ``outbox-ops``; boto3 is not imported here (clients are passed in).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from dynamodb_outbox.envelope import (
    ATTR_PENDING_SHARD,
    ATTR_PK,
    ATTR_SK,
    ATTR_STATUS,
    OUTBOX_SK_PREFIX,
    STATUS_PENDING,
)
from dynamodb_outbox.event_ids import event_id_datetime, lowest_event_id_at
from dynamodb_outbox.stream_types import AttributeMap

__all__ = [
    "BATCH_GET_MAX_KEYS",
    "DEFAULT_PENDING_INDEX",
    "MAX_PENDING_SHARDS",
    "pending_boundary_sk",
    "shard_keys",
    "ulid_time",
]

DEFAULT_PENDING_INDEX: Final = "outbox-pending"

BATCH_GET_MAX_KEYS: Final = 100
QUERY_MAX_PAGE: Final = 1000
DEFAULT_READ_RETRIES: Final = 5
READ_BACKOFF_BASE_SECONDS: Final = 0.05
READ_BACKOFF_MAX_SECONDS: Final = 1.0
MAX_PENDING_SHARDS: Final = 100  # envelope.pending_shard accepts 1..100


# ------------------------------------------------------------------------ ULID keys


def shard_keys(shards: int) -> list[str]:
    """The pending-index partition keys, in the format of ``envelope.pending_shard``."""
    if isinstance(shards, bool) or not 1 <= shards <= MAX_PENDING_SHARDS:
        raise ValueError(f"pending shards must be between 1 and {MAX_PENDING_SHARDS}, got {shards}")
    return [f"{n:02d}" for n in range(shards)]


def pending_boundary_sk(moment: datetime) -> str:
    """The smallest outbox sort key of ``moment``'s millisecond.

    ``SK < boundary`` holds exactly for outbox items whose ULID was made before
    that millisecond: the ULID's first 48 bits are its time in milliseconds, and
    the boundary takes the lowest randomness.
    """
    milliseconds = int(moment.timestamp() * 1000)
    if milliseconds < 0:
        milliseconds = 0
    return OUTBOX_SK_PREFIX + lowest_event_id_at(milliseconds)


def ulid_time(sort_key: str) -> datetime | None:
    """When the outbox item with ``sort_key`` was made, from its ULID; None if not a ULID."""
    if not sort_key.startswith(OUTBOX_SK_PREFIX):
        return None
    try:
        return event_id_datetime(sort_key[len(OUTBOX_SK_PREFIX) :])
    except ValueError:
        return None


def _keys_of(response: Mapping[str, Any]) -> list[AttributeMap]:
    keys: list[AttributeMap] = []
    for item in response.get("Items") or []:
        pk, sk = item.get(ATTR_PK), item.get(ATTR_SK)
        if isinstance(pk, dict) and isinstance(sk, dict):
            keys.append({ATTR_PK: pk, ATTR_SK: sk})
    return keys


def _sk(key: Mapping[str, Any]) -> str:
    value = key.get(ATTR_SK, {}).get("S")
    return value if isinstance(value, str) else ""


def _key_id(key: Mapping[str, Any]) -> str:
    return json.dumps([key.get(ATTR_PK), key.get(ATTR_SK)], sort_keys=True)


def _still_pending(item: Mapping[str, Any]) -> bool:
    """Pending and in the index: a quarantined item is never re-published."""
    status = item.get(ATTR_STATUS, {}).get("S")
    return status == STATUS_PENDING and ATTR_PENDING_SHARD in item
