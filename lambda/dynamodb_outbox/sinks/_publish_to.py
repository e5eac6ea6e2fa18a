"""The module's ``publish_to``: read once, and turned into the rules of its sink."""

from __future__ import annotations

from typing import Final, Literal

from dynamodb_outbox.sinks._eventbridge import EVENTBRIDGE_RULES
from dynamodb_outbox.sinks._types import SinkRules

__all__ = [
    "PUBLISH_TO",
    "PUBLISH_TO_EVENTBRIDGE",
    "PUBLISH_TO_SNS",
    "PUBLISH_TO_SNS_FIFO",
    "PublishTo",
    "parse_publish_to",
    "rules_for",
]

#: The module's ``publish_to``: which transport the events leave by.
PublishTo = Literal["eventbridge", "sns", "sns_fifo"]
PUBLISH_TO_EVENTBRIDGE: Final = "eventbridge"
PUBLISH_TO_SNS: Final = "sns"
PUBLISH_TO_SNS_FIFO: Final = "sns_fifo"
#: Every ``publish_to`` value, in the order the module's documentation lists them.
PUBLISH_TO: Final[tuple[PublishTo, ...]] = (
    PUBLISH_TO_EVENTBRIDGE,
    PUBLISH_TO_SNS,
    PUBLISH_TO_SNS_FIFO,
)


def parse_publish_to(value: object) -> PublishTo:
    """``value`` as a ``publish_to`` name (case and surrounding blanks ignored).

    The one place a ``publish_to`` value is read: the writer's argument, the
    publisher's and sweeper's ``OUTBOX_PUBLISH_TO`` and a consumer's
    ``OUTBOX_CONSUMER_TRANSPORT`` all come through here. Raises ``ValueError``
    listing the values it takes.
    """
    name = value.strip().lower() if isinstance(value, str) else None
    if name not in PUBLISH_TO:
        raise ValueError(f"publish_to must be one of {', '.join(PUBLISH_TO)}, got {value!r}")
    return name


def rules_for(publish_to: str) -> SinkRules:
    """The rules of the module's ``publish_to``: ``eventbridge``, ``sns`` or ``sns_fifo``.

    Raises ``ValueError`` (:func:`parse_publish_to`) for any other value.
    """
    name = parse_publish_to(publish_to)
    if name == PUBLISH_TO_EVENTBRIDGE:
        return EVENTBRIDGE_RULES
    # SNS's rules are loaded at their first use (see dynamodb_outbox.sinks).
    from dynamodb_outbox.sinks._sns import SNS_FIFO_RULES, SNS_RULES

    return SNS_FIFO_RULES if name == PUBLISH_TO_SNS_FIFO else SNS_RULES
