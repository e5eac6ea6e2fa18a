"""``outbox-ops replay``: replay archived events to one consumer's rule, and follow it."""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from botocore.exceptions import ClientError

from dynamodb_outbox.ops._context import Context, Report
from dynamodb_outbox.ops._errors import EXIT_AWS_ERROR, OpsError, bad_input, error_code
from dynamodb_outbox.replays import replay_name

# What cli.py uses: the command's parser, whose default runs it. The CLI is the public face.
__all__ = ["add_parser"]

HELP: Final = "replay the bus archive's events of a time window to one consumer's rule"

DESCRIPTION: Final = """\
Starts an EventBridge replay from the outbox's archive (the module's
event_archive, named after the module's `name`) to the bus, limited to the
rule of one consumer (<name>-<consumer>-consumer): no other consumer sees the
replayed events. Then follows it to the end, one progress line on stderr per
poll. Replays are not in the events' original order.

The window is on the events' `time`, which the publisher sets to the outbox
event's own time (when the writer made it).

Replayed events keep their outbox event ids. By default a consumer using the
toolkit skips those it already processed and processes, once, those it never
did (lost from its queue, expired in its DLQ): a replay never applies an event
twice by accident. --reprocess asks that consumer, and only it, to process every
replayed event once more (after fixing a bug in it): the toolkit then keys the
events by id and replay name, so a replay delivered twice still applies once.

Safe to re-run: the replay's name is derived from the request (archive, rule,
window, --reprocess, --attempt), so running the same command again follows
the replay already started, or reports it done, instead of starting another.
--attempt N starts a new replay of the same window on purpose (a reprocess to
redo, a replay that failed or was cancelled).

Archived events may reach the archive minutes after they reached the bus: AWS
advises replaying only windows that ended at least 10 minutes ago.
--dry-run resolves the archive, the rule and the name, and starts nothing.

Needs events:DescribeArchive, events:DescribeRule, events:StartReplay and
events:DescribeReplay; --table is not used.
"""

DEFAULT_POLL_SECONDS: Final = 15
#: AWS: "We recommend you delay replaying archived events for 10 minutes".
ARCHIVE_DELAY: Final = timedelta(minutes=10)
_DONE: Final = frozenset({"COMPLETED", "FAILED", "CANCELLED"})


def consumer_rule_name(name: str, consumer: str) -> str:
    """The rule the module creates for ``consumer`` (main.tf ``consumer_names``)."""
    return f"{name}-{consumer}-consumer"


def archive_name_of(name: str) -> str:
    """The archive the module creates for the stack ``name`` (bus.tf ``event_archive_name``)."""
    return name


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "replay",
        help=HELP,
        description=DESCRIPTION,
        parents=parents,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--name", required=True, help="the module's `name` input")
    parser.add_argument("--consumer", required=True, help="the consumer's key")
    parser.add_argument(
        "--from", dest="start", required=True, help="window start, ISO 8601 with a zone"
    )
    parser.add_argument("--to", dest="end", required=True, help="window end, ISO 8601 with a zone")
    parser.add_argument("--archive", help="the archive (default: --name, as the module names it)")
    parser.add_argument(
        "--reprocess",
        action="store_true",
        help="have the consumer process the replayed events again, even those already done",
    )
    parser.add_argument(
        "--attempt",
        type=int,
        default=1,
        help="start a new replay of the same request (default 1)",
    )
    parser.add_argument(
        "--poll-seconds",
        type=float,
        default=DEFAULT_POLL_SECONDS,
        help=f"seconds between progress reads (default {DEFAULT_POLL_SECONDS})",
    )
    parser.set_defaults(run=run, needs_table=False)


