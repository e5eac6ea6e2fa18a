"""Publishing from a command, through the publisher's own core.

The publishing core (and Powertools with it) is imported on first use, so
``outbox-ops --help`` and the read-only commands stay fast.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from dynamodb_outbox.ops._arns import check_topic_arn
from dynamodb_outbox.ops._context import AttributeMap, Context, key_of, s
from dynamodb_outbox.ops._errors import bad_input
from dynamodb_outbox.ops._formatting import event_id_of

if TYPE_CHECKING:
    from dynamodb_outbox.publishing import PublishResult
    from dynamodb_outbox.sinks import Sink


def make_sink(ctx: Context, bus_name: str | None, topic_arn: str | None) -> Sink:
    """The sink the flags name; without flags, the publisher's environment variables."""
    from dynamodb_outbox.settings import ConfigurationError, sink_from_environment
    from dynamodb_outbox.sinks import EventBridgeSink, SnsSink

    try:
        if bus_name:
            return EventBridgeSink(ctx.client("events"), bus_name)
        if topic_arn:
            return SnsSink(ctx.client("sns"), check_topic_arn(topic_arn))
        return sink_from_environment(client_factory=ctx.client)
    except ConfigurationError as exc:
        raise bad_input(f"pass --bus-name or --topic-arn ({exc})") from None
    except ValueError as exc:  # a sink refusing its bus name or topic ARN
        raise bad_input(str(exc)) from None


@contextlib.contextmanager
def publisher_logs_to_stderr() -> Iterator[None]:
    """The publisher logs JSON to stdout (Lambda's log stream); here stdout is the report."""
    from dynamodb_outbox import publishing

    handler = publishing.logger.registered_handler
    if not isinstance(handler, logging.StreamHandler):
        yield
        return
    # Swapped without setStream: that flushes the old stream, which may be closed.
    previous = handler.stream
    handler.stream = sys.stderr
    try:
        yield
    finally:
        handler.stream = previous


def publish_items(
    ctx: Context, items: Sequence[AttributeMap], sink: Sink
) -> tuple[PublishResult, list[str]]:
    """Publish pending ``items`` through the publisher's core; also the event ids left pending."""
    from dynamodb_outbox.publishing import (
        OutboxCandidate,
        PublishDependencies,
        publish_outbox_items,
    )

    sort = ctx.table_keys.sort
    candidates = [
        OutboxCandidate(
            key=key_of(item, ctx), item=item, position=position, checkpoint=s(item, sort)
        )
        for position, item in enumerate(items)
    ]
    with publisher_logs_to_stderr():
        deps = PublishDependencies(
            sink, ctx.table, ctx.client("dynamodb"), table_keys=ctx.table_keys
        )
        result = publish_outbox_items(candidates, deps)
    left: list[str] = []
    if result.failure_position is not None:
        left = [event_id_of(s(item, sort)) for item in items[result.failure_position :]]
    elif result.stopped_at_position is not None:
        left = [event_id_of(s(item, sort)) for item in items[result.stopped_at_position :]]
    return result, left


def publish_summary(result: PublishResult) -> dict[str, Any]:
    return {
        "published": result.published,
        "deleted": result.deleted,
        "quarantined": result.quarantined,
        "retryable_failures": result.retryable_failures,
        "delete_leftovers": result.delete_leftovers,
    }
