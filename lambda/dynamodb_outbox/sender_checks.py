"""Who sent a consumer's message: the checks that tell the outbox's events from forgeries.

A consumer queue's policy admits only its rule (or the topic), and the bus and
topic policies admit only the publisher and the sweeper (docs/threat-model.md).
The toolkit checks again, on every body, what the module told it to expect,
because a policy can be edited, a queue can be shared, and a forged
``replay-name`` would otherwise make a consumer apply an event a second time.

What the module tells a consumer (environment, names in
:mod:`dynamodb_outbox.settings`; the module's ``consumer_environment`` output
holds the same values for callers' own functions):

* ``OUTBOX_CONSUMER_TRANSPORT``: ``eventbridge``, ``sns`` or ``sns_fifo``, so
  the one body shape that transport delivers (names of their own, not
  ``OUTBOX_PUBLISH_TO``/``OUTBOX_TOPIC_ARN``: those say where a writer or the
  publisher publishes, and a consumer may also write to this or another outbox);
* ``OUTBOX_CONSUMER_EVENT_BUS_ARN`` (EventBridge): the bus, whose account and region
  every event must carry (an EventBridge event names its account and region,
  never its bus: the queue policy's ``aws:SourceArn``, the consumer's rule on
  that bus, is what ties a message to the bus);
* ``OUTBOX_CONSUMER_TOPIC_ARN`` (SNS): the topic; an SNS notification names its topic,
  a raw delivery names nothing and is trusted as the queue policy trusts it;
* ``OUTBOX_CONSUMER_FORWARDED_FROM_REGIONS`` (EventBridge, multi-region): the
  other regions whose outbox buses forward their events to this bus (a rule on
  each, cross-Region bus target); a forwarded event keeps the region it was put
  in, so those regions are accepted too, in the bus's account only.

The checks, per transport:

===================  =========================================================
EventBridge          the body is an EventBridge event (``version``, ``id``,
                     ``detail-type``, ``source``, ``account``, ``region``,
                     ``detail``); ``account`` is the bus's, ``region`` the
                     bus's or a region forwarding to it;
                     ``source`` is the envelope's (the publisher copies it);
                     ``replay-name``, if any, is honoured, reprocessing
                     included (EventBridge itself adds it to replayed events;
                     a PutEvents caller sets only Source, DetailType, Detail,
                     Resources and Time, never a top-level field).
SNS                  the body is the envelope (raw delivery) or an SNS
                     notification whose ``TopicArn`` is the topic; neither may
                     carry ``replay-name``: an SNS FIFO replay (archive not
                     enabled by the module) marks its messages ``Replayed``,
                     never with ``replay-name``, so one there is forged.
not configured       any of the three shapes, as before; ``replay-name`` never
                     asks for reprocessing (a replay is deduplicated like any
                     redelivery), and a non-EventBridge body carrying one is
                     refused.
===================  =========================================================

A body that fails a check raises :class:`UntrustedSender` (an
:class:`~dynamodb_outbox.envelope.InvalidEnvelope`): the consumer fails that
message alone, counts it as ``UntrustedEvents`` and, after ``maxReceiveCount``
receives, SQS moves it to the DLQ for a human; it is never processed.

Standard library and the sinks' rules only (no boto3): imported on every record.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from dynamodb_outbox._public_names import present_as
from dynamodb_outbox.envelope import Envelope, InvalidEnvelope
from dynamodb_outbox.regions import is_region_name
from dynamodb_outbox.replays import REPLAY_NAME_FIELD
from dynamodb_outbox.settings import (
    ENV_CONSUMER_EVENT_BUS_ARN,
    ENV_CONSUMER_FORWARDED_FROM_REGIONS,
    ENV_CONSUMER_TOPIC_ARN,
    ENV_CONSUMER_TRANSPORT,
    ConfigurationError,
)
from dynamodb_outbox.sinks import PublishTo, parse_publish_to, parse_topic_arn

__all__ = [
    "ANY_SENDER",
    "EVENTBRIDGE",
    "SNS",
    "DeliveredEvent",
    "ExpectedSender",
    "UntrustedSender",
    "expected_sender_from_environment",
    "read_body",
]

EVENTBRIDGE: Final = "eventbridge"
SNS: Final = "sns"
# OUTBOX_CONSUMER_TRANSPORT values (publish_to's) by the body shape they deliver.
_TRANSPORTS: Final[dict[PublishTo, str]] = {"eventbridge": EVENTBRIDGE, "sns": SNS, "sns_fifo": SNS}

#: The fields of every event EventBridge delivers to a target ("Amazon EventBridge
#: events" in the EventBridge User Guide): version, id, detail-type, source,
#: account, time, region, resources, detail.
_EVENTBRIDGE_FIELDS: Final = ("version", "id", "detail-type", "source", "account", "region")
_SNS_NOTIFICATION: Final = "Notification"


class UntrustedSender(InvalidEnvelope):
    """The message is not what the module's bus or topic delivers; the reason says why."""


