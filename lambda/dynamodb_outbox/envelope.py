"""The event envelope and its outbox item.

One envelope is one event. Its ``id`` is a ULID: the outbox item's sort key is
``OUTBOX#<id>``, the published event carries it, and consumers use it as their
idempotency key, so the same id follows the event end to end.

The outbox item stores the envelope as one JSON string (``envelope``): the
bytes the publisher sends are exactly the bytes the writer committed, payload
numbers keep their JSON types, and the publisher can size an event without
re-encoding it.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dynamodb_outbox.ulid_codec import new_ulid, ulid_milliseconds

OUTBOX_SK_PREFIX = "OUTBOX#"
SCHEMA_VERSION = 1

# Attribute names of an outbox item. They are a contract between the writer, the
# publisher, the sweeper and the Terraform module (filters, pending index).
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

_REQUIRED_FIELDS = ("id", "type", "source", "time", "subject", "payload", "schema_version")


class InvalidEnvelope(ValueError):
    """The data is not a valid event envelope; the message says which field and why."""


def _utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Envelope:
    """An event: what happened (``type``), to what (``subject``), by whom (``source``)."""

    type: str
    source: str
    subject: str
    payload: Mapping[str, Any]
    id: str = field(default_factory=new_ulid)
    time: str = field(default_factory=_utc_now_iso)
    schema_version: int = SCHEMA_VERSION
    correlation_id: str | None = None
    trace_id: str | None = None

    def __post_init__(self) -> None:
        _validate(self.to_dict())
        # Snapshot the payload: a caller mutating its dict afterwards must not
        # change an event already built (a retry with the same request token
        # would then no longer match), and the payload must be encodable as
        # strict JSON, or the bus would reject it forever.
        object.__setattr__(self, "payload", _json_snapshot(self.payload))

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
        return json.dumps(
            self.to_dict(), separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )

    @classmethod
    def from_dict(cls, data: Any) -> Envelope:
        _validate(data)
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
    def from_json(cls, text: str | bytes) -> Envelope:
        try:
            data = json.loads(text)
        except (ValueError, TypeError) as exc:
            raise InvalidEnvelope(f"envelope is not valid JSON: {exc}") from exc
        return cls.from_dict(data)

    @property
    def outbox_sk(self) -> str:
        return OUTBOX_SK_PREFIX + self.id


def _json_snapshot(payload: Mapping[str, Any]) -> dict[str, Any]:
    try:
        snapshot: dict[str, Any] = json.loads(json.dumps(payload, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidEnvelope(f"envelope field 'payload' is not encodable as JSON: {exc}") from exc
    return snapshot


def _validate(data: Any) -> None:
    if not isinstance(data, Mapping):
        raise InvalidEnvelope(f"envelope must be a JSON object, got {type(data).__name__}")
    missing = [name for name in _REQUIRED_FIELDS if name not in data]
    if missing:
        raise InvalidEnvelope(f"envelope is missing field(s): {', '.join(missing)}")
    for name in ("id", "type", "source", "time", "subject"):
        value = data[name]
        if not isinstance(value, str) or not value:
            raise InvalidEnvelope(f"envelope field {name!r} must be a non-empty string")
    try:
        ulid_milliseconds(data["id"])
    except ValueError as exc:
        raise InvalidEnvelope(f"envelope id {data['id']!r} is not a ULID: {exc}") from exc
    try:
        datetime.fromisoformat(data["time"])
    except ValueError as exc:
        raise InvalidEnvelope(
            f"envelope field 'time' must be an ISO 8601 timestamp, got {data['time']!r}"
        ) from exc
    if not isinstance(data["payload"], Mapping):
        raise InvalidEnvelope("envelope field 'payload' must be a JSON object")
    version = data["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InvalidEnvelope("envelope field 'schema_version' must be a positive integer")
    for name in ("correlation_id", "trace_id"):
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            raise InvalidEnvelope(f"envelope field {name!r} must be a string when present")


def pending_shard(event_id: str, shards: int = DEFAULT_PENDING_SHARDS) -> str:
    """The pending-index partition of an event: spreads writes over ``shards`` keys."""
    if not 1 <= shards <= 100:
        raise ValueError(f"pending shards must be between 1 and 100, got {shards}")
    return f"{zlib.crc32(event_id.encode()) % shards:02d}"


def outbox_item(
    pk: str, envelope: Envelope, pending_shards: int = DEFAULT_PENDING_SHARDS
) -> dict[str, dict[str, str]]:
    """The outbox item (low-level DynamoDB attribute values) announcing ``envelope``."""
    if not pk:
        raise ValueError("the outbox item's partition key must be a non-empty string")
    return {
        ATTR_PK: {"S": pk},
        ATTR_SK: {"S": envelope.outbox_sk},
        ATTR_ENVELOPE: {"S": envelope.to_json()},
        ATTR_EVENT_TYPE: {"S": envelope.type},
        ATTR_STATUS: {"S": STATUS_PENDING},
        ATTR_PENDING_SHARD: {"S": pending_shard(envelope.id, pending_shards)},
    }
