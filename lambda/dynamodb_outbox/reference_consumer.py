"""The consumer the module deploys when a caller gives no ``function_arn``.

Entry point: ``dynamodb_outbox.reference_consumer.handler``. It is the toolkit
in :mod:`dynamodb_outbox.consumer` with one effect per event: a ledger entry
(:mod:`dynamodb_outbox.ledger`) in the SAME idempotency table, so the examples,
the demo and the tests can check that every event took effect exactly once
(``times_processed == 1``) even when it was delivered several times.

Environment:

* ``OUTBOX_IDEMPOTENCY_TABLE`` (required): idempotency table (hash key ``id``,
  TTL on ``expiration``), also holding the ledger;
* ``OUTBOX_CONSUMER_NAME`` (optional, default the Lambda function name): scopes
  idempotency keys and ledger entries;
* ``OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS`` (optional, default 7 days);
* ``OUTBOX_CONSUMER_TRANSPORT`` with ``OUTBOX_CONSUMER_EVENT_BUS_ARN`` or
  ``OUTBOX_CONSUMER_TOPIC_ARN``:
  the sender every message must come from (:mod:`dynamodb_outbox.sender_checks`);
* ``POWERTOOLS_SERVICE_NAME``, ``POWERTOOLS_METRICS_NAMESPACE``,
  ``POWERTOOLS_LOG_LEVEL`` as usual for Powertools.

IAM on the table: ``dynamodb:PutItem``, ``GetItem``, ``UpdateItem``,
``DeleteItem`` (the ledger write is an ``UpdateItem``).
"""

from __future__ import annotations

import functools
import os

import boto3
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.typing import LambdaContext

from dynamodb_outbox.consumer import (
    LambdaHandler,
    OutboxConsumer,
    PartialBatchResponse,
    SQSEvent,
)
from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.ledger import EXPIRY_ATTR, KEY_ATTR, LedgerDynamoDBClient, record_processed
from dynamodb_outbox.log_keys import key_digest
from dynamodb_outbox.sender_checks import ExpectedSender, expected_sender_from_environment
from dynamodb_outbox.settings import (
    DEFAULT_EXPIRES_AFTER_SECONDS,
    ENV_CONSUMER_NAME,
    ENV_EXPIRES_AFTER_SECONDS,
    ENV_IDEMPOTENCY_TABLE,
    integer_env,
    required_env,
)

__all__ = [
    "build_handler",
    "handler",
]


def build_handler(
    consumer: OutboxConsumer, dynamodb_client: LedgerDynamoDBClient, table_name: str
) -> LambdaHandler:
    """The reference handler on ``consumer``: record each event in the ledger of ``table_name``."""

    def record(event: Envelope) -> None:
        times = record_processed(
            dynamodb_client,
            table_name,
            consumer.name,
            event,
            expires_after_seconds=consumer.expires_after_seconds,
        )
        consumer.logger.info(
            "event recorded in the ledger",
            extra={
                "event_id": event.id,
                "event_type": event.type,
                "subject": key_digest(event.subject),
                "times_processed": times,
            },
        )

    return consumer.handler(record)


def handler(event: SQSEvent, context: LambdaContext) -> PartialBatchResponse:
    """Lambda entry point; configuration comes from the environment (see module docs)."""
    # A ConfigurationError fails the whole batch: the messages stay queued until
    # the configuration is fixed instead of being marked processed.
    table_name = required_env(ENV_IDEMPOTENCY_TABLE)
    expires = integer_env(
        os.environ, ENV_EXPIRES_AFTER_SECONDS, DEFAULT_EXPIRES_AFTER_SECONDS, minimum=1
    )
    name = os.environ.get(ENV_CONSUMER_NAME) or None
    sender = expected_sender_from_environment()
    return _handler_for(table_name, name, expires, sender)(event, context)


@functools.cache
def _handler_for(
    table_name: str, name: str | None, expires_after_seconds: int, sender: ExpectedSender
) -> LambdaHandler:
    # Built on the first invocation and reused by the warm environment (one
    # boto3 client, one persistence layer), keyed by the configuration so that
    # a changed environment (tests) never gets a stale handler.
    client = boto3.client("dynamodb")
    consumer = OutboxConsumer(
        persistence_store=DynamoDBPersistenceLayer(
            table_name=table_name, boto3_client=client, key_attr=KEY_ATTR, expiry_attr=EXPIRY_ATTR
        ),
        name=name,
        expires_after_seconds=expires_after_seconds,
        expected_sender=sender,
    )
    return build_handler(consumer, client, table_name)
