"""EventBridge replays as the consumer toolkit and ``outbox-ops replay`` see them.

A replay re-sends archived events to the bus; EventBridge adds a top-level
``replay-name`` field to each (the archive's managed rule drops events that have
one, so they are never archived twice). Replayed events carry the ids the
consumers already recorded as done, so by default a replay is absorbed: an
event a consumer processed is skipped as a duplicate, one it never processed
(lost from its queue, expired in its DLQ) is processed once.

Reprocessing on purpose (a consumer bug fixed, its effects to be redone) is
asked for in the replay's name, which ``outbox-ops replay --reprocess`` builds::

    reprocess.<consumer>.<digest>

The toolkit honours it only in the consumer it names, and only on an
EventBridge event from the bus the consumer was configured to expect
(:mod:`dynamodb_outbox.sender_checks`; a ``replay-name`` anywhere else is
refused as forged): that consumer keys its
idempotency record by event id AND replay name, so each event takes effect once
more per such replay, and once only however often the replay delivers it. Any
other consumer, and any replay not named this way (one started from the
console, say), is deduplicated by event id as usual: never applied twice by
accident. Consumer names hold no ``.`` (module keys are ``[a-z0-9-]``), so the
name cannot be read two ways.

Standard library only: the consumer imports it on every record.
"""

from __future__ import annotations

import hashlib
from typing import Final

__all__ = [
    "REPLAY_NAME_FIELD",
    "REPROCESS_PREFIX",
    "is_reprocess_for",
    "replay_name",
]

#: The field EventBridge adds to every replayed event, next to ``id`` and ``detail``.
REPLAY_NAME_FIELD: Final = "replay-name"
REPROCESS_PREFIX: Final = "reprocess"
PLAIN_PREFIX: Final = "replay"
_SEPARATOR: Final = "."
#: EventBridge's limit on replay names ([.-_A-Za-z0-9]{1,64}).
MAX_REPLAY_NAME: Final = 64
_DIGEST_CHARS: Final = 16


def replay_name(
    consumer: str,
    *,
    archive_arn: str,
    rule_arn: str,
    start: str,
    end: str,
    reprocess: bool,
    attempt: int = 1,
) -> str:
    """The deterministic name of one replay: the same request always gets the same name.

    Running the same command twice then finds the first replay (running or done)
    instead of starting a second one; ``attempt`` asks for a new replay of the
    same window on purpose.
    """
    if not consumer or _SEPARATOR in consumer:
        raise ValueError(f"consumer name must be non-empty and without '.': {consumer!r}")
    request = "\n".join([archive_arn, rule_arn, start, end, str(reprocess), str(attempt)])
    digest = hashlib.sha256(request.encode()).hexdigest()[:_DIGEST_CHARS]
    prefix = REPROCESS_PREFIX if reprocess else PLAIN_PREFIX
    name = _SEPARATOR.join([prefix, consumer, digest])
    if len(name) > MAX_REPLAY_NAME:
        raise ValueError(f"replay name {name!r} exceeds {MAX_REPLAY_NAME} characters")
    return name


def is_reprocess_for(name: str | None, consumer: str) -> bool:
    """Whether the replay ``name`` asks ``consumer`` to process its events again."""
    if not name:
        return False
    parts = name.split(_SEPARATOR)
    return (
        len(parts) == 3 and parts[0] == REPROCESS_PREFIX and parts[1] == consumer and bool(parts[2])
    )