@dataclass(frozen=True)
class ExpectedSender:
    """What a consumer's messages must show: the transport and the bus or topic."""

    #: ``eventbridge``, ``sns``, or None when nothing was configured.
    transport: str | None = None
    #: The bus's or topic's ARN: ``arn:<partition>:<service>:<region>:<account>:...``.
    arn: str | None = None
    #: EventBridge, multi-region: the other regions whose outbox buses forward to this bus.
    forwarded_from: tuple[str, ...] = ()

    @classmethod
    def eventbridge(cls, event_bus_arn: str, forwarded_from: Iterable[str] = ()) -> ExpectedSender:
        arn = _checked_arn(event_bus_arn, "events", ENV_CONSUMER_EVENT_BUS_ARN)
        regions = tuple(dict.fromkeys(forwarded_from))
        own = arn.split(":")[3]
        for region in regions:
            if not is_region_name(region) or region == own:
                raise ConfigurationError(
                    f"environment variable {ENV_CONSUMER_FORWARDED_FROM_REGIONS} must list "
                    f"other AWS regions than the bus's ({own}), got {region!r}"
                )
        return cls(EVENTBRIDGE, arn, regions)

    @classmethod
    def sns(cls, topic_arn: str) -> ExpectedSender:
        try:
            return cls(SNS, parse_topic_arn(topic_arn).arn)
        except ValueError as exc:
            raise ConfigurationError(
                f"environment variable {ENV_CONSUMER_TOPIC_ARN} {exc}"
            ) from None

    @property
    def region(self) -> str | None:
        return self.arn.split(":")[3] if self.arn else None

    @property
    def account(self) -> str | None:
        return self.arn.split(":")[4] if self.arn else None


#: Nothing configured: every shape accepted, no replay name honoured.
ANY_SENDER: Final = ExpectedSender()


@dataclass(frozen=True)
class DeliveredEvent:
    """A message's envelope and, on an EventBridge replay, the replay's name."""

    envelope: Envelope
    replay_name: str | None = None
    #: Whether the replay name came from the expected bus, so may ask for
    #: reprocessing. An unchecked one only ever makes the consumer more careful
    #: (an old replayed event is skipped rather than run).
    replay_checked: bool = False


def expected_sender_from_environment(environ: Mapping[str, str] | None = None) -> ExpectedSender:
    """The sender the module configured (``OUTBOX_CONSUMER_TRANSPORT`` and its bus or topic).

    :data:`ANY_SENDER` when ``OUTBOX_CONSUMER_TRANSPORT`` is unset; raises
    :class:`ConfigurationError` naming the variable when it is set and its bus
    or topic is missing or malformed.
    """
    environ = os.environ if environ is None else environ
    configured = environ.get(ENV_CONSUMER_TRANSPORT, "")
    if not configured.strip():
        return ANY_SENDER
    try:
        transport = _TRANSPORTS[parse_publish_to(configured)]
    except ValueError as exc:
        raise ConfigurationError(f"environment variable {ENV_CONSUMER_TRANSPORT}: {exc}") from None
    if transport == EVENTBRIDGE:
        forwarded = environ.get(ENV_CONSUMER_FORWARDED_FROM_REGIONS, "")
        return ExpectedSender.eventbridge(
            environ.get(ENV_CONSUMER_EVENT_BUS_ARN, ""),
            [region.strip() for region in forwarded.split(",") if region.strip()],
        )
    return ExpectedSender.sns(environ.get(ENV_CONSUMER_TOPIC_ARN, ""))


def read_body(
    body: object,
    expected: ExpectedSender = ANY_SENDER,
    *,
    parse_float: Callable[[str], Any] = float,
) -> DeliveredEvent:
    """The envelope an SQS message body carries, checked against ``expected``.

    Raises :class:`UntrustedSender` when the body is well formed but not what
    ``expected`` delivers, :class:`InvalidEnvelope` when it is no outbox event.
    """
    data = _json_object(body, parse_float)
    eventbridge_shaped = "detail-type" in data and "detail" in data
    if expected.transport == EVENTBRIDGE:
        if not eventbridge_shaped:
            raise UntrustedSender(
                "expected an EventBridge event from the outbox's bus, got another body shape"
            )
        return _from_eventbridge(data, expected)
    if REPLAY_NAME_FIELD in data and not eventbridge_shaped:
        raise UntrustedSender(
            f"a {REPLAY_NAME_FIELD!r} field outside an EventBridge event: only EventBridge "
            "replays carry one"
        )
    if expected.transport == SNS:
        if eventbridge_shaped:
            raise UntrustedSender(
                "expected an SNS delivery from the outbox's topic, got an EventBridge event"
            )
        return DeliveredEvent(_from_sns(data, expected, parse_float))
    # Not configured: the three shapes as before, and no replay name honoured.
    if eventbridge_shaped:
        return DeliveredEvent(_eventbridge_envelope(data), _replay_name(data))
    return DeliveredEvent(_from_sns(data, expected, parse_float))


