"""Tell a gap or a reordering in a subject's events from their ``sequence``.

On the ordered path (``publish_to = "sns_fifo"``) each consumer receives a
subject's events in order, except where the parts cannot keep it
(docs/decisions.md, "What "in order per subject" means on the ordered path"):
a quarantined event released later, a message that reached the DLQ and is
redriven, a stream batch the mapping gave up on. An event written with a
``sequence`` (:meth:`OutboxWriter.new_event`) lets the consumer see it:
:class:`SequenceTracker` keeps, per consumer and subject, the highest sequence
that took effect, and says what each new one is.

It keeps one item per (consumer, subject) in the idempotency table the
toolkit already uses (hash key ``id``, TTL on ``expiration``), key
``sequence#<consumer>#<subject>`` (a consumer name holds no ``#``), updated
by one conditional ``UpdateItem`` per event: the highest sequence wins,
atomically, however many invocations race.

Use it around the function, inside the toolkit's idempotency, so a duplicate
delivery is skipped before it is counted::

    tracker = SequenceTracker(os.environ["OUTBOX_IDEMPOTENCY_TABLE"], consumer.name)

    @consumer.handler
    @tracker.checked
    def handler(event: Envelope) -> None: ...

:meth:`SequenceTracker.checked` records the sequence after the function
returned, logs a gap or a reordering as a warning, counts them
(``SequenceGaps``, ``SequenceReorderings``) on the ``metrics`` given, and
hands every :class:`SequenceObservation` to ``on_observation`` (to hold, alert
or repair as the application sees fit). It never fails a record whose function
succeeded: the effect has happened, and failing would run it again.
"""

from __future__ import annotations

import enum
import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal, ParamSpec, Protocol, TypeVar

from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.settings import DEFAULT_EXPIRES_AFTER_SECONDS

__all__ = [
    "METRIC_GAPS",
    "METRIC_REORDERINGS",
    "SEQUENCE_KEY_PREFIX",
    "SequenceObservation",
    "SequenceTracker",
    "SequenceVerdict",
    "sequence_key",
]

SEQUENCE_KEY_PREFIX: Final = "sequence#"
METRIC_GAPS: Final = "SequenceGaps"
METRIC_REORDERINGS: Final = "SequenceReorderings"
_KEY_ATTR: Final = "id"
_EXPIRY_ATTR: Final = "expiration"
#: How long a subject's highest sequence is kept after its last event: as long
#: as the toolkit's idempotency records by default (one source: the consumer's).
DEFAULT_KEEP_SECONDS: Final = DEFAULT_EXPIRES_AFTER_SECONDS

_UPDATE: Final = "SET #last = :sequence, #subject = :subject, #expiration = :expiration"
_CONDITION: Final = "attribute_not_exists(#last) OR #last < :sequence"
_NAMES: Final = {"#last": "last_sequence", "#subject": "subject", "#expiration": _EXPIRY_ATTR}

_P = ParamSpec("_P")
_R = TypeVar("_R")


class SequenceVerdict(enum.Enum):
    """What an event's sequence says about its place among its subject's events."""

    #: no earlier sequence of its subject is known: the first, or the record
    #: expired (``keep_seconds`` after the subject's last event). A first one
    #: above 1 may follow lower ones that never took effect here; the tracker
    #: cannot tell that from an expired record, so it is not called a gap.
    FIRST = "first"
    #: exactly one above the highest known.
    IN_ORDER = "in_order"
    #: more than one above: the ones between have not taken effect (yet).
    GAP = "gap"
    #: below the highest known: it arrives after a later event of its subject.
    REORDERED = "reordered"
    #: equal to the highest known: the same place taken again (a copy past the
    #: idempotency window, or two events written with one sequence).
    REPEATED = "repeated"
    #: the event carries no sequence.
    UNSEQUENCED = "unsequenced"


@dataclass(frozen=True)
class SequenceObservation:
    """One event's verdict, with the highest sequence known before it."""

    verdict: SequenceVerdict
    subject: str
    sequence: int | None
    previous: int | None

    @property
    def missing(self) -> range:
        """The sequences skipped by a gap (empty for any other verdict)."""
        if self.verdict is not SequenceVerdict.GAP or self.previous is None:
            return range(0)
        assert self.sequence is not None
        return range(self.previous + 1, self.sequence)


class SequenceDynamoDBClient(Protocol):
    """The part of the boto3 DynamoDB client the tracker uses."""

    def update_item(
        self,
        *,
        TableName: str,
        Key: Mapping[str, Any],
        UpdateExpression: str,
        ConditionExpression: str,
        ExpressionAttributeNames: Mapping[str, str],
        ExpressionAttributeValues: Mapping[str, Any],
        ReturnValues: Literal["UPDATED_OLD"],
        ReturnValuesOnConditionCheckFailure: Literal["ALL_OLD"],
    ) -> Mapping[str, Any]: ...


class _Counter(Protocol):
    def add_metric(self, name: str, unit: Any, value: float) -> None: ...


def sequence_key(consumer_name: str, subject: str) -> str:
    """``sequence#<consumer name>#<subject>``: a consumer name holds no ``#``, so it is unique."""
    return f"{SEQUENCE_KEY_PREFIX}{consumer_name}#{subject}"


