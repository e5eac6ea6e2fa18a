"""The end state, read from the emulator: table items, consumers' ledgers, queue contents.

Read through a session of its own (not metered, no faults), after the runtime
has drained: this is the ground truth the report's invariants are checked on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import boto3

from demo.deployment import ConsumerDeployment, Deployment
from dynamodb_outbox.ledger import LedgerEntry, read_ledger
from dynamodb_outbox.outbox_item import ATTR_QUARANTINE_REASON, ATTR_STATUS, OUTBOX_SK_PREFIX

# The reference consumer's settings (dynamodb_outbox.reference_consumer). Not
# imported from there: importing it would create its Powertools logger outside
# the function's environment (see demo.functions.in_process).
ENV_IDEMPOTENCY_TABLE = "OUTBOX_IDEMPOTENCY_TABLE"
ENV_CONSUMER_NAME = "OUTBOX_CONSUMER_NAME"
RECEIVE_LIMIT = 10


@dataclass(frozen=True)
class OutboxItem:
    pk: str
    sk: str
    status: str | None
    reason: str | None

    @property
    def event_id(self) -> str:
        return self.sk.removeprefix(OUTBOX_SK_PREFIX)


@dataclass(frozen=True)
class QueueMessage:
    message_id: str
    body: str
    receive_count: int

    @property
    def event_id(self) -> str | None:
        """The id of the event the body carries (EventBridge event or envelope), if any."""
        try:
            data = json.loads(self.body)
            envelope = data.get("detail", data)
            value = envelope.get("id")
        except (ValueError, AttributeError):
            return None
        return value if isinstance(value, str) else None


@dataclass
class ConsumerState:
    key: str
    consumer_name: str
    ledger: list[LedgerEntry]
    queue_depth: int
    dlq: list[QueueMessage]
    dlq_depth: int


@dataclass
class EndState:
    entity_pks: set[str] = field(default_factory=set)
    outbox_items: list[OutboxItem] = field(default_factory=list)
    on_failure_depth: int = 0
    on_failure_records: list[str] = field(default_factory=list)
    consumers: list[ConsumerState] = field(default_factory=list)


def _scan_table(dynamodb: Any, table_name: str, state: EndState) -> None:
    request: dict[str, Any] = {"TableName": table_name, "ConsistentRead": True}
    while True:
        page = dynamodb.scan(**request)
        for item in page.get("Items", []):
            pk, sk = item["PK"]["S"], item["SK"]["S"]
            if sk.startswith(OUTBOX_SK_PREFIX):
                state.outbox_items.append(
                    OutboxItem(
                        pk=pk,
                        sk=sk,
                        status=item.get(ATTR_STATUS, {}).get("S"),
                        reason=item.get(ATTR_QUARANTINE_REASON, {}).get("S"),
                    )
                )
            else:
                state.entity_pks.add(pk)
        last = page.get("LastEvaluatedKey")
        if not last:
            return
        request["ExclusiveStartKey"] = last


def queue_depth(sqs: Any, queue_url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes.get("ApproximateNumberOfMessages", 0)) + int(
        attributes.get("ApproximateNumberOfMessagesNotVisible", 0)
    )


def peek(sqs: Any, queue_url: str) -> list[QueueMessage]:
    """Up to 10 messages of a queue at the end of the run (their receive count moves on)."""
    messages = sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=RECEIVE_LIMIT,
        VisibilityTimeout=0,
        WaitTimeSeconds=0,
        MessageSystemAttributeNames=["ApproximateReceiveCount"],
    ).get("Messages", [])
    return [
        QueueMessage(
            message_id=message["MessageId"],
            body=message["Body"],
            # This peek is itself a receive: report the count before it.
            receive_count=int(message["Attributes"]["ApproximateReceiveCount"]) - 1,
        )
        for message in messages
    ]


def consumer_name(consumer: ConsumerDeployment) -> str:
    """The name scoping its idempotency keys and ledger (as the consumer resolves it)."""
    return consumer.function.environment.get(ENV_CONSUMER_NAME) or consumer.function.name


def read_end_state(session: boto3.Session, deployment: Deployment) -> EndState:
    dynamodb = session.client("dynamodb")
    sqs = session.client("sqs")
    state = EndState()
    _scan_table(dynamodb, deployment.table_name, state)
    state.on_failure_depth = queue_depth(sqs, deployment.on_failure_queue_url)
    if state.on_failure_depth:
        state.on_failure_records = [m.body for m in peek(sqs, deployment.on_failure_queue_url)]
    for consumer in deployment.consumers:
        table = consumer.function.environment.get(ENV_IDEMPOTENCY_TABLE) or (
            deployment.idempotency_table
        )
        name = consumer_name(consumer)
        ledger = read_ledger(dynamodb, table, name) if table else []
        dlq_depth = queue_depth(sqs, consumer.dlq_url) if consumer.dlq_url else 0
        dlq = peek(sqs, consumer.dlq_url) if consumer.dlq_url and dlq_depth else []
        state.consumers.append(
            ConsumerState(
                key=consumer.key,
                consumer_name=name,
                ledger=ledger,
                queue_depth=queue_depth(sqs, consumer.queue_url),
                dlq=dlq,
                dlq_depth=dlq_depth,
            )
        )
    return state
