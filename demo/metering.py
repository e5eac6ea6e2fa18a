"""What the run asked of AWS: API calls per component and operation, and PutEvents outcomes.

Both are botocore event hooks on the boto3 sessions in play, so nothing in the
handlers changes to be measured:

* :class:`CallMeter` counts every call that got an answer (``after-call``),
  per component: the app's writes, each deployed function (named by
  :data:`demo.functions.current_function` while its handler runs), and Lambda's
  own pollers (the local runtime reading the stream and the queues).
* :class:`PutEventsTap` reads each PutEvents request and its answer: which
  entries EventBridge accepted (by event id) and which it refused, with the
  error code.

Hooks must be registered before the session creates its clients: a botocore
client copies its session's hooks when it is created.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import boto3

from demo.functions import current_function

OUTSIDE_FUNCTIONS = "(outside any function)"
_ENTRIES_KEY = "demo.put_events.entries"


@dataclass
class CallMeter:
    """Counts answered AWS API calls by (component, ``service:Operation``)."""

    calls: Counter[tuple[str, str]] = field(default_factory=Counter)

    def attach(self, session: boto3.Session, component: str | None = None) -> None:
        """Count the calls of ``session``'s clients as ``component``.

        Without ``component``, a call is counted for the deployed function
        running at the time (:data:`~demo.functions.current_function`).
        """
        resolve: Callable[[], str] = (
            (lambda: component)
            if component is not None
            else (lambda: current_function.get() or OUTSIDE_FUNCTIONS)
        )

        def count(model: Any, **_: Any) -> None:
            operation = f"{model.service_model.service_name}:{model.name}"
            self.calls[(resolve(), operation)] += 1

        session.events.register("after-call", count)

    def by_component(self) -> dict[str, Counter[str]]:
        result: dict[str, Counter[str]] = {}
        for (component, operation), count in sorted(self.calls.items()):
            result.setdefault(component, Counter())[operation] = count
        return result

    def total(self, component: str) -> int:
        return sum(count for (owner, _), count in self.calls.items() if owner == component)


@dataclass
class PutEventsTap:
    """The outcome of every PutEvents (or, on the ordered path, PublishBatch) entry sent."""

    calls: int = 0
    accepted_ids: list[str] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)

    def attach(self, session: boto3.Session) -> None:
        session.events.register("before-parameter-build.events.PutEvents", self._request)
        session.events.register("after-call.events.PutEvents", self._answer)
        session.events.register("before-parameter-build.sns.PublishBatch", self._sns_request)
        session.events.register("after-call.sns.PublishBatch", self._sns_answer)

    @staticmethod
    def _sns_request(params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        context[_ENTRIES_KEY] = list(params.get("PublishBatchRequestEntries", []))

    def _sns_answer(self, parsed: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        sent = {entry["Id"]: entry for entry in context.pop(_ENTRIES_KEY, [])}
        self.calls += 1
        for answer in parsed.get("Failed") or []:
            self.refused[str(answer.get("Code"))] += 1
        for answer in parsed.get("Successful") or []:
            entry = sent.get(answer.get("Id"), {})
            try:
                self.accepted_ids.append(str(json.loads(entry["Message"])["id"]))
            except (KeyError, TypeError, ValueError):
                self.accepted_ids.append("(unreadable message)")

    @staticmethod
    def _request(params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        context[_ENTRIES_KEY] = list(params.get("Entries", []))

    def _answer(self, parsed: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        sent = context.pop(_ENTRIES_KEY, [])
        answers = parsed.get("Entries")
        if not isinstance(answers, list):
            return
        self.calls += 1
        for entry, answer in zip(sent, answers, strict=False):
            code = answer.get("ErrorCode")
            if code:
                self.refused[str(code)] += 1
                continue
            try:
                self.accepted_ids.append(str(json.loads(entry["Detail"])["id"]))
            except (KeyError, TypeError, ValueError):
                self.accepted_ids.append("(unreadable detail)")

    @property
    def accepted(self) -> int:
        return len(self.accepted_ids)

    @property
    def distinct(self) -> int:
        return len(set(self.accepted_ids))