def _last_of(item: object) -> int | None:
    value = item.get("last_sequence") if isinstance(item, Mapping) else None
    text = value.get("N") if isinstance(value, Mapping) else None
    return int(text) if isinstance(text, str) else None


class SequenceTracker:
    """The highest sequence that took effect, per consumer and subject, and verdicts on new ones."""

    def __init__(
        self,
        table_name: str,
        consumer_name: str,
        *,
        client: SequenceDynamoDBClient | None = None,
        keep_seconds: int = DEFAULT_KEEP_SECONDS,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if not table_name or not consumer_name:
            raise ValueError("SequenceTracker needs a table name and a consumer name")
        if "#" in consumer_name:
            # The key is sequence#<consumer>#<subject>: the first "#" after the
            # prefix must end the name, or two (consumer, subject) pairs share one.
            raise ValueError(f"consumer_name {consumer_name!r} must not contain '#'")
        if keep_seconds <= 0:
            raise ValueError("keep_seconds must be positive")
        self.table_name = table_name
        self.consumer_name = consumer_name
        self.keep_seconds = keep_seconds
        self.clock = clock
        self._client = client

    @property
    def client(self) -> SequenceDynamoDBClient:
        if self._client is None:
            import boto3

            self._client = boto3.client("dynamodb")
        return self._client

    def observe(self, envelope: Envelope) -> SequenceObservation:
        """Record ``envelope``'s sequence if it is the highest of its subject; say what it is."""
        sequence = envelope.sequence
        if sequence is None:
            return SequenceObservation(SequenceVerdict.UNSEQUENCED, envelope.subject, None, None)
        expiration = int((self.clock() + timedelta(seconds=self.keep_seconds)).timestamp())
        try:
            response = self.client.update_item(
                TableName=self.table_name,
                Key={_KEY_ATTR: {"S": sequence_key(self.consumer_name, envelope.subject)}},
                UpdateExpression=_UPDATE,
                ConditionExpression=_CONDITION,
                ExpressionAttributeNames=_NAMES,
                ExpressionAttributeValues={
                    ":sequence": {"N": str(sequence)},
                    ":subject": {"S": envelope.subject},
                    ":expiration": {"N": str(expiration)},
                },
                ReturnValues="UPDATED_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code")
            if code != "ConditionalCheckFailedException":
                raise
            previous = _last_of(getattr(exc, "response", {}).get("Item"))
            verdict = (
                SequenceVerdict.REPEATED if previous == sequence else SequenceVerdict.REORDERED
            )
            return SequenceObservation(verdict, envelope.subject, sequence, previous)
        previous = _last_of(response.get("Attributes"))
        if previous is None:
            verdict = SequenceVerdict.FIRST
        elif previous == sequence - 1:
            verdict = SequenceVerdict.IN_ORDER
        else:
            verdict = SequenceVerdict.GAP
        return SequenceObservation(verdict, envelope.subject, sequence, previous)

    def checked(
        self,
        process_one: Callable[_P, _R],
        *,
        logger: Any = None,
        metrics: _Counter | None = None,
        on_observation: Callable[[SequenceObservation], object] | None = None,
    ) -> Callable[_P, _R]:
        """``process_one`` that records its event's sequence once it has returned.

        The event is its first argument (what ``consumer.handler`` passes, with
        or without ``model=``). A gap or a reordering is logged as a warning and
        counted on ``metrics``; every observation goes to ``on_observation``.
        An error while recording is logged, never raised.
        """
        log = logger
        if log is None:
            from aws_lambda_powertools import Logger

            log = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or self.consumer_name)

        @functools.wraps(process_one)
        def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            result = process_one(*args, **kwargs)
            envelope = args[0] if args else None
            if not isinstance(envelope, Envelope) or envelope.sequence is None:
                return result
            try:
                observation = self.observe(envelope)
            except Exception:
                log.exception(
                    "could not record the event's sequence; order is not checked for it",
                    extra={"event_id": envelope.id, "subject": envelope.subject},
                )
                return result
            self._report(observation, envelope, log, metrics)
            if on_observation is not None:
                try:
                    on_observation(observation)
                except Exception:
                    log.exception("on_observation raised; the event took effect all the same")
            return result

        return run

    @staticmethod
    def _report(
        observation: SequenceObservation, envelope: Envelope, log: Any, metrics: _Counter | None
    ) -> None:
        fields = {
            "event_id": envelope.id,
            "subject": envelope.subject,
            "sequence": observation.sequence,
            "previous_sequence": observation.previous,
        }
        if observation.verdict is SequenceVerdict.GAP:
            log.warning(
                "sequence gap: earlier events of the subject have not taken effect", extra=fields
            )
        elif observation.verdict in (SequenceVerdict.REORDERED, SequenceVerdict.REPEATED):
            log.warning(
                "event arrived after a later event of its subject",
                extra={**fields, "verdict": observation.verdict.value},
            )
        if metrics is not None:
            from aws_lambda_powertools.metrics import MetricUnit

            gaps = int(observation.verdict is SequenceVerdict.GAP)
            reorderings = int(
                observation.verdict in (SequenceVerdict.REORDERED, SequenceVerdict.REPEATED)
            )
            metrics.add_metric(name=METRIC_GAPS, unit=MetricUnit.Count, value=gaps)
            metrics.add_metric(name=METRIC_REORDERINGS, unit=MetricUnit.Count, value=reorderings)
