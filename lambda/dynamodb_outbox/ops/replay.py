"""``outbox-ops replay-failures``: re-publish the batches the stream mapping gave up on."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from dynamodb_outbox.ops._arns import check_queue_url, check_topic_arn, stream_table
from dynamodb_outbox.ops._context import AttributeMap, Context, Report, key_of, s
from dynamodb_outbox.ops._errors import EXIT_INCOMPLETE, OpsError, bad_input, error_code, explain
from dynamodb_outbox.ops._formatting import event_id_of
from dynamodb_outbox.ops._index import batch_get, pending_index_keys
from dynamodb_outbox.ops._publishing import make_sink, publish_items, publish_summary
from dynamodb_outbox.outbox_item import ATTR_STATUS, OUTBOX_SK_PREFIX, STATUS_QUARANTINED
from dynamodb_outbox.pending_index import is_pending, key_id, pending_boundary_sk

# What cli.py uses: the command's parser, whose default runs it. The CLI is the public face.
__all__ = ["add_parser"]

HELP: Final = "re-publish the outbox items of stream batches sent to the on-failure queue"

DESCRIPTION: Final = """\
The stream mapping's on-failure queue holds metadata only (DDBStreamBatchInfo:
shard, start and end sequence numbers, stream ARN). For each such record this
reads that range of the shard again (GetShardIterator AT_SEQUENCE_NUMBER, then
GetRecords until past the end sequence number), takes the outbox keys of the
INSERT records, reads those items (consistent BatchGetItem) and re-publishes
the ones still pending through the publisher's core, which deletes what it
published and quarantines poison. Items already gone were published meanwhile
(by a retry or the sweeper); quarantined ones are listed (see `release`).

Stream records are kept 24 hours. When the range is trimmed
(TrimmedDataAccessException) or the shard is gone, the records are lost but the
outbox items are not: the pending items whose ULID falls in the batch's
arrival window (widened by 15 minutes before, 1 minute after) are read from the
pending index and re-published instead. The sweeper would publish them anyway.

