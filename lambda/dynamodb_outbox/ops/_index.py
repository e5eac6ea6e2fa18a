"""Reads of the outbox table: the pending index oldest first, counts, and items by key."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from dynamodb_outbox.ops._context import AttributeMap, Context
from dynamodb_outbox.ops._errors import EXIT_INCOMPLETE, OpsError
from dynamodb_outbox.outbox_item import ATTR_PENDING_SHARD, OUTBOX_SK_PREFIX
from dynamodb_outbox.pending_index import (
    BATCH_GET_MAX_KEYS,
    DEFAULT_READ_RETRIES,
    OldestFirst,
    ShardCursor,
    key_id,
    read_back,
    shard_keys,
    sort_key,
)
from dynamodb_outbox.regions import regional_shard


def query_pages(client: Any, **request: Any) -> Iterator[Mapping[str, Any]]:
    while True:
        response = client.query(**request)
        yield response
        last = response.get("LastEvaluatedKey")
        if not last:
            return
        request["ExclusiveStartKey"] = last


def pending_index_keys(
    ctx: Context,
    *,
    low_sk: str | None = None,
    high_sk: str | None = None,
    limit: int | None = None,
) -> list[AttributeMap]:
    """Pending outbox keys from the sparse index, oldest first across shards.

    ``low_sk``/``high_sk`` bound the sort key (inclusive); ``limit`` caps the
    keys returned (and the size of each page read).
    """
    client = ctx.client("dynamodb")

    def query(request: dict[str, Any]) -> Mapping[str, Any]:
        response: Mapping[str, Any] = client.query(
            TableName=ctx.table, IndexName=ctx.pending_index, ScanIndexForward=True, **request
        )
        return response

    condition: str | None = None
    values: dict[str, Any] = {}
    if low_sk is not None or high_sk is not None:
        condition = "#sk BETWEEN :low AND :high"
        values[":low"] = {"S": low_sk or OUTBOX_SK_PREFIX}
        values[":high"] = {"S": high_sk or OUTBOX_SK_PREFIX + "\U0010ffff"}
    merged = OldestFirst(
        [
            ShardCursor(
                query,
                shard,
                sort_key_condition=condition,
                values=values,
                page_limit=limit,
                table_keys=ctx.table_keys,
            )
            for shard in _shards(ctx, None)
        ]
    )
    keys: list[AttributeMap] = []
    while merged.peek() is not None and (limit is None or len(keys) < limit):
        key = merged.pop()
        if sort_key(key, ctx.table_keys).startswith(OUTBOX_SK_PREFIX):
            keys.append(key)
    return keys


def _shards(ctx: Context, regions: Sequence[str | None] | None) -> list[str]:
    """The pending-index partitions to read: each region's shards (None: unprefixed)."""
    return [
        regional_shard(shard, region)
        for region in (ctx.written_in if regions is None else regions)
        for shard in shard_keys(ctx.pending_shards)
    ]


def count_pending(ctx: Context, regions: Sequence[str | None] | None = None) -> int:
    """Pending items in the shards of ``regions`` (default: ``ctx.written_in``)."""
    client = ctx.client("dynamodb")
    total = 0
    for shard in _shards(ctx, regions):
        for page in query_pages(
            client,
            TableName=ctx.table,
            IndexName=ctx.pending_index,
            KeyConditionExpression="#shard = :shard",
            ExpressionAttributeNames={"#shard": ATTR_PENDING_SHARD},
            ExpressionAttributeValues={":shard": {"S": shard}},
            Select="COUNT",
        ):
            total += int(page.get("Count") or 0)
    return total


def batch_get(
    ctx: Context,
    keys: Sequence[AttributeMap],
    *,
    consistent: bool = True,
) -> list[AttributeMap]:
    """The items of ``keys`` that exist, in the order of ``keys`` (duplicates dropped)."""
    client = ctx.client("dynamodb")
    found: dict[str, AttributeMap] = {}
    unique: dict[str, AttributeMap] = {}
    for key in keys:
        unique.setdefault(key_id(key, ctx.table_keys), key)
    ordered = list(unique.values())
    for start in range(0, len(ordered), BATCH_GET_MAX_KEYS):
        chunk = ordered[start : start + BATCH_GET_MAX_KEYS]
        read = read_back(client, ctx.table, chunk, consistent=consistent, table_keys=ctx.table_keys)
        if read.unread:
            raise OpsError(
                f"DynamoDB left {len(read.unread)} keys unread after "
                f"{DEFAULT_READ_RETRIES} retries (throttled?); nothing was done with them, "
                "re-run",
                EXIT_INCOMPLETE,
            )
        found.update(read.items)
    ids = [key_id(key, ctx.table_keys) for key in ordered]
    return [found[key] for key in ids if key in found]
