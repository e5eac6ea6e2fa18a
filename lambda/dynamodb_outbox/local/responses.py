"""How Lambda reads a function's answer to a batch (partial batch responses).

Without ``ReportBatchItemFailures`` on the mapping the body is ignored: the
batch succeeded unless the function raised. With it, the documented rules
("Configuring partial batch response…", "Handling errors for an SQS event
source") are:

* full success: a null response, an empty object, a null or empty
  ``batchItemFailures`` list;
* full failure: an ``itemIdentifier`` that is an empty string or null, or an
  entry whose key is spelt differently (``ItemIdentifier``, ``messageId``…);
  a raised exception.

Where the documentation is silent the runtime picks the reading that can never
lose a record, and says so in the verdict's reason:

* an ``itemIdentifier`` naming no record of the batch → full failure (the SQS
  page lists an unknown message id as a full failure; the stream pages do not
  say, and treating it as success would checkpoint past records nobody
  processed);
* a response that is not a JSON object, a ``batchItemFailures`` that is not a
  list, an entry that is not an object or an identifier that is not a string
  → full failure.

A response object without a ``batchItemFailures`` key is the documented "empty
EventResponse": success — so a misspelt *top-level* key loses the failures it
meant to report, exactly as in AWS.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

__all__ = ["BatchVerdict", "judge_response", "whole_batch_failure"]

ITEM_IDENTIFIER = "itemIdentifier"
BATCH_ITEM_FAILURES = "batchItemFailures"


@dataclass(frozen=True)
class BatchVerdict:
    """What Lambda concludes from one invocation.

    ``failed_ids`` is ``()`` for a full success, the reported identifiers for a
    partial failure, and ``None`` when the whole batch failed.
    """

    failed_ids: tuple[str, ...] | None
    reason: str

    @property
    def succeeded(self) -> bool:
        return self.failed_ids == ()

    @property
    def whole_batch_failed(self) -> bool:
        return self.failed_ids is None


SUCCESS = BatchVerdict((), "success")


def whole_batch_failure(reason: str) -> BatchVerdict:
    return BatchVerdict(None, reason)


def judge_response(
    response: Any, *, report_batch_item_failures: bool, batch_ids: Collection[str]
) -> BatchVerdict:
    """The verdict on a response returned (not raised) by the function."""
    if not report_batch_item_failures or response is None:
        return SUCCESS
    if not isinstance(response, dict):
        return whole_batch_failure(f"response is not a JSON object: {response!r}")
    failures = response.get(BATCH_ITEM_FAILURES)
    if failures is None or failures == []:
        return SUCCESS
    if not isinstance(failures, list):
        return whole_batch_failure(f"{BATCH_ITEM_FAILURES} is not a list: {failures!r}")
    failed: list[str] = []
    for entry in failures:
        if not isinstance(entry, dict):
            return whole_batch_failure(f"batch item failure is not an object: {entry!r}")
        if ITEM_IDENTIFIER not in entry:
            return whole_batch_failure(
                f"batch item failure has no {ITEM_IDENTIFIER!r} key: {entry!r}"
            )
        identifier = entry[ITEM_IDENTIFIER]
        if identifier is None or identifier == "":
            return whole_batch_failure(f"{ITEM_IDENTIFIER} is null or empty: {entry!r}")
        if not isinstance(identifier, str):
            return whole_batch_failure(f"{ITEM_IDENTIFIER} is not a string: {identifier!r}")
        if identifier not in batch_ids:
            return whole_batch_failure(f"{ITEM_IDENTIFIER} {identifier!r} is not in the batch")
        if identifier not in failed:
            failed.append(identifier)
    return BatchVerdict(tuple(failed), "partial failure")