def _json_object(body: object, parse_float: Callable[[str], Any]) -> Mapping[str, Any]:
    if not isinstance(body, str | bytes):
        raise InvalidEnvelope(f"message body must be a string, got {type(body).__name__}")
    try:
        data = json.loads(body, parse_float=parse_float)
    except RecursionError:
        raise InvalidEnvelope("message body nests too deep to be an outbox event") from None
    except ValueError as exc:
        raise InvalidEnvelope(f"message body is not valid JSON: {exc}") from exc
    if not isinstance(data, Mapping):
        raise InvalidEnvelope(f"message body must be a JSON object, got {type(data).__name__}")
    return data


def _from_eventbridge(data: Mapping[str, Any], expected: ExpectedSender) -> DeliveredEvent:
    missing = [name for name in _EVENTBRIDGE_FIELDS if not isinstance(data.get(name), str)]
    if missing:
        raise UntrustedSender(f"EventBridge event without {', '.join(missing)}")
    if data["account"] != expected.account:
        raise UntrustedSender(
            f"EventBridge event from account {data['account']!r}, "
            f"not the outbox bus's {expected.account!r}"
        )
    if data["region"] != expected.region and data["region"] not in expected.forwarded_from:
        forwarding = (
            f" or a region forwarding to it ({', '.join(expected.forwarded_from)})"
            if expected.forwarded_from
            else ""
        )
        raise UntrustedSender(
            f"EventBridge event from region {data['region']!r}, not the outbox bus's "
            f"{expected.region!r}{forwarding}"
        )
    envelope = _eventbridge_envelope(data)
    if data["source"] != envelope.source:
        raise UntrustedSender(
            f"EventBridge source {data['source']!r} is not the envelope's source "
            f"{envelope.source!r}: the publisher always copies it"
        )
    return DeliveredEvent(envelope, _replay_name(data), replay_checked=True)


def _replay_name(data: Mapping[str, Any]) -> str | None:
    replay = data.get(REPLAY_NAME_FIELD)
    if replay is not None and not (isinstance(replay, str) and replay):
        raise UntrustedSender(f"EventBridge {REPLAY_NAME_FIELD!r} must be a non-empty string")
    return replay


def _eventbridge_envelope(data: Mapping[str, Any]) -> Envelope:
    envelope = Envelope.from_dict(data["detail"])
    # Rules route on detail-type. A mismatch means the producer broke the
    # contract, and this queue may hold an event it never subscribed to:
    # send it to the DLQ for a human rather than act on a guess.
    if data["detail-type"] != envelope.type:
        raise InvalidEnvelope(
            f"EventBridge detail-type {data['detail-type']!r} does not match "
            f"envelope type {envelope.type!r}"
        )
    return envelope


def _from_sns(
    data: Mapping[str, Any], expected: ExpectedSender, parse_float: Callable[[str], Any]
) -> Envelope:
    if data.get("Type") == _SNS_NOTIFICATION and "Message" in data:
        # Without raw delivery: accepted so that forgetting raw_message_delivery
        # on a subscription costs nothing; its TopicArn must be the topic.
        if expected.arn is not None and data.get("TopicArn") != expected.arn:
            raise UntrustedSender(
                f"SNS notification from topic {data.get('TopicArn')!r}, not {expected.arn!r}"
            )
        message = data["Message"]
        if not isinstance(message, str):
            raise InvalidEnvelope("SNS notification 'Message' must be a string")
        return Envelope.from_json(message, parse_float=parse_float)
    return Envelope.from_dict(data)


def _checked_arn(arn: str, service: str, variable: str) -> str:
    parts = arn.split(":")
    if len(parts) < 6 or parts[0] != "arn" or parts[2] != service or not parts[3] or not parts[4]:
        raise ConfigurationError(
            f"environment variable {variable} must be an ARN "
            f"arn:<partition>:{service}:<region>:<account>:..., got {arn!r}"
        )
    return arn


# Documented as dynamodb_outbox.consumer.ExpectedSender (docs/python.md), the
# name pickles and reprs show whether or not the consumer package was imported.
present_as("dynamodb_outbox.consumer", ExpectedSender)
