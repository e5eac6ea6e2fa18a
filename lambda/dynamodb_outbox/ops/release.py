"""``outbox-ops release``: put quarantined items back in the pending index after a fix."""

from __future__ import annotations

import argparse
from typing import Any, Final

from botocore.exceptions import ClientError

from dynamodb_outbox._clock import iso_milliseconds
from dynamodb_outbox.ops._arns import check_event_id
from dynamodb_outbox.ops._context import AttributeMap, Context, Report, key_of, s
from dynamodb_outbox.ops._errors import EXIT_INCOMPLETE, bad_input, error_code
from dynamodb_outbox.ops._formatting import event_id_of
from dynamodb_outbox.ops._index import batch_get
from dynamodb_outbox.ops._publishing import make_sink, publish_items, publish_summary
from dynamodb_outbox.ops.pending import QUARANTINE_PROJECTION, projection_names, query_collection
from dynamodb_outbox.outbox_item import (
    ATTR_PENDING_SHARD,
    ATTR_QUARANTINE_REASON,
    ATTR_QUARANTINED_AT,
    ATTR_STATUS,
    OUTBOX_SK_PREFIX,
    STATUS_PENDING,
    STATUS_QUARANTINED,
    pending_shard,
)
from dynamodb_outbox.pending_index import is_pending
from dynamodb_outbox.regions import ATTR_RELEASED_AT, region_of, regional_shard

HELP: Final = "re-queue quarantined items (after a fix) for the sweeper, or publish them now"

DESCRIPTION: Final = """\
Each quarantined item gets outbox_status = PENDING and its pending-index shard
back (the same shard the writer gave it, from --pending-shards), and loses
quarantine_reason and quarantined_at. The update is conditional on
outbox_status = QUARANTINED, so re-running it, or racing another operator, is a
no-op for items already released or gone.

Released items are published by the next sweeper run: the sweeper looks for
pending items older than its minimum age by ULID, and a quarantined item is
older than that. The release is a MODIFY on the stream, which the publisher's
mapping filter drops, so the stream does not publish it. --publish-now publishes
them at once instead, through the publisher's core (same batching, quarantine
and delete rules); an event that is still poison is quarantined again.

Finding the items: with --pk, the entity's item collection is queried. Without
it, quarantined items are not in any index, so a Scan of the WHOLE TABLE
filtered on outbox_status finds them (it stops once every --event-id is found).
"""

# outbox_released_at: a surviving region's standing adoption counts a released item's
# age from it (regions.RegionScope.adoption_waits), not from its event id.
_RELEASE_UPDATE: Final = (
    "SET #status = :pending, #shard = :shard, #released = :now REMOVE #reason, #at"
)


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "release",
        help=HELP,
        description=DESCRIPTION,
        parents=parents,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--event-id",
        action="append",
        metavar="ID",
        help="the event (ULID) to release; repeat for several",
    )
    which.add_argument("--all", action="store_true", help="every quarantined item")
    parser.add_argument("--pk", help="the items' partition key: one Query instead of a Scan")
    parser.add_argument(
        "--limit", type=int, default=None, help="release at most this many (default: no limit)"
    )
    parser.add_argument(
        "--publish-now",
        action="store_true",
        help="publish the released items now instead of leaving them to the sweeper",
    )
    sink = parser.add_mutually_exclusive_group()
    sink.add_argument("--bus-name", help="with --publish-now: the EventBridge bus (name or ARN)")
    sink.add_argument("--topic-arn", help="with --publish-now: the SNS topic ARN")
    parser.set_defaults(run=run)


def find_quarantined(
    ctx: Context, event_ids: list[str] | None, pk: str | None, limit: int | None
) -> list[AttributeMap]:
    """Quarantined items to release, oldest first (``event_ids`` None: all of them)."""
    wanted = {OUTBOX_SK_PREFIX + event_id for event_id in event_ids or []}
    if pk:
        items = [
            item
            for item in query_collection(ctx, pk)
            if s(item, ATTR_STATUS) == STATUS_QUARANTINED
            and (event_ids is None or s(item, ctx.table_keys.sort) in wanted)
        ]
    else:
        items = _scan(ctx, wanted if event_ids is not None else None, limit)
    items.sort(key=lambda item: s(item, ctx.table_keys.sort))
    return items if limit is None else items[:limit]


