"""The exit codes of ``outbox-ops``, and AWS errors explained in one line for the operator."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from botocore.exceptions import BotoCoreError, ClientError

if TYPE_CHECKING:
    from dynamodb_outbox.ops._context import Context

EXIT_OK: Final = 0


#: AWS said no (missing table, queue, permission) or could not be reached.
EXIT_AWS_ERROR: Final = 1


#: Bad input: arguments, ARNs, ids (argparse uses 2 as well).
EXIT_BAD_INPUT: Final = 2


#: The command ran but left work undone (a retryable publish failure...): re-run it.
EXIT_INCOMPLETE: Final = 3


# "User: arn:... is not authorized to perform: dynamodb:Query on resource: arn:..."
_DENIED: Final = re.compile(r"perform: ([\w-]+:\w+) on resource: (\S+?)[\s,.]*(?:\s|$)")


class OpsError(Exception):
    """A one-line message for the operator and the exit code that goes with it."""

    def __init__(self, message: str, exit_code: int = EXIT_AWS_ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def bad_input(message: str) -> OpsError:
    return OpsError(message, EXIT_BAD_INPUT)


def error_code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or "")
    return type(exc).__name__


def explain_client_error(exc: ClientError, ctx: Context | None, resource: str | None) -> str:
    """One line naming what is missing or forbidden, never a traceback."""
    code = error_code(exc)
    message = str(exc.response.get("Error", {}).get("Message") or "").strip()
    operation = exc.operation_name or "call"
    region = ctx.region if ctx is not None else "?"
    if code in {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"} or (
        "not authorized to perform" in message
    ):
        found = _DENIED.search(message)
        if found:
            return f"missing permission {found.group(1)} on {found.group(2)}"
        service = _service_of(exc)
        if service == "dynamodb" and ctx is not None:
            streams = {"GetShardIterator", "GetRecords", "DescribeStream"}
            resource = f"{'the stream of ' if operation in streams else ''}table {ctx.table}"
        return f"missing permission {service}:{operation} on {resource or 'the resource'}"
    if code in {"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"}:
        return f"queue {resource or '?'} not found in region {region}"
    if code == "ResourceNotFoundException" and _service_of(exc) == "dynamodb":
        if operation in {"GetShardIterator", "GetRecords", "DescribeStream"}:
            return f"stream or shard {resource or '?'} not found in region {region}"
        table = ctx.table if ctx is not None else "?"
        return f"table {table} not found in region {region}"
    if code == "ValidationException" and "specified index" in message and ctx is not None:
        return (
            f"index {ctx.pending_index} not found on table {ctx.table} "
            f"(pass --pending-index): {message}"
        )
    return f"{operation} failed: {code or 'error'}: {message or exc}"


def _service_of(exc: ClientError) -> str:
    # botocore puts the service id nowhere on the exception; the operation names
    # of the clients used here do not overlap, so a table lookup is enough.
    dynamodb_ops = {
        "Query",
        "Scan",
        "GetItem",
        "BatchGetItem",
        "UpdateItem",
        "BatchWriteItem",
        "DescribeTable",
        "GetShardIterator",
        "GetRecords",
        "DescribeStream",
    }
    operation = exc.operation_name or ""
    if operation in dynamodb_ops:
        return "dynamodb"
    if operation in {
        "PutEvents",
        "DescribeArchive",
        "DescribeRule",
        "StartReplay",
        "DescribeReplay",
    }:
        return "events"
    if operation in {"PublishBatch", "Publish"}:
        return "sns"
    return "sqs"


def explain(exc: BaseException, ctx: Context | None, resource: str | None = None) -> str:
    if isinstance(exc, ClientError):
        return explain_client_error(exc, ctx, resource)
    if isinstance(exc, BotoCoreError):
        return f"AWS call failed: {exc}"
    return str(exc)
