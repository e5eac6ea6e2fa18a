"""The writes back to the outbox table: quarantine markers, and deletes of what was published.

They take table keys, not the core's plans. Deletes go in ``BatchWriteItem``
chunks with backoff, within the invocation's time; a request that can never be
sent is split so that only the key at fault is left over (for the sweeper).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from dynamodb_outbox._clock import iso_milliseconds
from dynamodb_outbox.log_keys import loggable_key
from dynamodb_outbox.outbox_item import (
    ATTR_PENDING_SHARD,
    ATTR_QUARANTINE_REASON,
    ATTR_QUARANTINED_AT,
    ATTR_STATUS,
    STATUS_QUARANTINED,
)
from dynamodb_outbox.publishing._dependencies import (
    PublishDependencies,
    PublisherDynamoDBClient,
    PublishResult,
    logger,
)
from dynamodb_outbox.publishing._errors import (
    _REQUEST_BUILD_ERRORS,
    MAX_REASON_CHARS,
    _error_code,
    _never_sendable,
    describe_error,
)
from dynamodb_outbox.stream_types import AttributeMap

__all__ = ["BATCH_WRITE_MAX_ITEMS", "TableWrites"]

BATCH_WRITE_MAX_ITEMS: Final = 25
DELETE_BACKOFF_BASE_SECONDS: Final = 0.05
DELETE_BACKOFF_MAX_SECONDS: Final = 1.0

# Leaving the sparse pending index (REMOVE the shard) is what stops the sweeper
# from picking the poison item up again.
_QUARANTINE_UPDATE: Final = "SET #status = :status, #reason = :reason, #at = :at REMOVE #pending"

# A delete retry never starts with less time than this left: a duplicate later
# (the sweeper re-publishes the item) beats a timeout that fails the batch now.
_DELETE_FLOOR_SECONDS: Final = 0.5


def _identity(key: AttributeMap) -> object:
    """The same value for equal keys, whatever their attributes' order: one delete each."""
    try:
        return frozenset((name, *value.items()) for name, value in key.items())
    except (AttributeError, TypeError):  # not attribute values: never equal to another
        return json.dumps(key, sort_keys=True, default=repr)