def _time(value: str, option: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise bad_input(f"{option} must be an ISO 8601 time, got {value!r}") from None
    if parsed.tzinfo is None:
        raise bad_input(f"{option} needs a time zone (e.g. {value}Z or {value}+00:00)")
    return parsed.astimezone(UTC)


def _describe(events: Any, name: str) -> Mapping[str, Any] | None:
    try:
        replay: Mapping[str, Any] = events.describe_replay(ReplayName=name)
    except ClientError as exc:
        if error_code(exc) == "ResourceNotFoundException":
            return None
        raise
    return replay


def _rule_arn(events: Any, rule: str, bus_arn: str, consumer: str) -> str:
    try:
        return str(events.describe_rule(Name=rule, EventBusName=bus_arn)["Arn"])
    except ClientError as exc:
        if error_code(exc) == "ResourceNotFoundException":
            raise bad_input(
                f"--consumer {consumer}: no rule {rule} on bus {bus_arn} (is it a consumer key "
                "of this stack, with publish_to = eventbridge?)"
            ) from None
        raise


def _progress_line(replay: Mapping[str, Any], start: datetime, end: datetime) -> str:
    state = str(replay.get("State") or "?")
    last = replay.get("EventLastReplayedTime")
    if isinstance(last, datetime) and end > start:
        done = max(0.0, min(1.0, (last.astimezone(UTC) - start) / (end - start)))
        return (
            f"replay {replay.get('ReplayName')}: {state}, events up to "
            f"{last.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ} ({done:.0%} of the window)"
        )
    return f"replay {replay.get('ReplayName')}: {state}"


def run(ctx: Context, args: argparse.Namespace) -> Report:
    start, end = _time(args.start, "--from"), _time(args.end, "--to")
    if start >= end:
        raise bad_input(f"--from ({start.isoformat()}) must be before --to ({end.isoformat()})")
    if args.attempt < 1:
        raise bad_input(f"--attempt must be 1 or more, got {args.attempt}")
    if args.poll_seconds < 0:
        raise bad_input(f"--poll-seconds must not be negative, got {args.poll_seconds}")
    events = ctx.client("events")
    archive_name = args.archive or archive_name_of(args.name)
    archive = events.describe_archive(ArchiveName=archive_name)
    if archive.get("State") not in (None, "ENABLED"):
        raise OpsError(f"archive {archive_name} is {archive['State']}, not ENABLED")
    bus_arn = str(archive["EventSourceArn"])
    rule = consumer_rule_name(args.name, args.consumer)
    rule_arn = _rule_arn(events, rule, bus_arn, args.consumer)
    try:
        name = replay_name(
            args.consumer,
            archive_arn=str(archive["ArchiveArn"]),
            rule_arn=rule_arn,
            start=start.isoformat(),
            end=end.isoformat(),
            reprocess=args.reprocess,
            attempt=args.attempt,
        )
    except ValueError as exc:
        raise bad_input(str(exc)) from None

    report = Report()
    report.data = {
        "replay_name": name,
        "archive": archive_name,
        "rule_arn": rule_arn,
        "from": start.isoformat(),
        "to": end.isoformat(),
        "reprocess": args.reprocess,
    }
    mode = "reprocess every event" if args.reprocess else "process only events not yet processed"
    report.say(f"replay {name}: archive {archive_name} -> rule {rule} ({mode})")
    report.say(f"  window {start.isoformat()} .. {end.isoformat()}")
    _warn_about_window(report, archive, start, end, ctx.now)

    if ctx.dry_run:
        existing = _describe(events, name)
        report.data["state"] = existing.get("State") if existing else None
        report.say(
            f"  dry run: replay already {existing['State']}"
            if existing
            else "  dry run: would start it"
        )
        return report

    replay = _describe(events, name)
    if replay is None:
        replay = _start(events, name, archive, bus_arn, rule_arn, start, end, args.reprocess)
        report.say("  started")
    else:
        report.say(f"  already started ({replay.get('State')}): following it, starting nothing")
    replay = _follow(ctx, events, name, replay, start, end, args.poll_seconds)
    state = str(replay.get("State"))
    report.data["state"] = state
    if state != "COMPLETED":
        reason = replay.get("StateReason") or "no reason given"
        raise OpsError(
            f"replay {name} ended {state}: {reason}; --attempt {args.attempt + 1} starts a new one",
            EXIT_AWS_ERROR,
        )
    report.say(f"  {state}")
    return report


def _warn_about_window(
    report: Report, archive: Mapping[str, Any], start: datetime, end: datetime, now: datetime
) -> None:
    retention = archive.get("RetentionDays")
    if isinstance(retention, int) and retention > 0 and start < now - timedelta(days=retention):
        report.say(f"  warning: the archive keeps {retention} days; older events are gone")
    if end > now - ARCHIVE_DELAY:
        report.say(
            "  warning: the window ends less than 10 minutes ago: events still on their way to "
            "the archive are missed (re-run later with --attempt 2 for them)"
        )


def _start(
    events: Any,
    name: str,
    archive: Mapping[str, Any],
    bus_arn: str,
    rule_arn: str,
    start: datetime,
    end: datetime,
    reprocess: bool,
) -> Mapping[str, Any]:
    try:
        events.start_replay(
            ReplayName=name,
            Description=f"outbox-ops replay{' --reprocess' if reprocess else ''}",
            EventSourceArn=archive["ArchiveArn"],
            EventStartTime=start,
            EventEndTime=end,
            Destination={"Arn": bus_arn, "FilterArns": [rule_arn]},
        )
    except ClientError as exc:
        # Another run started it between our read and this call: follow that one.
        if error_code(exc) != "ResourceAlreadyExistsException":
            raise
    replay: Mapping[str, Any] = events.describe_replay(ReplayName=name)
    return replay


def _follow(
    ctx: Context,
    events: Any,
    name: str,
    replay: Mapping[str, Any],
    start: datetime,
    end: datetime,
    poll_seconds: float,
) -> Mapping[str, Any]:
    ctx.progress(_progress_line(replay, start, end))
    while replay.get("State") not in _DONE:
        time.sleep(poll_seconds)
        replay = events.describe_replay(ReplayName=name)
        ctx.progress(_progress_line(replay, start, end))
    return replay
