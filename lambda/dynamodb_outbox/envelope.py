"""The event envelope and its outbox item.

One envelope is one event. Its ``id`` is a ULID: the outbox item's sort key is
``OUTBOX#<id>``, the published event carries it, and consumers use it as their
idempotency key, so the same id follows the event end to end.

The outbox item stores the envelope as one JSON string (``envelope``): the
bytes the publisher sends are exactly the bytes the writer committed, payload
numbers keep their JSON types, and the publisher can size an event without
re-encoding it.

An envelope is refused (:class:`InvalidEnvelope`) when no path could deliver
it, whichever sink the outbox publishes to:

* its ``time`` must be ISO 8601 and convertible to UTC: the SDK converts it to
  build the request, and a conversion that overflows (``0001-01-01T00:00:00+01:00``)
  would fail the call of every event sent with it;
* its JSON may nest at most :data:`MAX_NESTING_DEPTH` levels: EventBridge
  processes at most 1,000, and a consumer in Python parses with one
  interpreter frame per level, under a default limit of 1,000 frames;
* its payload must have a JSON form by the rule of
  :mod:`dynamodb_outbox.payload_json` (``Decimal`` exact, aware ``datetime``
  and ``date`` as ISO 8601, ``UUID`` as a string; no NaN, infinities, bytes,
  sets or naive datetimes);
* its text may not hold U+FFFE, U+FFFF or surrogate code points: SQS refuses
  them in message bodies, so a consumer queue and its DLQ would both refuse the
  event and the bus would drop it. Escaping them in the JSON would not help,
  since the bus re-serialises the event before delivery.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from dynamodb_outbox.event_ids import event_id_milliseconds, new_event_id
from dynamodb_outbox.payload_json import PayloadNotEncodable, dumps, to_json_value

__all__ = [
    "ATTR_ENVELOPE",
    "ATTR_EVENT_TYPE",
    "ATTR_PENDING_SHARD",
    "ATTR_PK",
    "ATTR_QUARANTINED_AT",
    "ATTR_QUARANTINE_REASON",
    "ATTR_SK",
    "ATTR_STATUS",
    "DEFAULT_PENDING_SHARDS",
    "MAX_NESTING_DEPTH",
    "OUTBOX_SK_PREFIX",
    "SCHEMA_VERSION",
    "STATUS_PENDING",
    "STATUS_QUARANTINED",
    "Envelope",
    "InvalidEnvelope",
    "outbox_item",
    "pending_shard",
]

OUTBOX_SK_PREFIX = "OUTBOX#"
SCHEMA_VERSION = 1

# Attribute names of an outbox item. They are a contract between the writer, the
# publisher, the sweeper and the Terraform module (filters, pending index). The
# key names are the defaults of a setting (dynamodb_outbox.table_keys).
ATTR_PK = "PK"
ATTR_SK = "SK"
ATTR_ENVELOPE = "envelope"
ATTR_EVENT_TYPE = "event_type"
ATTR_STATUS = "outbox_status"
ATTR_PENDING_SHARD = "outbox_pending_shard"
ATTR_QUARANTINE_REASON = "quarantine_reason"
ATTR_QUARANTINED_AT = "quarantined_at"

STATUS_PENDING = "PENDING"
STATUS_QUARANTINED = "QUARANTINED"

DEFAULT_PENDING_SHARDS = 8

#: Nesting levels of the envelope's JSON, the envelope object itself being level 1.
MAX_NESTING_DEPTH: Final = 100

_REQUIRED_FIELDS = ("id", "type", "source", "time", "subject", "payload", "schema_version")
# Characters outside XML 1.0's set, which is what SQS accepts in a message body
# (#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF). Controls
# below #x20 never reach SQS raw: every JSON encoder escapes them.
_UNDELIVERABLE_CHARACTER: Final = re.compile("[\ud800-\udfff\ufffe\uffff]")


class InvalidEnvelope(ValueError):
    """The data is not a valid event envelope; the message says which field and why."""


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def _utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Envelope:
    """An event: what happened (``type``), to what (``subject``), by whom (``source``)."""

    type: str
    source: str
    subject: str
    payload: Mapping[str, Any]
    id: str = field(default_factory=new_event_id)
    time: str = field(default_factory=_utc_now_iso)
    schema_version: int = SCHEMA_VERSION
    correlation_id: str | None = None
    trace_id: str | None = None
    _json: str = field(init=False, repr=False, compare=False, default="")
    _utc_time: datetime = field(init=False, repr=False, compare=False, default=_EPOCH)

    def __post_init__(self) -> None:
        _validate_fields(self)
        # Snapshot the payload: a caller mutating its dict afterwards must not
        # change an event already built (a retry with the same request token
        # would then no longer match), and the payload must be encodable as
        # strict JSON, or the bus would reject it forever. Decimals, datetimes
        # and UUIDs are converted by the rule of dynamodb_outbox.payload_json.
        object.__setattr__(self, "payload", _json_snapshot(self.payload))
        _check_depth(self.payload)
        object.__setattr__(self, "_utc_time", _utc_time_of(self.time))
        text = _dumps(self.to_dict())
        undeliverable = _UNDELIVERABLE_CHARACTER.search(text)
        if undeliverable is not None:
            raise InvalidEnvelope(
                f"envelope holds the character U+{ord(undeliverable.group()):04X}, which SQS "
                "refuses in message bodies (U+FFFE, U+FFFF and surrogates): no consumer queue "
                "could receive the event"
            )
        object.__setattr__(self, "_json", text)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "type": self.type,
            "source": self.source,
            "time": self.time,
            "subject": self.subject,
            "payload": dict(self.payload) if isinstance(self.payload, Mapping) else self.payload,
            "schema_version": self.schema_version,
        }
        if self.correlation_id is not None:
            data["correlation_id"] = self.correlation_id
        if self.trace_id is not None:
            data["trace_id"] = self.trace_id
        return data

    def to_json(self) -> str:
        """Compact JSON; this string is the published event's ``Detail``."""
        return self._json

    @property
    def utc_time(self) -> datetime:
        """``time`` as an aware UTC datetime (a time without offset is taken as UTC)."""
        return self._utc_time

    @classmethod
    def from_dict(cls, data: Any) -> Envelope:
        if not isinstance(data, Mapping):
            raise InvalidEnvelope(f"envelope must be a JSON object, got {type(data).__name__}")
        missing = [name for name in _REQUIRED_FIELDS if name not in data]
        if missing:
            raise InvalidEnvelope(f"envelope is missing field(s): {', '.join(missing)}")
        return cls(
            id=data["id"],
            type=data["type"],
            source=data["source"],
            time=data["time"],
            subject=data["subject"],
            payload=data["payload"],
            schema_version=data["schema_version"],
            correlation_id=data.get("correlation_id"),
            trace_id=data.get("trace_id"),
        )

    @classmethod
    def from_json(cls, text: str | bytes, *, parse_float: Callable[[str], Any] = float) -> Envelope:
        """The envelope of ``text``; ``parse_float=Decimal`` keeps payload numbers exact."""
        try:
            data = json.loads(text, parse_float=parse_float)
        except RecursionError:
            raise InvalidEnvelope(
                f"envelope JSON nests deeper than {MAX_NESTING_DEPTH} levels"
            ) from None
        except (ValueError, TypeError) as exc:
            raise InvalidEnvelope(f"envelope is not valid JSON: {exc}") from exc
        return cls.from_dict(data)

    @property
    def outbox_sk(self) -> str:
        return OUTBOX_SK_PREFIX + self.id


