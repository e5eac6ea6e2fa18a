#!/usr/bin/env python3
"""Run a moto server that answers SQS queue attributes the way SQS does.

Three differences between moto (5.2.5, the pinned version) and AWS matter to the
module's consumer queues (the third, an EventBridge event delivered without its
``account``, is fixed by :func:`dynamodb_outbox.local.moto_events.deliver_event_account`,
which in-process runs and the testing kit use too, as they use
:func:`~dynamodb_outbox.local.moto_events.forward_events_as_aws`, an event forwarded
to another region's bus keeping its origin):

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

from dynamodb_outbox.local.moto_events import deliver_event_account, forward_events_as_aws

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


def patch_moto() -> None:
    """Every fix above; idempotent, for a server started in this process."""
    keep_redrive_allow_policy()
    compact_redrive_policy()
    deliver_event_account()
    forward_events_as_aws()


def main(argv: list[str] | None = None) -> None:
    patch_moto()
    from moto.server import main as moto_main

    moto_main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
