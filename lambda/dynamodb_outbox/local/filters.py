"""Lambda event filtering (``FilterCriteria``), evaluated by moto's own pattern matcher.

Lambda filter patterns are EventBridge event patterns applied to the record
Lambda would send: a DynamoDB stream record with its type descriptors
(``{"dynamodb": {"Keys": {"SK": {"S": [{"prefix": "OUTBOX#"}]}}}}``), or an SQS
record whose ``body`` is parsed when it holds a JSON object. Filters are OR-ed;
a record that matches none is dropped.

The matcher is ``moto.events.models.EventPattern`` (moto 5.2.5) — internal API,
which is why moto's version is pinned. Reusing it keeps the runtime and the
emulator agreeing on what a pattern means instead of growing a second matcher.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from moto.events.exceptions import InvalidEventPatternException
from moto.events.models import EventPattern

from .config import MappingConfigError

__all__ = ["RecordFilter"]


class RecordFilter:
    """The compiled ``FilterCriteria`` of one mapping; no patterns means everything passes."""

    def __init__(self, patterns: Sequence[str], *, parse_sqs_body: bool = False) -> None:
        self._parse_sqs_body = parse_sqs_body
        self._patterns: list[EventPattern] = []
        for raw in patterns:
            try:
                self._patterns.append(EventPattern.load(raw))
            except InvalidEventPatternException as error:
                raise MappingConfigError(f"invalid filter pattern {raw!r}: {error}") from error

    @property
    def active(self) -> bool:
        return bool(self._patterns)

    def matches(self, record: Mapping[str, Any]) -> bool:
        """Whether Lambda would deliver ``record`` (a Lambda event record)."""
        if not self._patterns:
            return True
        subject = self._sqs_subject(record) if self._parse_sqs_body else record
        # moto types the argument as an EventBridge event; it accepts any JSON object.
        event = cast(Any, dict(subject))
        return any(pattern.matches_event(event) for pattern in self._patterns)

    @staticmethod
    def _sqs_subject(record: Mapping[str, Any]) -> Mapping[str, Any]:
        # A JSON-object body is filtered on its fields; any other body only
        # matches patterns that compare "body" as a plain string.
        body = record.get("body")
        try:
            parsed = json.loads(body) if isinstance(body, str) else None
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return {**record, "body": parsed}
        return record
