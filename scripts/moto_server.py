#!/usr/bin/env python3
"""Run a moto server that answers SQS queue attributes the way SQS does.

Three differences between moto (5.2.5, the pinned version) and AWS matter to the
module's consumer queues (the third, an EventBridge event delivered without its
``account``, is described at :func:`deliver_event_account`):

* moto accepts ``RedriveAllowPolicy`` in ``CreateQueue``/``SetQueueAttributes``
  but never returns it from ``GetQueueAttributes``. The module sets a
  redrive-allow policy on every consumer DLQ, and the aws provider waits after
  creating a queue until it reads back every attribute it set: against plain
  moto that wait times out (3 min) and the apply fails.
* moto returns ``RedrivePolicy`` as ``json.dumps`` writes it, with spaces; SQS
  returns compact JSON (``{"deadLetterTargetArn":"arn:...","maxReceiveCount":5}``,
  as in the AWS CLI reference). The provider compares it with the configured
  ``jsonencode(...)`` verbatim, so every plan against plain moto shows a
  "whitespace changes" update of each queue with a DLQ.

This wrapper fixes both, then starts moto's own server with the same arguments::

    .venv/bin/python scripts/moto_server.py -H 127.0.0.1 -p 5000

Only the server process started this way is changed; moto is not patched on
disk, and in-process ``mock_aws`` tests are not affected.
"""

from __future__ import annotations

import json
import sys
from typing import Any

REDRIVE_ALLOW_POLICY = "RedriveAllowPolicy"
REDRIVE_POLICY = "RedrivePolicy"


def keep_redrive_allow_policy() -> None:
    """Make moto's SQS queues store and return ``RedriveAllowPolicy``.

    moto's ``Queue`` already stores unknown attributes under their snake_case
    name (``redrive_allow_policy``); it only leaves them out of
    ``BASE_ATTRIBUTES``, the list it answers ``GetQueueAttributes`` from (and
    validates attribute names against). A class-level ``None`` default covers
    queues created without one: moto drops ``None`` values from its answers.
    """
    from moto.sqs.models import Queue

    if REDRIVE_ALLOW_POLICY not in Queue.BASE_ATTRIBUTES:
        Queue.BASE_ATTRIBUTES.append(REDRIVE_ALLOW_POLICY)
    if not hasattr(Queue, "redrive_allow_policy"):
        Queue.redrive_allow_policy = None


def compact_redrive_policy() -> None:
    """Make moto return ``RedrivePolicy`` as compact JSON, as SQS does."""
    from moto.sqs.models import Queue

    original = Queue.attributes
    if getattr(original.fget, "_compact_redrive_policy", False):
        return

    def attributes(self: Any) -> dict[str, Any]:
        result: dict[str, Any] = original.fget(self)  # type: ignore[misc]
        if isinstance(result.get(REDRIVE_POLICY), str):
            policy = json.loads(result[REDRIVE_POLICY])
            result[REDRIVE_POLICY] = json.dumps(policy, separators=(",", ":"))
        return result

    patched = property(attributes)
    patched.fget._compact_redrive_policy = True  # type: ignore[attr-defined]
    Queue.attributes = patched  # type: ignore[method-assign,assignment]


#: What moto (5.2.5) writes into an event it delivers to a target with no input
#: transformer; AWS delivers the whole event, whose ``account`` moto leaves out.
_MOTO_EVENT_TEMPLATE = (
    '{"id": "<id>", "time": <time>, "version": "0", "detail-type": "<detail-type>", '
    '"source": "<source>", "region": "<region>", "resources": <resources>, "detail": <detail>}'
)


def deliver_event_account() -> None:
    """Make moto's EventBridge targets receive the event's ``account``, as AWS's do.

    An event delivered to an SQS target carries version, id, detail-type,
    source, account, time, region, resources and detail (EventBridge User
    Guide, "Amazon EventBridge events"); consumers check ``account``
    (dynamodb_outbox.sender_checks). moto builds the delivered event from a
    template without it. Only that exact template is changed, so a later moto
    that fixed it is left alone.
    """
    from moto.events.utils import EventTemplateParser

    if EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE == _MOTO_EVENT_TEMPLATE:
        EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE = _MOTO_EVENT_TEMPLATE.replace(
            '"source": "<source>", ', '"source": "<source>", "account": "<account>", '
        )


def patch_moto() -> None:
    """Every fix above; idempotent, for a server started in this process."""
    keep_redrive_allow_policy()
    compact_redrive_policy()
    deliver_event_account()


def main(argv: list[str] | None = None) -> None:
    patch_moto()
    from moto.server import main as moto_main

    moto_main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