A failure record is deleted only after its items were handled; one that is not
understood, belongs to another table, or whose publish hit a retryable failure
stays in the queue (and is made visible again). Re-running is safe: published
items are gone from the table, handled records from the queue.
--dry-run reads everything and publishes, deletes and changes nothing.
"""

DEFAULT_MAX_MESSAGES: Final = 100
DEFAULT_VISIBILITY_TIMEOUT: Final = 300
GET_RECORDS_LIMIT: Final = 1000
#: An open shard may answer empty pages before reaching a sequence number; past
#: this many in a row the range is treated as unreadable (and the window used).
MAX_EMPTY_PAGES: Final = 10
#: ULIDs are made by the writer before its transaction commits (and on its clock).
WINDOW_BEFORE: Final = timedelta(minutes=15)
WINDOW_AFTER: Final = timedelta(minutes=1)
#: The range is past the stream's retention, or its shard (or the stream) is gone.
_GONE_CODES: Final = frozenset({"TrimmedDataAccessException", "ResourceNotFoundException"})


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "replay-failures",
        help=HELP,
        description=DESCRIPTION,
        parents=parents,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--queue-url", required=True, help="the stream mapping's on-failure queue")
    sink = parser.add_mutually_exclusive_group()
    sink.add_argument("--bus-name", help="publish to this EventBridge bus (name or ARN)")
    sink.add_argument("--topic-arn", help="publish to this SNS topic")
    parser.add_argument(
        "--max-messages",
        type=int,
        default=DEFAULT_MAX_MESSAGES,
        help=f"handle at most this many failure records per run (default {DEFAULT_MAX_MESSAGES})",
    )
    parser.add_argument(
        "--visibility-timeout",
        type=int,
        default=DEFAULT_VISIBILITY_TIMEOUT,
        help="seconds a received failure record stays hidden while it is handled "
        f"(default {DEFAULT_VISIBILITY_TIMEOUT}); records not deleted are made visible again",
    )
    parser.set_defaults(run=run)


@dataclass(frozen=True)
class BatchInfo:
    shard_id: str
    start: str
    end: str
    stream_arn: str
    first_arrival: datetime | None
    last_arrival: datetime | None


@dataclass
class Outcome:
    message_id: str
    status: str = "handled"
    detail: str = ""
    source: str = "stream"
    stream_records: int = 0
    outbox_inserts: int = 0
    still_pending: list[str] = field(default_factory=list)
    already_gone: int = 0
    quarantined: list[str] = field(default_factory=list)
    publish: dict[str, Any] | None = None
    batch: dict[str, Any] | None = None


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def parse_failure_record(body: str) -> BatchInfo | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    info = data.get("DDBStreamBatchInfo") if isinstance(data, Mapping) else None
    if not isinstance(info, Mapping):
        return None
    fields = [info.get(name) for name in ("shardId", "startSequenceNumber", "endSequenceNumber")]
    arn = info.get("streamArn")
    if not all(isinstance(value, str) and value for value in [*fields, arn]):
        return None
    shard_id, start, end = (str(value) for value in fields)
    if not (start.isdigit() and end.isdigit()) or int(start) > int(end):
        return None
    return BatchInfo(
        shard_id=shard_id,
        start=start,
        end=end,
        stream_arn=str(arn),
        first_arrival=_time(info.get("approximateArrivalOfFirstRecord")),
        last_arrival=_time(info.get("approximateArrivalOfLastRecord")),
    )


def read_range(ctx: Context, batch: BatchInfo) -> tuple[list[Mapping[str, Any]], bool]:
    """The stream records of the batch's range; False when it could not be read to its end.

    Raises the streams client's error when the records are gone (trimmed, shard expired).
    """
    streams = ctx.client("dynamodbstreams")
    iterator = streams.get_shard_iterator(
        StreamArn=batch.stream_arn,
        ShardId=batch.shard_id,
        ShardIteratorType="AT_SEQUENCE_NUMBER",
        SequenceNumber=batch.start,
    ).get("ShardIterator")
    end = int(batch.end)
    records: list[Mapping[str, Any]] = []
    empty = 0
    while iterator:
        response = streams.get_records(ShardIterator=iterator, Limit=GET_RECORDS_LIMIT)
        page = response.get("Records") or []
        for record in page:
            sequence = str(record.get("dynamodb", {}).get("SequenceNumber", ""))
            if sequence.isdigit() and int(sequence) > end:
                return records, True
            records.append(record)
            if sequence.isdigit() and int(sequence) == end:
                return records, True
        empty = 0 if page else empty + 1
        if empty >= MAX_EMPTY_PAGES:
            return records, False
        iterator = response.get("NextShardIterator")
    return records, True  # shard closed: everything it had was read


def outbox_keys(ctx: Context, records: list[Mapping[str, Any]]) -> list[AttributeMap]:
    partition, sort = ctx.table_keys.names
    keys: list[AttributeMap] = []
    for record in records:
        keys_image = record.get("dynamodb", {}).get("Keys") or {}
        if record.get("eventName") != "INSERT":
            continue
        if partition in keys_image and s(keys_image, sort).startswith(OUTBOX_SK_PREFIX):
            keys.append(key_of(keys_image, ctx))
    return keys


def window_keys(ctx: Context, batch: BatchInfo) -> list[AttributeMap] | None:
    if batch.first_arrival is None or batch.last_arrival is None:
        return None
    low = pending_boundary_sk(batch.first_arrival - WINDOW_BEFORE)
    high = pending_boundary_sk(batch.last_arrival + WINDOW_AFTER, upper=True)
    return pending_index_keys(ctx, low_sk=low, high_sk=high)


def handle(ctx: Context, batch: BatchInfo, outcome: Outcome, sink: Any) -> None:
    keys: list[AttributeMap] | None
    try:
        records, complete = read_range(ctx, batch)
        outcome.stream_records = len(records)
        keys = outbox_keys(ctx, records)
        outcome.outbox_inserts = len(keys)
        if not complete:
            outcome.source = "stream (incomplete) + pending index window"
            keys += window_keys(ctx, batch) or []
    except ClientError as exc:
        if error_code(exc) not in _GONE_CODES:
            raise
        keys = window_keys(ctx, batch)
        if keys is None:
            outcome.source = "gone"
            outcome.detail = (
                f"stream records are gone ({error_code(exc)}) and the record has no arrival "
                "times: the sweeper publishes any of its items still pending"
            )
            return
        outcome.source = "pending index window (stream records gone)"
        outcome.detail = f"{error_code(exc)}: stream records are gone; used the pending index"
    items = batch_get(ctx, keys)
    outcome.already_gone = len({key_id(key, ctx.table_keys) for key in keys}) - len(items)
    pending = [item for item in items if is_pending(item)]
    outcome.still_pending = [event_id_of(s(item, ctx.table_keys.sort)) for item in pending]
    outcome.quarantined = [
        event_id_of(s(item, ctx.table_keys.sort))
        for item in items
        if s(item, ATTR_STATUS) == STATUS_QUARANTINED
    ]
    if ctx.dry_run or not pending:
        return
    result, left = publish_items(ctx, pending, sink)
    outcome.publish = {**publish_summary(result), "left_pending": left}
    if left:
        outcome.status = "incomplete"
        outcome.detail = f"{len(left)} events hit a retryable failure; record kept for a re-run"


def run(ctx: Context, args: argparse.Namespace) -> Report:
    url = check_queue_url(args.queue_url)
    if args.max_messages < 1:
        raise bad_input(f"--max-messages must be >= 1, got {args.max_messages}")
    if not 0 <= args.visibility_timeout <= 43_200:
        raise bad_input("--visibility-timeout must be between 0 and 43200 seconds")
    if args.topic_arn:
        check_topic_arn(args.topic_arn)
    # A dry run publishes nothing: it needs no sink (nor its configuration).
    sink = None if ctx.dry_run else make_sink(ctx, args.bus_name, args.topic_arn)
    sqs = ctx.client("sqs")
    seen: set[str] = set()
    to_release: list[str] = []
    outcomes: list[Outcome] = []
    try:
        while len(outcomes) < args.max_messages:
            messages = sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=min(10, args.max_messages - len(outcomes)),
                WaitTimeSeconds=0,
                VisibilityTimeout=args.visibility_timeout,
            ).get("Messages", [])
            fresh = [m for m in messages if m["MessageId"] not in seen]
            if not fresh:
                break
            for message in fresh:
                seen.add(message["MessageId"])
                # Made visible again at the end unless deleted, even if this run fails.
                to_release.append(message["ReceiptHandle"])
                outcome = Outcome(message_id=message["MessageId"])
                outcomes.append(outcome)
                batch = parse_failure_record(message.get("Body", ""))
                if batch is None:
                    outcome.status = "skipped"
                    outcome.detail = "not a DynamoDB stream failure record"
                elif stream_table(batch.stream_arn) != ctx.table:
                    outcome.status = "skipped"
                    outcome.detail = f"stream {batch.stream_arn} is not table {ctx.table}'s"
                else:
                    outcome.batch = {
                        "shard_id": batch.shard_id,
                        "start_sequence_number": batch.start,
                        "end_sequence_number": batch.end,
                        "stream_arn": batch.stream_arn,
                    }
                    handle(ctx, batch, outcome, sink)
                if outcome.status == "handled" and not ctx.dry_run:
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                    to_release.remove(message["ReceiptHandle"])
    except (ClientError, BotoCoreError) as exc:
        raise OpsError(explain(exc, ctx, url)) from None
    finally:
        for receipt in to_release:  # back in the queue at once, for the next run
            # If this fails, the record reappears after its visibility timeout anyway.
            with contextlib.suppress(ClientError, BotoCoreError):
                sqs.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=receipt, VisibilityTimeout=0
                )
    return _report(ctx, url, outcomes)


def _report(ctx: Context, url: str, outcomes: list[Outcome]) -> Report:
    report = Report()
    report.data = {
        "queue_url": url,
        "table": ctx.table,
        "dry_run": ctx.dry_run,
        "failure_records": [outcome.__dict__ for outcome in outcomes],
    }
    if not outcomes:
        report.say(f"no failure records in {url}: nothing to replay")
    for outcome in outcomes:
        where = ""
        if outcome.batch:
            where = (
                f" shard {outcome.batch['shard_id']} "
                f"{outcome.batch['start_sequence_number']}..{outcome.batch['end_sequence_number']}"
            )
        line = f"{outcome.message_id}:{where} [{outcome.status}, from {outcome.source}]"
        if outcome.status != "skipped":
            line += (
                f" records={outcome.stream_records} outbox_inserts={outcome.outbox_inserts}"
                f" pending={len(outcome.still_pending)} already_published={outcome.already_gone}"
                f" quarantined={len(outcome.quarantined)}"
            )
        if outcome.publish is not None:
            line += f" published={outcome.publish['published']}"
        report.say(line)
        if outcome.detail:
            report.say(f"  {outcome.detail}")
        if outcome.quarantined:
            report.say(f"  quarantined (see `release`): {', '.join(outcome.quarantined)}")
        if ctx.dry_run and outcome.still_pending:
            report.say(f"  dry run: would publish {', '.join(outcome.still_pending)}")
    if ctx.dry_run:
        report.say("dry run: nothing published, deleted or changed")
    if any(outcome.status == "incomplete" for outcome in outcomes):
        report.exit_code = EXIT_INCOMPLETE
    return report
