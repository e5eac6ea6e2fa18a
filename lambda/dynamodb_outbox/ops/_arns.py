"""The operator's inputs checked: queue and stream ARNs, topic ARNs, queue URLs, event ids."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from dynamodb_outbox.event_ids import event_id_milliseconds
from dynamodb_outbox.ops._errors import bad_input
from dynamodb_outbox.sizes import FIFO_SUFFIX

_FIFO: Final = f"(?:{re.escape(FIFO_SUFFIX)})?"


_SQS_ARN: Final = re.compile(
    rf"arn:(aws[a-z-]*):sqs:([a-z0-9-]+):(\d{{12}}):([A-Za-z0-9_-]{{1,80}}{_FIFO})"
)


_STREAM_ARN: Final = re.compile(
    r"arn:(aws[a-z-]*):dynamodb:([a-z0-9-]+):(\d{12}):table/([A-Za-z0-9_.-]{3,255})/stream/(.+)"
)


@dataclass(frozen=True)
class QueueArn:
    arn: str
    region: str
    account: str
    name: str


def parse_queue_arn(arn: str, option: str) -> QueueArn:
    found = _SQS_ARN.fullmatch(arn)
    if not found:
        raise bad_input(
            f"{option} must be an SQS queue ARN (arn:aws:sqs:<region>:<account>:<name>), "
            f"got {arn!r}"
        )
    return QueueArn(arn=arn, region=found.group(2), account=found.group(3), name=found.group(4))


def check_topic_arn(arn: str) -> str:
    from dynamodb_outbox.sinks import parse_topic_arn

    try:
        return parse_topic_arn(arn).arn
    except ValueError as exc:
        raise bad_input(f"--topic-arn {exc}") from None


def stream_table(stream_arn: str) -> str | None:
    """The table a DynamoDB stream ARN belongs to, or None if it is not one."""
    found = _STREAM_ARN.fullmatch(stream_arn)
    return found.group(4) if found else None


def check_queue_url(url: str) -> str:
    if not re.fullmatch(rf"https?://\S+/\d{{12}}/[A-Za-z0-9_-]{{1,80}}{_FIFO}", url):
        raise bad_input(
            f"--queue-url must be an SQS queue URL (https://sqs.<region>.amazonaws.com/"
            f"<account>/<name>), got {url!r}"
        )
    return url


def check_event_id(event_id: str) -> str:
    try:
        event_id_milliseconds(event_id)
    except ValueError:
        raise bad_input(f"--event-id must be a ULID (26 characters), got {event_id!r}") from None
    return event_id
