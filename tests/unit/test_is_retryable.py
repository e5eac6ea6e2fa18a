"""``is_retryable``: one answer to "may the same write succeed if sent again?".

Errors reach it the way a caller meets them: raised by ``OutboxWriter.write`` on
botocore's Stubber (responses shaped by the API model, botocore's own retries
off so the error is the caller's to handle).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import (
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from botocore.stub import Stubber

from dynamodb_outbox import is_retryable
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.writer import InvalidWrite, OutboxWriter

TABLE = "orders"
ORDER = {"PK": "ORDER#1", "SK": "META"}


@pytest.fixture
def stubbed() -> Iterator[tuple[OutboxWriter, Stubber]]:
    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )
    with Stubber(client) as stubber:
        yield OutboxWriter(TABLE, client), stubber


def placed() -> Envelope:
    return Envelope(type="OrderPlaced", source="shop.orders", subject="ORDER#1", data={})


def raised_by_write(writer: OutboxWriter) -> Exception:
    with pytest.raises(Exception) as caught:
        writer.write(ORDER, placed(), client_request_token="order-1")
    assert isinstance(caught.value, Exception)
    return caught.value


@pytest.mark.parametrize(
    ("codes", "retryable"),
    [
        (["TransactionConflict", "None"], True),
        (["None", "ThrottlingError"], True),
        (["ProvisionedThroughputExceeded", "ProvisionedThroughputExceeded"], True),
        (["TransactionConflict", "ThrottlingError"], True),
        (["ConditionalCheckFailed", "None"], False),
        (["ConditionalCheckFailed", "TransactionConflict"], False),
        (["None", "ValidationError"], False),
        (["ItemCollectionSizeLimitExceeded", "None"], False),
        (["None", "None"], False),
    ],
)
def test_a_cancelled_transaction_is_retryable_only_when_every_cause_is_transient(
    stubbed: tuple[OutboxWriter, Stubber], codes: list[str], retryable: bool
) -> None:
    writer, stubber = stubbed
    stubber.add_client_error(
        "transact_write_items",
        service_error_code="TransactionCanceledException",
        service_message="Transaction cancelled",
        modeled_fields={"CancellationReasons": [{"Code": code} for code in codes]},
    )
    assert is_retryable(raised_by_write(writer)) is retryable


@pytest.mark.parametrize(
    ("code", "status", "retryable"),
    [
        ("ProvisionedThroughputExceededException", 400, True),
        ("ThrottlingException", 400, True),
        ("RequestLimitExceeded", 400, True),
        ("InternalServerError", 500, True),
        ("ServiceUnavailable", 503, True),
        ("SomethingNewOnTheServer", 502, True),
        ("TransactionInProgressException", 400, True),
        ("IdempotentParameterMismatchException", 400, False),
        ("ResourceNotFoundException", 400, False),
        ("AccessDeniedException", 400, False),
        ("ValidationException", 400, False),
        ("UnrecognizedClientException", 400, False),
    ],
)
def test_a_failed_request_is_retryable_when_throttled_or_failed_by_the_server(
    stubbed: tuple[OutboxWriter, Stubber], code: str, status: int, retryable: bool
) -> None:
    writer, stubber = stubbed
    stubber.add_client_error(
        "transact_write_items", service_error_code=code, http_status_code=status
    )
    assert is_retryable(raised_by_write(writer)) is retryable


class FailingClient:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def transact_write_items(self, **_: Any) -> dict[str, Any]:
        raise self.error


@pytest.mark.parametrize(
    "error",
    [
        EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"),
        ConnectTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"),
        ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"),
    ],
)
def test_a_connection_that_failed_or_timed_out_is_retryable(error: Exception) -> None:
    writer = OutboxWriter(TABLE, FailingClient(error))  # type: ignore[arg-type]
    assert is_retryable(raised_by_write(writer)) is True


def test_a_write_refused_before_calling_aws_and_foreign_errors_are_not_retryable() -> None:
    writer = OutboxWriter(TABLE, FailingClient(RuntimeError("unreachable")))  # type: ignore[arg-type]
    with pytest.raises(InvalidWrite) as refused:
        writer.write({"PK": "ORDER#1"}, placed())
    assert is_retryable(refused.value) is False
    assert is_retryable(raised_by_write(writer)) is False
    assert is_retryable(ValueError("not AWS")) is False
