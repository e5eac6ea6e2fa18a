"""The sparse pending index: its keys, how it is read, and what "pending" means.

Only pending outbox items carry the shard attribute (a quarantined item has it
removed), so the index holds exactly the events not yet published, spread over
``pending_shards`` partitions. It is KEYS_ONLY: the items are read back by key,
consistently, before anything is done with them. Shared by the sweeper and
``outbox-ops``; boto3 is not imported here (clients are passed in).
"""

from __future__ import annotations

import heapq
import json
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, Literal, Protocol

from dynamodb_outbox.event_ids import event_id_at, event_id_datetime
from dynamodb_outbox.outbox_item import (
    ATTR_PENDING_SHARD,
    ATTR_STATUS,
    MAX_PENDING_SHARDS,
    OUTBOX_SK_PREFIX,
    STATUS_PENDING,
    shard_count,
)
from dynamodb_outbox.stream_types import AttributeMap, string_attribute
from dynamodb_outbox.table_keys import TableKeys

__all__ = [
    "BATCH_GET_MAX_KEYS",
    "DEFAULT_PENDING_INDEX",
    "DEFAULT_READ_RETRIES",
    "MAX_PENDING_SHARDS",
    "QUERY_MAX_PAGE",
    "IndexReader",
    "OldestFirst",
    "ReadBack",
    "ShardCursor",
    "is_pending",
    "key_id",
    "keys_of",
    "pending_boundary_sk",
    "read_back",
    "shard_keys",
    "sort_key",
    "ulid_time",
]

DEFAULT_PENDING_INDEX: Final = "outbox-pending"

BATCH_GET_MAX_KEYS: Final = 100
QUERY_MAX_PAGE: Final = 1000
DEFAULT_READ_RETRIES: Final = 5
READ_BACKOFF_BASE_SECONDS: Final = 0.05
READ_BACKOFF_MAX_SECONDS: Final = 1.0

#: One ``Query`` on the index: the request's key condition, names, values and
#: paging; the caller adds the table and index names.
Query = Callable[[dict[str, Any]], Mapping[str, Any]]


class IndexReader(Protocol):
    """The part of the boto3 DynamoDB client that reads the index and its items back."""

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

    def batch_get_item(self, *, RequestItems: dict[str, Any]) -> Mapping[str, Any]: ...


# ------------------------------------------------------------------------ ULID keys


def shard_keys(shards: int) -> list[str]:
    """The pending-index partition keys, in the format of ``outbox_item.pending_shard``."""
    return [f"{n:02d}" for n in range(shard_count(shards))]


def pending_boundary_sk(moment: datetime, *, upper: bool = False) -> str:
    """The smallest (or with ``upper`` the largest) outbox sort key of ``moment``'s millisecond.

    ``SK < boundary`` holds exactly for outbox items whose ULID was made before
    that millisecond: the ULID's first 48 bits are its time in milliseconds, and
    the boundary takes the lowest randomness (the highest with ``upper``, so
    that ``SK <= boundary`` takes in the whole millisecond).
    """
    milliseconds = max(0, int(moment.timestamp() * 1000))
    randomness = b"\xff" * 10 if upper else bytes(10)
    return OUTBOX_SK_PREFIX + event_id_at(milliseconds, randomness)


def ulid_time(sort_key: str) -> datetime | None:
    """When the outbox item with ``sort_key`` was made, from its ULID; None if not a ULID."""
    if not sort_key.startswith(OUTBOX_SK_PREFIX):
        return None
    try:
        return event_id_datetime(sort_key[len(OUTBOX_SK_PREFIX) :])
    except ValueError:
        return None


def keys_of(response: Mapping[str, Any], table_keys: TableKeys) -> list[AttributeMap]:
    """The table keys of a ``Query`` page's items (an index page holds the table's keys too)."""
    partition, sort = table_keys.names
    keys: list[AttributeMap] = []
    for item in response.get("Items") or []:
        pk, sk = item.get(partition), item.get(sort)
        if isinstance(pk, dict) and isinstance(sk, dict):
            keys.append({partition: pk, sort: sk})
    return keys


def sort_key(key: Mapping[str, Any], table_keys: TableKeys) -> str:
    return table_keys.sort_value(key)


def key_id(key: Mapping[str, Any], table_keys: TableKeys) -> str:
    """A key or an item's key as text, to match items read back to their keys."""
    return json.dumps([key.get(name) for name in table_keys.names], sort_keys=True)


def is_pending(item: Mapping[str, Any]) -> bool:
    """Pending and in the index: a quarantined item is never re-published."""
    return string_attribute(item, ATTR_STATUS) == STATUS_PENDING and ATTR_PENDING_SHARD in item


# ---------------------------------------------------------------------- the keys


