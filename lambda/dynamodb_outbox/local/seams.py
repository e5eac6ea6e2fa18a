"""Delivery between services the way AWS does it, on in-process moto: after the API call.

On AWS, ``PutEvents`` and ``Publish`` answer once the bus or topic has the
event; delivering it to a rule's SQS target or a subscribed queue happens
later, and a queue that refuses the message (too large, for one) fails that
delivery, not the call. The event then goes to the target's (or the
subscription's) dead-letter queue if it fits there, and is dropped otherwise.
moto instead delivers inside the call, counts a body's characters (not bytes,
and not its attributes) and lets a refusal fail ``PutEvents`` itself, which
wedges a publisher that AWS would let through (and lose the event).

:func:`aws_seams` patches moto (5.2.5, internal API) for the duration of a
block so that:

* ``SendMessage`` counts what SQS counts: UTF-8 bytes of the body plus each
  attribute's name, type and value, against the queue's ``MaximumMessageSize``;
* a rule's SQS target receives the whole event (moto rebuilds it from a
  template that drops ``account``) as compact JSON, as EventBridge sends it,
  and a refusal sends it to the target's ``DeadLetterConfig`` queue with
  EventBridge's attributes (``ERROR_CODE``, ``ERROR_MESSAGE``, ``RULE_ARN``,
  ``TARGET_ARN``…), or drops it;
* an SNS subscription to a queue that refuses the message sends it to the
  subscription's ``RedrivePolicy`` queue, or drops it;

and every dead-lettered or dropped delivery is recorded in the
:class:`SeamLedger` it yields, so invariant checks see what AWS would lose
silently (``ledger.dropped`` must stay empty for "no event lost").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from moto.core.utils import iso_8601_datetime_without_milliseconds, utcfromtimestamp
from moto.events.models import Rule
from moto.sns.models import Subscription
from moto.sqs.exceptions import InvalidParameterValue
from moto.sqs.models import SQSBackend, sqs_backends

from dynamodb_outbox.sizes import sqs_message_bytes

__all__ = ["SeamLedger", "Undelivered", "aws_seams"]


@dataclass(frozen=True)
class Undelivered:
    """One delivery a queue refused: from which rule or subscription, and where it went."""

    origin: str
    queue_arn: str
    reason: str
    body: str
    dead_letter_queue_arn: str | None


@dataclass
class SeamLedger:
    """What the deliveries between services did besides arriving."""

    dead_lettered: list[Undelivered] = field(default_factory=list)
    dropped: list[Undelivered] = field(default_factory=list)


class _Refused(InvalidParameterValue):
    """SQS refused a message for its size (moto's own error, so API callers see it too)."""

    def __init__(
        self, queue_name: str, size: int, limit: int, body: str, sent: dict[str, Any]
    ) -> None:
        super().__init__(
            f"One or more parameters are invalid. Reason: Message must be shorter than "
            f"{limit} bytes (queue {queue_name}: {size} bytes)."
        )
        self.size = size
        self.limit = limit
        #: the refused message, to dead-letter as it was
        self.body = body
        self.attributes: dict[str, Any] = sent.get("message_attributes") or {}
        self.group_id: str | None = sent.get("group_id")
        self.deduplication_id: str | None = sent.get("deduplication_id")


def _attribute_parts(attributes: dict[str, Any] | None) -> dict[str, tuple[str, str]]:
    parts: dict[str, tuple[str, str]] = {}
    for name, value in (attributes or {}).items():
        data = value.get("StringValue", value.get("BinaryValue", ""))
        parts[name] = (str(value.get("DataType", "")), data if isinstance(data, str) else "")
    return parts


def _sized_send(original: Callable[..., Any]) -> Callable[..., Any]:
    def send_message(
        self: SQSBackend,
        queue_name: str,
        message_body: str,
        message_attributes: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        queue = self.get_queue(queue_name)
        size = sqs_message_bytes(message_body, _attribute_parts(message_attributes))
        limit = int(queue.maximum_message_size)  # type: ignore[attr-defined]
        if size > limit:
            sent = dict(kwargs, message_attributes=message_attributes)
            raise _Refused(queue_name, size, limit, message_body, sent)
        return original(self, queue_name, message_body, message_attributes, **kwargs)

    return send_message


def _queue_name(arn: str) -> str:
    return arn.split(":")[-1]


def _backend_of(arn: str) -> SQSBackend:
    parts = arn.split(":")
    backend: SQSBackend = sqs_backends[parts[4]][parts[3]]
    return backend


#: moto's own bookkeeping on archived events, which it leaks into replays; the
#: fields AWS delivers are in "Event structure reference" (dynamodb_outbox.sizes).
_MOTO_ONLY_FIELDS = ("ingestion-time",)


def _event_body(event: dict[str, Any]) -> str:
    for name in _MOTO_ONLY_FIELDS:
        event.pop(name, None)
    if "time" in event and not isinstance(event["time"], str):
        event["time"] = iso_8601_datetime_without_milliseconds(
            utcfromtimestamp(float(event["time"]))  # type: ignore[arg-type]
        )
    # EventBridge sends compact JSON; ASCII escapes make it the longest form.
    return json.dumps(event, separators=(",", ":"))


def _dead_letter(
    ledger: SeamLedger,
    *,
    origin: str,
    queue_arn: str,
    dlq_arn: str | None,
    body: str,
    reason: str,
    attributes: dict[str, Any],
    group_id: str | None = None,
    deduplication_id: str | None = None,
) -> None:
    if dlq_arn is not None:
        try:
            _backend_of(dlq_arn).send_message(
                _queue_name(dlq_arn),
                body,
                message_attributes=attributes,
                group_id=group_id,
                deduplication_id=deduplication_id,
            )
        except _Refused as refused:
            reason = f"{reason}; its DLQ refused it too: {refused.message}"
        else:
            ledger.dead_lettered.append(Undelivered(origin, queue_arn, reason, body, dlq_arn))
            return
    ledger.dropped.append(Undelivered(origin, queue_arn, reason, body, dlq_arn))


def _string(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}


def _rule_delivery(ledger: SeamLedger) -> Callable[..., None]:
    def send_to_sqs_queue(
        self: Rule, resource_id: str, event: dict[str, Any], group_id: str | None = None
    ) -> None:
        body = _event_body(event)
        backend: SQSBackend = sqs_backends[self.account_id][self.region_name]
        try:
            backend.send_message(queue_name=resource_id, message_body=body, group_id=group_id)
        except _Refused as refused:
            target: dict[str, Any] = next(
                (t for t in self.targets if _queue_name(t["Arn"]) == resource_id),
                {"Arn": resource_id},
            )
            dlq = (target.get("DeadLetterConfig") or {}).get("Arn")
            _dead_letter(
                ledger,
                origin=self.arn,
                queue_arn=target["Arn"],
                dlq_arn=dlq,
                body=body,
                reason=refused.message,
                attributes={
                    "ERROR_CODE": _string("SQS.InvalidParameterValue"),
                    "ERROR_MESSAGE": _string(refused.message),
                    "RULE_ARN": _string(self.arn),
                    "TARGET_ARN": _string(target["Arn"]),
                    "RETRY_ATTEMPTS": {"DataType": "Number", "StringValue": "0"},
                },
            )

    return send_to_sqs_queue


def _whole_event_delivery(original: Callable[..., None]) -> Callable[..., None]:
    """A rule whose targets have no input transformer sends them the whole event, as is.

    moto rebuilds the event from a JSON template by string interpolation, which
    leaves out ``account`` and raises on a ``source`` or ``detail-type`` holding
    a control character (the template is no longer JSON), failing PutEvents.
    """

    def send_to_targets(self: Rule, event: dict[str, Any], transform_input: bool = True) -> None:
        if transform_input and not any("InputTransformer" in t for t in self.targets):
            transform_input = False
        original(self, event, transform_input=transform_input)

    return send_to_targets


def _subscription_delivery(
    ledger: SeamLedger, original: Callable[..., None]
) -> Callable[..., None]:
    def publish(self: Subscription, *args: Any, **kwargs: Any) -> None:
        try:
            original(self, *args, **kwargs)
        except _Refused as refused:
            policy = json.loads(self.attributes.get("RedrivePolicy") or "{}")
            _dead_letter(
                ledger,
                origin=self.arn,
                queue_arn=self.endpoint,
                dlq_arn=policy.get("deadLetterTargetArn"),
                body=refused.body,
                reason=refused.message,
                attributes=refused.attributes,
                group_id=refused.group_id,
                deduplication_id=refused.deduplication_id,
            )

    return publish


@contextmanager
def aws_seams() -> Iterator[SeamLedger]:
    """Within the block, in-process moto delivers between services as AWS does (see above)."""
    ledger = SeamLedger()
    with (
        mock.patch.object(SQSBackend, "send_message", _sized_send(SQSBackend.send_message)),
        mock.patch.object(Rule, "_send_to_sqs_queue", _rule_delivery(ledger)),
        mock.patch.object(Rule, "send_to_targets", _whole_event_delivery(Rule.send_to_targets)),
        mock.patch.object(
            Subscription, "publish", _subscription_delivery(ledger, Subscription.publish)
        ),
    ):
        yield ledger
