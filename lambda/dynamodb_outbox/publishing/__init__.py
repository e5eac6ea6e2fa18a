"""The publishing core shared by the stream publisher and the sweeper.

:func:`publish_outbox_items` takes outbox items, whichever path found them, and
publishes them in order: same planning, batching, failure rules, quarantine
and delete for both paths. The rules, and why, are in :mod:`dynamodb_outbox.publisher`.

On a sink that keeps order per subject (SNS FIFO, ``rules.orders_by_subject``)
two more rules keep one subject's events in the order given:

* a call carries at most one entry per subject: AWS keeps the order of the
  entries of one ``PublishBatch`` but does not say that a failed entry fails
  the later entries of its group, so a later one could get through alone;
* an entry of a subject that fails retryably holds every later entry of that
  subject until it is published; the held entries go out after it (in the
  same invocation when its retry succeeds), never before. What is still held
  when time runs out is part of the checkpoint.

A poison event of a subject is quarantined and the subject moves on (a gap,
with the ``QuarantinedEvents`` alarm; docs/decisions.md says why).

The pieces live in private modules, one concern each:

- ``_dependencies``: what a publication takes and gives back
  (:func:`table_client`, :class:`PublishDependencies`, :class:`RetryPolicy`,
  :class:`PublishResult`) and the publisher's logger;
- ``_plan``: :class:`OutboxCandidate`, read once into an event or a poison;
- ``_publication``: the send/retry loop (:class:`Publication`,
  :func:`publish_outbox_items`);
- ``_settle``: the writes back to the table (quarantine markers, deletes), by key;
- ``_errors``: :func:`describe_error` and how a failed request is classified.
"""

from __future__ import annotations

from dynamodb_outbox._clock import utc_now
from dynamodb_outbox.publishing._dependencies import (
    DEFAULT_DELETE_RETRIES as DEFAULT_DELETE_RETRIES,
)
from dynamodb_outbox.publishing._dependencies import DEFAULT_RETRY as DEFAULT_RETRY
from dynamodb_outbox.publishing._dependencies import DEFAULT_SERVICE_NAME as DEFAULT_SERVICE_NAME
from dynamodb_outbox.publishing._dependencies import (
    PublishDependencies,
    PublisherDynamoDBClient,
    PublishResult,
    RetryPolicy,
    table_client,
)
from dynamodb_outbox.publishing._dependencies import logger as logger
from dynamodb_outbox.publishing._errors import MAX_REASON_CHARS as MAX_REASON_CHARS
from dynamodb_outbox.publishing._errors import describe_error
from dynamodb_outbox.publishing._plan import OutboxCandidate
from dynamodb_outbox.publishing._publication import (
    OVERLAP_MIN_WAIT_SECONDS as OVERLAP_MIN_WAIT_SECONDS,
)
from dynamodb_outbox.publishing._publication import Publication, publish_outbox_items
from dynamodb_outbox.publishing._settle import BATCH_WRITE_MAX_ITEMS as BATCH_WRITE_MAX_ITEMS
from dynamodb_outbox.publishing._settle import (
    DELETE_BACKOFF_BASE_SECONDS as DELETE_BACKOFF_BASE_SECONDS,
)
from dynamodb_outbox.publishing._settle import (
    DELETE_BACKOFF_MAX_SECONDS as DELETE_BACKOFF_MAX_SECONDS,
)
from dynamodb_outbox.stream_types import lookup, string_attribute

__all__ = [
    "OutboxCandidate",
    "Publication",
    "PublishDependencies",
    "PublishResult",
    "PublisherDynamoDBClient",
    "RetryPolicy",
    "describe_error",
    "lookup",
    "publish_outbox_items",
    "string_attribute",
    "table_client",
    "utc_now",
]