class ShardCursor:
    """Ascending keys of one pending-index partition, page by page, read only when needed.

    ``sort_key_condition`` (on ``#sk``, with its ``values``) narrows the range;
    ``page_limit`` caps each page; ``table_keys`` names the table's keys (the
    index's sort key is the table's).
    """

    def __init__(
        self,
        query: Query,
        shard: str,
        *,
        sort_key_condition: str | None = None,
        values: Mapping[str, Any] | None = None,
        page_limit: int | None = None,
        table_keys: TableKeys,
    ) -> None:
        self.query = query
        self.shard = shard
        self.table_keys = table_keys
        names = {"#shard": ATTR_PENDING_SHARD}
        condition = "#shard = :shard"
        if sort_key_condition is not None:
            names["#sk"] = table_keys.sort
            condition += f" AND {sort_key_condition}"
        self.request: dict[str, Any] = {
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {":shard": {"S": shard}, **(values or {})},
        }
        if page_limit is not None:
            self.request["Limit"] = page_limit
        self.keys: list[AttributeMap] = []
        self.index = 0
        self.start_key: AttributeMap | None = None
        self.exhausted = False

    def peek(self) -> AttributeMap | None:
        while self.index >= len(self.keys) and not self.exhausted:
            self._fetch()
        return self.keys[self.index] if self.index < len(self.keys) else None

    def has_more(self) -> bool:
        """Keys may be left (without reading a page to find out)."""
        return self.index < len(self.keys) or not self.exhausted

    def pop(self) -> AttributeMap:
        key = self.keys[self.index]
        self.index += 1
        return key

    def _fetch(self) -> None:
        request = dict(self.request)
        if self.start_key is not None:
            request["ExclusiveStartKey"] = self.start_key
        response = self.query(request)
        self.keys, self.index = keys_of(response, self.table_keys), 0
        last = response.get("LastEvaluatedKey")
        self.start_key = last if isinstance(last, dict) and last else None
        self.exhausted = self.start_key is None


class OldestFirst:
    """The keys of several shard cursors, lowest sort key (oldest) first.

    A cursor's next page is read only when its next key is asked for, so a
    caller that stops early reads no page it does not use.
    """

    def __init__(self, cursors: Sequence[ShardCursor]) -> None:
        self._cursors = list(cursors)
        self._heads: list[tuple[str, int]] = []
        for position, cursor in enumerate(self._cursors):
            head = cursor.peek()
            if head is not None:
                self._heads.append((sort_key(head, cursor.table_keys), position))
        heapq.heapify(self._heads)
        self._popped_from: int | None = None

    def peek(self) -> AttributeMap | None:
        self._refill()
        return self._cursors[self._heads[0][1]].peek() if self._heads else None

    def pop(self) -> AttributeMap:
        """The next key; IndexError when none is left (:meth:`peek` says None)."""
        self._refill()
        _, position = heapq.heappop(self._heads)
        self._popped_from = position
        return self._cursors[position].pop()

    def has_more(self) -> bool:
        """Keys may be left (without reading a page to find out)."""
        if self._heads:
            return True
        return self._popped_from is not None and self._cursors[self._popped_from].has_more()

    def _refill(self) -> None:
        if self._popped_from is None:
            return
        position, self._popped_from = self._popped_from, None
        cursor = self._cursors[position]
        head = cursor.peek()
        if head is not None:
            heapq.heappush(self._heads, (sort_key(head, cursor.table_keys), position))


# ----------------------------------------------------------------- reading back


class ReadBack:
    """What one :func:`read_back` found: the items by :func:`key_id`, and the keys left unread.

    A plain class: a dataclass costs a cold start of the sweeper about 0.5 ms to define.
    """

    __slots__ = ("calls", "items", "unread")

    def __init__(
        self,
        items: dict[str, AttributeMap] | None = None,
        unread: list[AttributeMap] | None = None,
        calls: int = 0,
    ) -> None:
        self.items: dict[str, AttributeMap] = {} if items is None else items
        self.unread: list[AttributeMap] = [] if unread is None else unread
        self.calls = calls

    def __repr__(self) -> str:
        return f"ReadBack(items={self.items!r}, unread={self.unread!r}, calls={self.calls!r})"


def read_back(
    client: IndexReader,
    table_name: str,
    keys: Sequence[AttributeMap],
    *,
    consistent: bool = True,
    retries: int = DEFAULT_READ_RETRIES,
    sleep: Callable[[float], None] = time.sleep,
    may_retry: Callable[[], bool] | None = None,
    table_keys: TableKeys,
) -> ReadBack:
    """The items of ``keys`` (at most :data:`BATCH_GET_MAX_KEYS`) in one ``BatchGetItem``.

    Keys DynamoDB leaves unprocessed (throttling, the 16 MB response limit) are
    asked again with exponential backoff, up to ``retries`` times and while
    ``may_retry`` says yes; those still unread then are in ``unread``. The
    index is KEYS_ONLY and eventually consistent: ``consistent`` reads tell
    whether an item is still there and still pending.
    """
    result = ReadBack()
    request: dict[str, Any] = {"Keys": list(keys), "ConsistentRead": consistent}
    attempt = 0
    while True:
        result.calls += 1
        response = client.batch_get_item(RequestItems={table_name: request})
        for item in (response.get("Responses") or {}).get(table_name) or []:
            result.items[key_id(item, table_keys)] = item
        unprocessed = (response.get("UnprocessedKeys") or {}).get(table_name) or {}
        result.unread = list(unprocessed.get("Keys") or [])
        if not result.unread:
            return result
        if attempt >= retries or (may_retry is not None and not may_retry()):
            return result
        attempt += 1
        sleep(min(READ_BACKOFF_MAX_SECONDS, READ_BACKOFF_BASE_SECONDS * 2 ** (attempt - 1)))
        request = {**unprocessed, "ConsistentRead": consistent}