def _scan(ctx: Context, wanted: set[str] | None, limit: int | None) -> list[AttributeMap]:
    names = projection_names(ctx)
    values: dict[str, Any] = {":quarantined": {"S": STATUS_QUARANTINED}}
    condition = "#status = :quarantined"
    if wanted is not None:
        placeholders = []
        for index, sk in enumerate(sorted(wanted)):
            values[f":sk{index}"] = {"S": sk}
            placeholders.append(f":sk{index}")
        condition += f" AND #sk IN ({', '.join(placeholders)})"
    else:
        values[":prefix"] = {"S": OUTBOX_SK_PREFIX}
        condition += " AND begins_with(#sk, :prefix)"
    request: dict[str, Any] = {
        "TableName": ctx.table,
        "FilterExpression": condition,
        "ProjectionExpression": QUARANTINE_PROJECTION,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
    client = ctx.client("dynamodb")
    found: list[AttributeMap] = []
    while True:
        response = client.scan(**request)
        found.extend(response.get("Items") or [])
        last = response.get("LastEvaluatedKey")
        if not last:
            return found
        sort = ctx.table_keys.sort
        if wanted is not None and len({s(item, sort) for item in found}) >= len(wanted):
            return found
        if wanted is None and limit is not None and len(found) >= limit:
            return found
        request["ExclusiveStartKey"] = last


def release_item(ctx: Context, item: AttributeMap) -> bool:
    """True if this call released it; False if it was no longer quarantined (or gone)."""
    event_id = event_id_of(s(item, ctx.table_keys.sort))
    shard = pending_shard(event_id, ctx.pending_shards)
    try:
        ctx.client("dynamodb").update_item(
            TableName=ctx.table,
            Key=key_of(item, ctx),
            UpdateExpression=_RELEASE_UPDATE,
            ConditionExpression="#status = :quarantined",
            ExpressionAttributeNames={
                "#status": ATTR_STATUS,
                "#shard": ATTR_PENDING_SHARD,
                "#reason": ATTR_QUARANTINE_REASON,
                "#at": ATTR_QUARANTINED_AT,
                "#released": ATTR_RELEASED_AT,
            },
            ExpressionAttributeValues={
                ":pending": {"S": STATUS_PENDING},
                ":quarantined": {"S": STATUS_QUARANTINED},
                # Back under the shards of the region that wrote it (multi-region).
                ":shard": {"S": regional_shard(shard, region_of(item))},
                ":now": {"S": iso_milliseconds(ctx.now)},
            },
        )
    except ClientError as exc:
        if error_code(exc) == "ConditionalCheckFailedException":
            return False
        raise
    return True


def run(ctx: Context, args: argparse.Namespace) -> Report:
    event_ids: list[str] | None = None
    if args.event_id:
        event_ids = sorted({check_event_id(event_id) for event_id in args.event_id})
        if len(event_ids) > 100 and not args.pk:
            raise bad_input("at most 100 --event-id per run without --pk (a Scan filter limit)")
    if args.limit is not None and args.limit < 1:
        raise bad_input(f"--limit must be >= 1, got {args.limit}")
    if (args.bus_name or args.topic_arn) and not args.publish_now:
        raise bad_input("--bus-name/--topic-arn only apply with --publish-now")
    sink = make_sink(ctx, args.bus_name, args.topic_arn) if args.publish_now else None

    report = Report()
    items = find_quarantined(ctx, event_ids, args.pk, args.limit)
    partition, sort = ctx.table_keys.names
    found_ids = [event_id_of(s(item, sort)) for item in items]
    not_found = sorted(set(event_ids or []) - set(found_ids))
    released: list[str] = []
    skipped: list[str] = []
    if not ctx.dry_run:
        for item, event_id in zip(items, found_ids, strict=True):
            (released if release_item(ctx, item) else skipped).append(event_id)
    report.data = {
        "table": ctx.table,
        "dry_run": ctx.dry_run,
        "quarantined_found": [
            {"pk": s(item, partition), "event_id": event_id, "reason": s(item, "quarantine_reason")}
            for item, event_id in zip(items, found_ids, strict=True)
        ],
        "released": released,
        "already_released": skipped,
        "not_quarantined": not_found,
        "publish_now": bool(args.publish_now),
    }
    if not items:
        report.say("nothing to release: no matching quarantined item")
    for item, event_id in zip(items, found_ids, strict=True):
        verb = "would release" if ctx.dry_run else "released"
        if event_id in skipped:
            verb = "already released"
        report.say(f"{verb} {s(item, partition)} {event_id} (was: {s(item, 'quarantine_reason')})")
    for event_id in not_found:
        report.say(f"not quarantined (already released, published or unknown): {event_id}")
    if ctx.dry_run:
        then = "publish them now" if args.publish_now else "leave them to the next sweeper run"
        report.say(f"dry run: nothing written; would release {len(items)} and {then}")
        return report
    if sink is None:
        if released:
            report.say(f"{len(released)} released; the next sweeper run publishes them")
        return report
    keys = [key_of(item, ctx) for item in items if event_id_of(s(item, sort)) in set(released)]
    to_publish = [item for item in batch_get(ctx, keys) if is_pending(item)]
    result, left = publish_items(ctx, to_publish, sink)
    report.data["publish"] = {**publish_summary(result), "left_pending": left}
    report.say(
        f"published {result.published}, quarantined again {result.quarantined}, "
        f"left pending {len(left)}"
    )
    if left:
        report.say("some events are still pending (retryable failure): the sweeper retries them")
        report.exit_code = EXIT_INCOMPLETE
    return report
