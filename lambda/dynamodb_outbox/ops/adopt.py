"""``outbox-ops adopt``: publish a lost region's pending items from a surviving region."""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any, Final

from dynamodb_outbox.ops._context import Context, Report
from dynamodb_outbox.ops._errors import EXIT_INCOMPLETE, bad_input
from dynamodb_outbox.ops._publishing import make_sink, publish_summary, publisher_logs_to_stderr
from dynamodb_outbox.pending_index import pending_boundary_sk
from dynamodb_outbox.regions import RegionScope

# What cli.py uses: the command's parser, whose default runs it. The CLI is the public face.
__all__ = ["add_parser"]

HELP: Final = "multi-region failover: publish a lost region's pending items from this region"

DESCRIPTION: Final = """\
On a DynamoDB global table each region publishes only the outbox items written
in it (the writer stamps its region on each item). When a region is lost, the
items it wrote and had not yet published are still pending in every surviving
replica (those replication carried out before the loss), and no one publishes
them. Run this in a surviving region (--region, and --bus-name/--topic-arn of
that region's outbox, or its publisher's environment variables): it sweeps the
lost region's pending shards the way that region's sweeper would, and
publishes through this region's bus or topic, deleting what it published. The
deletes replicate when the lost region returns, so its own publisher finds
them gone.

Duplicates: an item the lost region had already published, but whose delete
had not replicated out, is published again; and when the lost region returns,
its publisher may still publish what its stream held. Consumers absorb both by
event id (the consumer toolkit's idempotency). Items replication never carried
out of the lost region cannot be adopted: they come back with the region.

Only items older than --min-age-seconds (default 300, the sweeper's) are
taken, so an item the lost region is still publishing (a short outage) is left
to it. Re-run until it reports nothing left (exit 3 while work remains).
For a standing rule, the module's multi_region.adopted_regions input makes a
region's sweeper adopt on every run.
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "adopt",
        help=HELP,
        description=DESCRIPTION,
        parents=parents,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--from-region", required=True, help="the lost region whose pending items to publish"
    )
    parser.add_argument(
        "--min-age-seconds",
        type=int,
        default=300,
        help="only items at least this old (default 300, the sweeper's minimum age)",
    )
    parser.add_argument(
        "--max-items", type=int, default=1000, help="at most this many per run (default 1000)"
    )
    parser.add_argument(
        "--include-unstamped",
        action="store_true",
        help="also publish items carrying no region (when the lost region was the one "
        "publishing them: multi_region.publishes_unstamped)",
    )
    sink = parser.add_mutually_exclusive_group()
    sink.add_argument("--bus-name", help="this region's EventBridge bus (name or ARN)")
    sink.add_argument("--topic-arn", help="this region's SNS topic ARN")
    parser.set_defaults(run=run)


def run(ctx: Context, args: argparse.Namespace) -> Report:
    from dynamodb_outbox.publishing import PublishDependencies
    from dynamodb_outbox.sweeper import sweep

    lost = args.from_region.strip()
    if lost == ctx.region:
        raise bad_input(
            f"--from-region {lost} is the region this command runs in (--region): "
            "run it in a surviving region"
        )
    if args.min_age_seconds < 0 or args.max_items < 1:
        raise bad_input("--min-age-seconds must be >= 0 and --max-items >= 1")
    try:
        # The lost region's own scope: its shards, its stamp (and unstamped items
        # when it was the region publishing them), published through this region.
        scope = RegionScope(lost, unstamped=args.include_unstamped)
    except ValueError as exc:
        raise bad_input(f"--from-region: {exc}") from None

    report = Report()
    report.data = {
        "table": ctx.table,
        "region": ctx.region,
        "from_region": lost,
        "dry_run": ctx.dry_run,
        "boundary_sk": pending_boundary_sk(ctx.now - timedelta(seconds=args.min_age_seconds)),
    }
    if ctx.dry_run:
        from dynamodb_outbox.ops._index import count_pending

        report.say(
            f"dry run: nothing published; {count_pending(ctx, [lost])} items of {lost} are "
            "pending (any age)"
        )
        return report
    sink = make_sink(ctx, args.bus_name, args.topic_arn)
    with publisher_logs_to_stderr():
        result = sweep(
            PublishDependencies(sink, ctx.table, ctx.client("dynamodb"), table_keys=ctx.table_keys),
            index_name=ctx.pending_index,
            shards=ctx.pending_shards,
            min_age_seconds=args.min_age_seconds,
            max_items=args.max_items,
            now=ctx.now,
            region_scope=scope,
        )
    report.data["publish"] = {
        **publish_summary(result.publish),
        "pending_found": result.pending_items,
    }
    report.data["more_pending"] = result.more_pending
    report.say(
        f"adopted from {lost}: published {result.publish.published}, "
        f"quarantined {result.publish.quarantined}, found {result.pending_items} pending "
        f"older than {args.min_age_seconds}s"
    )
    if result.more_pending:
        report.say("more of its items are pending: run it again")
        report.exit_code = EXIT_INCOMPLETE
    return report
