"""``outbox-ops redrive``: move a consumer DLQ's messages back (SQS StartMessageMoveTask)."""

from __future__ import annotations

import argparse
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from dynamodb_outbox.ops._arns import parse_queue_arn
from dynamodb_outbox.ops._context import Context, Report
from dynamodb_outbox.ops._errors import OpsError, bad_input, explain

# What cli.py uses: the command's parser, whose default runs it. The CLI is the public face.
__all__ = ["add_parser"]

HELP: Final = "move a consumer dead-letter queue's messages back (SQS StartMessageMoveTask)"

DESCRIPTION: Final = """\
Starts an SQS message move task out of --dlq-arn: back to the queues whose
redrive policy names it (default), or to --destination-arn. SQS only moves
messages out of a DLQ whose sources are SQS queues, so this is for the
consumer queues' DLQs; the stream mapping's on-failure queue holds metadata,
not events: use replay-failures for that one.

Safe to re-run: when a move task is already running on the DLQ its handle is
printed and nothing new is started; an empty DLQ starts nothing.
--dry-run prints the approximate message count and where they would go.
"""


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "redrive",
        help=HELP,
        description=DESCRIPTION,
        parents=parents,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dlq-arn", required=True, help="the dead-letter queue's ARN")
    parser.add_argument(
        "--destination-arn",
        help="the queue ARN to move to (default: the DLQ's source queues)",
    )
    parser.add_argument(
        "--max-per-second",
        type=int,
        default=None,
        help="MaxNumberOfMessagesPerSecond (1-500; default: SQS's own rate)",
    )
    parser.set_defaults(run=run)


def run(ctx: Context, args: argparse.Namespace) -> Report:
    dlq = parse_queue_arn(args.dlq_arn, "--dlq-arn")
    destination = None
    if args.destination_arn:
        destination = parse_queue_arn(args.destination_arn, "--destination-arn").arn
    if args.max_per_second is not None and not 1 <= args.max_per_second <= 500:
        raise bad_input(f"--max-per-second must be between 1 and 500, got {args.max_per_second}")
    sqs = ctx.client("sqs")
    try:
        url = sqs.get_queue_url(QueueName=dlq.name, QueueOwnerAWSAccountId=dlq.account)["QueueUrl"]
        attributes = sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        ).get("Attributes", {})
    except (ClientError, BotoCoreError) as exc:
        raise OpsError(explain(exc, ctx, dlq.arn)) from None
    visible = int(attributes.get("ApproximateNumberOfMessages", 0))
    in_flight = int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0))
    report = Report()
    report.data = {
        "dlq_arn": dlq.arn,
        "destination_arn": destination,
        "approximate_messages": visible,
        "approximate_in_flight": in_flight,
        "dry_run": ctx.dry_run,
        "task_handle": None,
        "started": False,
    }
    where = destination or "its source queues"
    if destination is None:
        sources = sqs.list_dead_letter_source_queues(QueueUrl=url).get("queueUrls", [])
        report.data["source_queue_urls"] = sources
        if sources:
            where = "its source queues " + ", ".join(sources)
        elif not ctx.dry_run:
            raise OpsError(
                f"no queue names {dlq.arn} as its dead-letter queue: pass --destination-arn"
            )
        else:
            where = "nowhere: no queue names it as its dead-letter queue (pass --destination-arn)"
    running = [
        task
        for task in sqs.list_message_move_tasks(SourceArn=dlq.arn, MaxResults=10).get("Results", [])
        if task.get("Status") == "RUNNING"
    ]
    if running:
        handle = running[0].get("TaskHandle")
        report.data["task_handle"] = handle
        report.say(f"a move task is already running on {dlq.arn}: {handle} (nothing started)")
        return report
    report.say(f"{dlq.arn}: ~{visible} messages (~{in_flight} in flight)")
    if ctx.dry_run:
        report.say(f"dry run: would move ~{visible} messages to {where}")
        return report
    if visible == 0:
        report.say("nothing to redrive")
        return report
    request: dict[str, Any] = {"SourceArn": dlq.arn}
    if destination:
        request["DestinationArn"] = destination
    if args.max_per_second is not None:
        request["MaxNumberOfMessagesPerSecond"] = args.max_per_second
    handle = sqs.start_message_move_task(**request)["TaskHandle"]
    report.data["task_handle"] = handle
    report.data["started"] = True
    report.say(f"started moving ~{visible} messages to {where}; task handle: {handle}")
    return report
