"""``outbox-ops pending``: what is waiting to be published, and what is quarantined."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any, Final

from dynamodb_outbox.ops._context import AttributeMap, Context, Report, s
from dynamodb_outbox.ops._errors import bad_input
from dynamodb_outbox.ops._formatting import age_seconds, event_id_of, format_age
from dynamodb_outbox.ops._index import batch_get, count_pending, pending_index_keys, query_pages
from dynamodb_outbox.outbox_item import (
    ATTR_EVENT_TYPE,
    ATTR_QUARANTINE_REASON,
    ATTR_QUARANTINED_AT,
    ATTR_STATUS,
    OUTBOX_SK_PREFIX,
    STATUS_QUARANTINED,
)
from dynamodb_outbox.pending_index import is_pending
from dynamodb_outbox.regions import ATTR_REGION

# What cli.py uses: the command's parser, whose default runs it. The CLI is the public face.
__all__ = ["add_parser"]

DEFAULT_LIMIT: Final = 50

HELP: Final = "count and list pending and quarantined outbox items, oldest first"

DESCRIPTION: Final = """\
Pending items are read from the sparse pending index (one Query per shard; reads
are proportional to the pending items, never to the table) and listed oldest
first across shards, with their age taken from the ULID.

Quarantined items are NOT in the pending index (quarantine removes the shard
attribute) and the table has no index on outbox_status. Without --pk they are
found with a Scan of the WHOLE TABLE filtered on outbox_status = QUARANTINED:
it reads (and bills) every item, so it stops as soon as --limit quarantined
items are found, and --no-quarantined skips it. With --pk, one Query of that
item collection lists both kinds and nothing is scanned.

Read-only: --dry-run changes nothing here.
"""

QUARANTINE_PROJECTION: Final = "#pk, #sk, #type, #status, #reason, #at, #region"


def projection_names(ctx: Context) -> dict[str, str]:
    """The placeholders of :data:`QUARANTINE_PROJECTION`, with the table's key names."""
    return {
        "#pk": ctx.table_keys.partition,
        "#sk": ctx.table_keys.sort,
        "#type": ATTR_EVENT_TYPE,
        "#status": ATTR_STATUS,
        "#reason": ATTR_QUARANTINE_REASON,
        "#at": ATTR_QUARANTINED_AT,
        "#region": ATTR_REGION,
    }


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "pending",
        help=HELP,
        description=DESCRIPTION,
        parents=parents,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        help=f"list at most this many items of each kind, and stop the quarantine Scan "
        f"once this many are found (default {DEFAULT_LIMIT})",
    )
    parser.add_argument(
        "--pk",
        help="only this entity's item collection (one Query, no Scan)",
    )
    parser.add_argument(
        "--no-quarantined",
        action="store_true",
        help="skip the quarantined items (and so the table Scan)",
    )
    parser.set_defaults(run=run)


def row(item: Mapping[str, Any], ctx: Context) -> dict[str, Any]:
    sk = s(item, ctx.table_keys.sort)
    age = age_seconds(sk, ctx.now)
    entry: dict[str, Any] = {
        "pk": s(item, ctx.table_keys.partition),
        "sk": sk,
        "event_id": event_id_of(sk),
        "event_type": s(item, ATTR_EVENT_TYPE),
        "age_seconds": None if age is None else round(age, 3),
    }
    if s(item, ATTR_STATUS) == STATUS_QUARANTINED:
        entry["quarantine_reason"] = s(item, ATTR_QUARANTINE_REASON)
        entry["quarantined_at"] = s(item, ATTR_QUARANTINED_AT)
    return entry