class TableWrites:
    """The writes of one publication back to its table, counted in its result.

    Called from the caller's thread and from the deletes' worker thread.
    """

    def __init__(
        self,
        deps: PublishDependencies[PublisherDynamoDBClient],
        *,
        result: PublishResult,
        time_left: Callable[[], float] | None = None,
    ) -> None:
        self.table_name = deps.table_name
        self.dynamodb = deps.dynamodb_client
        self.sleep = deps.sleep
        self.clock = deps.clock
        self.delete_retries = deps.delete_retries
        self.table_keys = deps.table_keys
        self.result = result
        self.time_left = time_left

    def quarantine(self, key: AttributeMap, checkpoint: str | None, reason: str) -> bool:
        """Mark the item poison; False when that must be retried (the marker would be lost)."""
        # Whatever text an exception carried, the reason must be storable.
        reason = reason.encode("utf-8", "backslashreplace").decode("utf-8")[:MAX_REASON_CHARS]
        self.result.quarantine_calls += 1
        log_fields = {
            "reason": reason,
            "key": loggable_key(key, self.table_keys),
            "checkpoint": checkpoint,
        }
        try:
            self.dynamodb.update_item(
                TableName=self.table_name,
                Key=key,
                UpdateExpression=_QUARANTINE_UPDATE,
                # An item that is gone was published and deleted (e.g. by the
                # sweeper): UpdateItem must not bring it back as a stub.
                ConditionExpression="attribute_exists(#sk)",
                ExpressionAttributeNames={
                    "#status": ATTR_STATUS,
                    "#reason": ATTR_QUARANTINE_REASON,
                    "#at": ATTR_QUARANTINED_AT,
                    "#pending": ATTR_PENDING_SHARD,
                    "#sk": self.table_keys.sort,
                },
                ExpressionAttributeValues={
                    ":status": {"S": STATUS_QUARANTINED},
                    ":reason": {"S": reason},
                    ":at": {"S": iso_milliseconds(self.clock())},
                },
            )
        except Exception as exc:
            code = _error_code(exc)
            if code == "ConditionalCheckFailedException":
                self.result.quarantine_item_gone += 1
                logger.info(
                    "poison record's item is already gone; nothing to quarantine", extra=log_fields
                )
                return True
            never_writable = code == "ValidationException" or isinstance(exc, _REQUEST_BUILD_ERRORS)
            if never_writable or not isinstance(exc, ClientError | BotoCoreError):
                # DynamoDB will never take this write (a key that fits no item, an
                # item the marker would push over 400 KB): retrying would hold the
                # batch forever. The item stays in the pending index, where the
                # oldest-pending alarm and `outbox-ops pending` show it.
                self.result.quarantine_unmarkable += 1
                logger.error(
                    "poison item cannot be marked; it stays pending for an operator",
                    extra={**log_fields, "error_code": code, "error": describe_error(exc)},
                )
                return True
            # Every other error, throttling or not, is retried: skipping would
            # leave a poison item in the pending index with no marker on it.
            self.result.retryable_failures += 1
            logger.warning(
                "quarantine failed; checkpointing",
                extra={**log_fields, "error_code": code, "error": str(exc)},
            )
            return False
        self.result.quarantined += 1
        logger.warning("event quarantined", extra=log_fields)
        return True

    def delete_chunk(self, keys: list[AttributeMap]) -> None:
        pending: list[dict[str, Any]] = [{"DeleteRequest": {"Key": key}} for key in keys]
        retries = 0
        while True:
            self.result.delete_calls += 1
            try:
                response = self.dynamodb.batch_write_item(RequestItems={self.table_name: pending})
                unprocessed = list(response.get("UnprocessedItems", {}).get(self.table_name, []))
            except Exception as exc:
                if _never_sendable(exc):
                    # The request can never go (a key botocore cannot serialise, or
                    # one DynamoDB refuses): retrying it is pointless. Each key is
                    # deleted on its own, so only the key at fault is left over.
                    self._delete_unsendable(pending, exc)
                    return
                if not isinstance(exc, ClientError | BotoCoreError):
                    raise  # not the request's fault: the invocation fails, the batch is retried
                # Same as "nothing processed": retried within the same budget, and
                # never a batch failure (the events are already out).
                logger.warning(
                    "BatchWriteItem failed",
                    extra={
                        "error": describe_error(exc),
                        "error_code": _error_code(exc),
                        "deletes": len(pending),
                    },
                )
                unprocessed = pending
            self.result.deleted += len(pending) - len(unprocessed)
            pending = unprocessed
            if not pending:
                return
            if retries >= self.delete_retries:
                break
            retries += 1
            delay = min(
                DELETE_BACKOFF_MAX_SECONDS, DELETE_BACKOFF_BASE_SECONDS * 2 ** (retries - 1)
            )
            if self.time_left is not None and self.time_left() - delay < _DELETE_FLOOR_SECONDS:
                break  # never past the timeout for a delete: the sweeper redoes it
            self.sleep(delay)
        self._leave_over(pending)

    def _delete_unsendable(self, pending: list[dict[str, Any]], exc: Exception) -> None:
        logger.warning(
            "BatchWriteItem request can never be sent; its keys are deleted one by one",
            extra={
                "error": describe_error(exc),
                "error_code": _error_code(exc),
                "deletes": len(pending),
            },
        )
        if len(pending) == 1:
            self._leave_over(pending)
            return
        for request in pending:
            self.delete_chunk([request["DeleteRequest"]["Key"]])

    def _leave_over(self, pending: list[dict[str, Any]]) -> None:
        self.result.delete_leftovers += len(pending)
        logger.warning(
            "published outbox items left undeleted; the sweeper will publish them again",
            extra={
                "count": len(pending),
                "keys": [
                    loggable_key(request["DeleteRequest"]["Key"], self.table_keys)
                    for request in pending
                ],
            },
        )
