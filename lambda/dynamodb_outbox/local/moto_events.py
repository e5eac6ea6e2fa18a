"""moto's EventBridge delivers events to targets the way AWS does.

Used by the moto server the Terraform tests apply to (``scripts/moto_server.py``),
by the project's in-process tests and by the testing kit
(:mod:`dynamodb_outbox.testing`), so a consumer's sender checks
(:mod:`dynamodb_outbox.sender_checks`) see what they would see on AWS.
"""

from __future__ import annotations

import copy
from importlib import metadata
from typing import Any, Final

__all__ = ["MOTO_FORWARDING_CHECKED_AGAINST", "deliver_event_account", "forward_events_as_aws"]

#: The moto release whose bus-to-bus delivery :func:`forward_events_as_aws` replaces
#: (``moto.events.models.Rule.send_to_targets``); on any other it changes nothing.
MOTO_FORWARDING_CHECKED_AGAINST: Final = "5.2.5"

#: What moto (5.2.5) writes into an event it delivers to a target with no input
#: transformer; AWS delivers the whole event, whose ``account`` moto leaves out.
_MOTO_EVENT_TEMPLATE = (
    '{"id": "<id>", "time": <time>, "version": "0", "detail-type": "<detail-type>", '
    '"source": "<source>", "region": "<region>", "resources": <resources>, "detail": <detail>}'
)


def deliver_event_account() -> None:
    """Make moto's EventBridge targets receive the event's ``account``, as AWS's do.

    An event delivered to an SQS target carries version, id, detail-type,
    source, account, time, region, resources and detail (EventBridge User
    Guide, "Amazon EventBridge events"); consumers check ``account``
    (dynamodb_outbox.sender_checks). moto builds the delivered event from a
    template without it. Only that exact template is changed, so a later moto
    that fixed it is left alone.
    """
    from moto.events.utils import EventTemplateParser

    if EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE == _MOTO_EVENT_TEMPLATE:
        EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE = _MOTO_EVENT_TEMPLATE.replace(
            '"source": "<source>", ', '"source": "<source>", "account": "<account>", '
        )


def _is_event_bus(arn: str) -> bool:
    parts = arn.split(":", 5)
    return len(parts) == 6 and parts[2] == "events" and parts[5].startswith("event-bus/")


def forward_events_as_aws() -> bool:
    """Make moto deliver an event to a target bus (another region's) as EventBridge does.

    A rule whose target is an event bus in another Region or account hands the
    event on as it is: the receiving bus's rules see the origin's ``account``,
    ``region``, ``id``, ``time``, ``resources`` and ``detail`` (that is how a
    central bus tells where an event came from; the EventBridge User Guide's
    cross-Region examples filter on ``region``). moto 5.2.5 instead calls
    ``PutEvents`` on the target bus, which makes a new event stamped with the
    target's region and account, a new id and time, and no resources: a
    consumer's sender check (:mod:`dynamodb_outbox.sender_checks`) would pass
    there and fail on AWS. Installed only on that release (True when it is);
    targets with an input transformer keep moto's own path.
    tests/unit/test_moto_forwarded_events.py compares it with the original.
    """
    try:
        installed = metadata.version("moto")
    except metadata.PackageNotFoundError:
        return False
    if installed != MOTO_FORWARDING_CHECKED_AGAINST:
        return False
    from moto.events.models import Rule, events_backends
    from moto.utilities.arns import parse_arn

    original = Rule.send_to_targets
    if getattr(original, "__wrapped__", None) is not None:
        return True

    def send_to_targets(self: Any, original_event: Any, transform_input: bool = True) -> None:
        buses = [t for t in self.targets if _is_event_bus(t["Arn"]) and "InputTransformer" not in t]
        if not buses:
            original(self, original_event, transform_input)
            return
        if not self.event_pattern.matches_event(original_event):
            return
        others = [t for t in self.targets if t not in buses]
        if others:
            rest = copy.copy(self)
            rest.targets = others
            original(rest, original_event, transform_input)
        for target in buses:
            arn = parse_arn(target["Arn"])
            bus = events_backends[arn.account][arn.region].describe_event_bus(arn.resource_id)
            for rule in list(bus.rules.values()):
                rule.send_to_targets(copy.deepcopy(original_event))

    send_to_targets.__wrapped__ = original  # type: ignore[attr-defined]
    Rule.send_to_targets = send_to_targets  # type: ignore[method-assign]
    return True