def scan_quarantined(ctx: Context, limit: int | None) -> tuple[list[AttributeMap], bool]:
    """Quarantined outbox items by a filtered Scan; also whether the whole table was read."""
    client = ctx.client("dynamodb")
    request: dict[str, Any] = {
        "TableName": ctx.table,
        "FilterExpression": "#status = :quarantined AND begins_with(#sk, :prefix)",
        "ProjectionExpression": QUARANTINE_PROJECTION,
        "ExpressionAttributeNames": projection_names(ctx),
        "ExpressionAttributeValues": {
            ":quarantined": {"S": STATUS_QUARANTINED},
            ":prefix": {"S": OUTBOX_SK_PREFIX},
        },
    }
    found: list[AttributeMap] = []
    while True:
        response = client.scan(**request)
        found.extend(response.get("Items") or [])
        last = response.get("LastEvaluatedKey")
        if not last:
            return found, True
        if limit is not None and len(found) >= limit:
            return found, False
        request["ExclusiveStartKey"] = last


def query_collection(ctx: Context, pk: str) -> list[AttributeMap]:
    """Every outbox item of one entity's item collection, oldest first."""
    items: list[AttributeMap] = []
    for page in query_pages(
        ctx.client("dynamodb"),
        TableName=ctx.table,
        KeyConditionExpression="#pk = :pk AND begins_with(#sk, :prefix)",
        ProjectionExpression="#pk, #sk, #type, #status, #reason, #at, #region, #shard",
        ExpressionAttributeNames={**projection_names(ctx), "#shard": "outbox_pending_shard"},
        ExpressionAttributeValues={":pk": {"S": pk}, ":prefix": {"S": OUTBOX_SK_PREFIX}},
        ConsistentRead=True,
    ):
        items.extend(page.get("Items") or [])
    return items


def _table(report: Report, title: str, rows: list[dict[str, Any]], quarantined: bool) -> None:
    report.say(title)
    for entry in rows:
        line = f"  {format_age(entry['age_seconds']):>8}  {entry['event_type'] or '?':<24}  "
        line += f"{entry['pk']}  {entry['sk']}"
        if quarantined:
            line += (
                f"  quarantined_at={entry['quarantined_at']}  reason={entry['quarantine_reason']}"
            )
        report.say(line)


def run(ctx: Context, args: argparse.Namespace) -> Report:
    limit: int = args.limit
    if limit < 1:
        raise bad_input(f"--limit must be >= 1, got {limit}")
    report = Report()
    if args.pk:
        items = query_collection(ctx, args.pk)
        pending = [row(item, ctx) for item in items if is_pending(item)]
        quarantined = [
            row(item, ctx) for item in items if s(item, ATTR_STATUS) == STATUS_QUARANTINED
        ]
        pending_count, quarantined_count, complete = len(pending), len(quarantined), True
        method = f"Query of item collection {args.pk!r}"
    else:
        keys = pending_index_keys(ctx, limit=limit)
        pending_count = count_pending(ctx)
        # The index is KEYS_ONLY: the event type comes from the items.
        sort = ctx.table_keys.sort
        by_key = {s(item, sort): item for item in batch_get(ctx, keys, consistent=False)}
        pending = [row(by_key.get(s(key, sort), key), ctx) for key in keys]
        quarantined, quarantined_count, complete = [], 0, True
        method = "skipped (--no-quarantined)"
        if not args.no_quarantined:
            found, complete = scan_quarantined(ctx, limit)
            found.sort(key=lambda item: s(item, ctx.table_keys.sort))
            quarantined = [row(item, ctx) for item in found]
            quarantined_count = len(found)
            method = "Scan of the whole table" if complete else f"Scan stopped at --limit {limit}"
    report.data = {
        "table": ctx.table,
        "pending": {"count": pending_count, "items": pending[:limit]},
        "quarantined": {
            "count": quarantined_count,
            "count_is_complete": complete,
            "method": method,
            "items": quarantined[:limit],
        },
    }
    oldest = format_age(pending[0]["age_seconds"]) if pending else "-"
    _table(report, f"pending: {pending_count} (oldest {oldest})", pending[:limit], False)
    more = "" if complete else "+ (not all were looked for, not necessarily the oldest)"
    _table(
        report,
        f"quarantined: {quarantined_count}{more} [{method}]",
        quarantined[:limit],
        True,
    )
    return report