def _dumps(data: Mapping[str, Any]) -> str:
    try:
        return dumps(data)
    except (TypeError, ValueError) as exc:  # e.g. a schema_version of 5,000 digits
        raise InvalidEnvelope(f"envelope is not encodable as JSON: {exc}") from exc


def _json_snapshot(payload: Mapping[str, Any]) -> dict[str, Any]:
    try:
        snapshot: dict[str, Any] = to_json_value(payload)
    except RecursionError:
        raise InvalidEnvelope(
            f"envelope field 'payload' nests deeper than {MAX_NESTING_DEPTH - 1} levels"
        ) from None
    except PayloadNotEncodable as exc:
        raise InvalidEnvelope(f"envelope field 'payload' is not encodable as JSON: {exc}") from exc
    return snapshot


def _check_depth(payload: Mapping[str, Any]) -> None:
    """The payload is level 2 of the envelope's JSON; walked without recursion."""
    stack: list[tuple[Any, int]] = [(payload, 2)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING_DEPTH:
            raise InvalidEnvelope(
                f"envelope field 'payload' nests deeper than {MAX_NESTING_DEPTH - 1} levels "
                f"(EventBridge processes at most 1,000; consumers parse one level per frame)"
            )
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))


def _utc_time_of(text: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidEnvelope(
            f"envelope field 'time' must be an ISO 8601 timestamp, got {text[:64]!r}"
        ) from exc
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    try:
        return parsed.astimezone(UTC)
    except OverflowError as exc:
        raise InvalidEnvelope(
            f"envelope field 'time' {text[:64]!r} is outside the years 1 to 9999 once converted "
            "to UTC"
        ) from exc


def _validate_fields(envelope: Envelope) -> None:
    for name in ("id", "type", "source", "time", "subject"):
        value = getattr(envelope, name)
        if not isinstance(value, str) or not value:
            raise InvalidEnvelope(f"envelope field {name!r} must be a non-empty string")
    try:
        event_id_milliseconds(envelope.id)
    except ValueError as exc:
        raise InvalidEnvelope(f"envelope id {envelope.id[:64]!r} is not a ULID: {exc}") from exc
    if not isinstance(envelope.payload, Mapping):
        raise InvalidEnvelope("envelope field 'payload' must be a JSON object")
    version = envelope.schema_version
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InvalidEnvelope("envelope field 'schema_version' must be a positive integer")
    for name in ("correlation_id", "trace_id"):
        value = getattr(envelope, name)
        if value is not None and not isinstance(value, str):
            raise InvalidEnvelope(f"envelope field {name!r} must be a string when present")


def pending_shard(event_id: str, shards: int = DEFAULT_PENDING_SHARDS) -> str:
    """The pending-index partition of an event: spreads writes over ``shards`` keys."""
    if not 1 <= shards <= 100:
        raise ValueError(f"pending shards must be between 1 and 100, got {shards}")
    return f"{zlib.crc32(event_id.encode()) % shards:02d}"


def outbox_item(
    pk: str,
    envelope: Envelope,
    pending_shards: int = DEFAULT_PENDING_SHARDS,
    *,
    partition_key: str = ATTR_PK,
    sort_key: str = ATTR_SK,
) -> dict[str, dict[str, str]]:
    """The outbox item (low-level DynamoDB attribute values) announcing ``envelope``.

    ``partition_key``/``sort_key`` name the table's key attributes
    (:class:`~dynamodb_outbox.table_keys.TableKeys`).
    """
    if not pk:
        raise ValueError("the outbox item's partition key must be a non-empty string")
    return {
        partition_key: {"S": pk},
        sort_key: {"S": envelope.outbox_sk},
        ATTR_ENVELOPE: {"S": envelope.to_json()},
        ATTR_EVENT_TYPE: {"S": envelope.type},
        ATTR_STATUS: {"S": STATUS_PENDING},
        ATTR_PENDING_SHARD: {"S": pending_shard(envelope.id, pending_shards)},
    }
