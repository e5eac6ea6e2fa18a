"""Event ids: ULIDs made by python-ulid, unique across threads, processes and forks.

A ULID is 48 bits of Unix time in milliseconds and 80 random bits, written as 26
characters of Crockford's base32, so ULIDs sort by time as plain strings
(https://github.com/ulid/spec). The outbox relies on that string order
(``SK = OUTBOX#<id>``, the sweeper's ``SK <`` bound), so only the canonical form
is accepted: upper case, without ``I L O U``.

The id is every consumer's idempotency key: two events sharing one would make
consumers drop the second as a duplicate, silently. So:

* ids made in one process strictly increase, even within one millisecond and
  across threads (python-ulid's monotonic generator), and even when the system
  clock steps back (the generator's clock never goes below its last reading);
* a forked child starts a generator of its own (``os.register_at_fork``):
  without that, parent and child would both continue from the same last id and
  make the same next one within that millisecond.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ulid import ULID, ULIDGenerator

# python-ulid is imported on first use, not with this module: the handlers that
# import the envelope at start (publisher, sweeper) need it only per event, and
# it is compiled from the zip at every cold start.

# The public face (docs/python.md, "The public API"); the other names serve the
# package's own modules.
__all__ = ["event_id_for", "new_event_id"]

EVENT_ID_LENGTH: Final = 26
MAX_MILLISECONDS: Final = (1 << 48) - 1
_RANDOMNESS_BYTES: Final = 10
# A canonical ULID: 26 characters of Crockford's base32 in upper case (no I, L, O,
# U), the first at most 7 (128 bits in 130). What python-ulid parses and writes
# back unchanged, told without building a ULID (the publisher checks every event).
_CANONICAL: Final = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}", re.ASCII)


class _Generator:
    """python-ulid's monotonic generator, with a clock read under the same lock.

    ``ULIDGenerator`` reads its clock before taking its lock, so a thread could
    pair an older millisecond with state a newer one left and make an id below
    the previous one. Reading the clock and resolving the randomness together,
    with a clock that never goes below its last reading, keeps every id above
    every earlier one of the process.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_milliseconds = 0
        self._ulids: ULIDGenerator | None = None

    def _forward_clock(self) -> int:
        self._last_milliseconds = max(self._last_milliseconds, time.time_ns() // 1_000_000)
        return self._last_milliseconds

    def new(self) -> str:
        with self._lock:
            if self._ulids is None:
                from ulid import ULIDGenerator

                self._ulids = ULIDGenerator(clock=self._forward_clock)
            return str(self._ulids.generate())


_generator = _Generator()


def _forget_the_parents_generator() -> None:
    # The child's copy holds the parent's last id (and maybe a lock some other
    # thread of the parent held at fork time): start over with fresh state.
    global _generator
    _generator = _Generator()


os.register_at_fork(after_in_child=_forget_the_parents_generator)


def new_event_id() -> str:
    """A new ULID: now and 80 random bits, greater than any this process made before."""
    return _generator.new()


def event_id_at(milliseconds: int, randomness: bytes) -> str:
    """Exactly the ULID of ``milliseconds`` since the epoch and 10 bytes of ``randomness``."""
    if isinstance(milliseconds, bool) or not 0 <= milliseconds <= MAX_MILLISECONDS:
        raise ValueError(
            f"ULID time must be 0..{MAX_MILLISECONDS} milliseconds, got {milliseconds}"
        )
    if len(randomness) != _RANDOMNESS_BYTES:
        raise ValueError(f"ULID randomness must be 10 bytes, got {len(randomness)}")
    from ulid import ULID

    return str(ULID.from_bytes(milliseconds.to_bytes(6, "big") + bytes(randomness)))


def event_id_for(request_key: str, at: datetime) -> str:
    """The same ULID every time for one request: ``at``'s millisecond, randomness from the key.

    For a request a client may retry (an HTTP ``Idempotency-Key``): every
    retry builds the same event id, so the same outbox item, and consumers
    drop a second delivery as a duplicate. ``at`` must be the same on every
    retry too, e.g. the time the client first sent the request, or the time
    stored with the key; it should be close to now, since the sweeper finds
    pending events by the time in their id. The 80 random bits are the first
    10 bytes of SHA-256 of the key, scoped by the caller (prefix the key with
    the operation if keys are reused across operations).
    """
    if not isinstance(request_key, str) or not request_key:
        raise ValueError("request_key must be a non-empty string")
    if at.utcoffset() is None:
        raise ValueError("at must be an aware datetime (a naive one names no instant)")
    digest = hashlib.sha256(request_key.encode("utf-8")).digest()
    milliseconds = int(at.timestamp() * 1000)
    return event_id_at(milliseconds, digest[:_RANDOMNESS_BYTES])


def lowest_event_id_at(milliseconds: int) -> str:
    """The smallest ULID of that millisecond: every ULID made earlier sorts below it."""
    return event_id_at(milliseconds, bytes(_RANDOMNESS_BYTES))


def _parse(text: object) -> ULID:
    from ulid import ULID

    if not isinstance(text, str):
        raise ValueError(f"a ULID is a string, got {type(text).__name__}")
    parsed = ULID.from_str(text)  # ValueError for a wrong length, alphabet or overflow
    if str(parsed) != text:
        raise ValueError(
            f"{text!r} is not in canonical form (upper case, no I, L, O or U): "
            f"ids must sort by time as plain strings"
        )
    return parsed


def is_canonical_event_id(text: object) -> bool:
    """Whether ``text`` is a ULID in canonical form (what :func:`event_id_milliseconds` takes)."""
    return isinstance(text, str) and _CANONICAL.fullmatch(text) is not None


def event_id_milliseconds(text: object) -> int:
    """The time of a canonical ULID string, in milliseconds since the epoch.

    Raises ``ValueError`` saying why when ``text`` is not one.
    """
    return _parse(text).milliseconds


def event_id_datetime(text: object) -> datetime:
    """The time of a canonical ULID string, as an aware UTC datetime.

    ``ValueError`` when ``text`` is not one, or when its time is past year 9999.
    """
    parsed = _parse(text)
    try:
        return parsed.datetime
    except (OverflowError, OSError) as exc:
        raise ValueError(f"the time of ULID {text!r} is not a representable date: {exc}") from exc
