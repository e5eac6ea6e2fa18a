"""ULIDs as this project uses them: 26-character strings, made, checked and dated.

A ULID is 128 bits: the first 48 are the Unix time in milliseconds, the other
80 are random; written in Crockford's base32, 26 characters, so that ULIDs
sort by time as plain strings (https://github.com/ulid/spec). That string order
is what the outbox relies on (``SK = OUTBOX#<ulid>``, the sweeper's ``SK <``
bound), so only the canonical form is accepted: upper case, no ``I L O U``.
ULIDs made in one process are strictly increasing, even within a millisecond (the
next one is the previous plus one), so the events of one transaction keep the
order they were made in.

Written here rather than imported: every handler imports it at cold start, and
the few functions below are all the project needs of a ULID library.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Final

_ALPHABET: Final = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_VALUE: Final = {char: value for value, char in enumerate(_ALPHABET)}
LENGTH: Final = 26
MAX_MILLISECONDS: Final = (1 << 48) - 1
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def _encode(value: int) -> str:
    chars = []
    for _ in range(LENGTH):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


_last_lock = threading.Lock()
_last = 0


def new_ulid() -> str:
    """A new ULID: now and 80 random bits, greater than any this process made before."""
    global _last
    now = time.time_ns() // 1_000_000
    with _last_lock:
        if now <= _last >> 80:
            _last += 1  # same millisecond (or a clock that stepped back): next in line
        else:
            _last = now << 80 | int.from_bytes(os.urandom(10), "big")
        return _encode(_last)


def ulid_of(milliseconds: int, randomness: bytes) -> str:
    """Exactly the ULID of ``milliseconds`` since the epoch and 10 bytes of ``randomness``."""
    if not 0 <= milliseconds <= MAX_MILLISECONDS:
        raise ValueError(
            f"ULID time must be 0..{MAX_MILLISECONDS} milliseconds, got {milliseconds}"
        )
    if len(randomness) != 10:
        raise ValueError(f"ULID randomness must be 10 bytes, got {len(randomness)}")
    return _encode(milliseconds << 80 | int.from_bytes(randomness, "big"))


def lowest_ulid_of(milliseconds: int) -> str:
    """The smallest ULID of that millisecond: every ULID made earlier sorts below it."""
    return ulid_of(milliseconds, bytes(10))


def ulid_milliseconds(text: str) -> int:
    """The time of a canonical ULID string, in milliseconds since the epoch.

    Raises ``ValueError`` saying why when ``text`` is not one.
    """
    if not isinstance(text, str):
        raise ValueError(f"a ULID is a string, got {type(text).__name__}")
    if len(text) != LENGTH:
        raise ValueError(f"a ULID has {LENGTH} characters, got {len(text)}")
    value = 0
    for char in text:
        digit = _VALUE.get(char)
        if digit is None:
            raise ValueError(f"{char!r} is not an upper-case character of {_ALPHABET}")
        value = value << 5 | digit
    if value >> 128:
        raise ValueError("a ULID's first character is at most '7' (it holds 128 bits)")
    return value >> 80


def ulid_datetime(text: str) -> datetime:
    """The time of a canonical ULID string, as an aware UTC datetime (``ValueError`` if not one)."""
    return _EPOCH + timedelta(milliseconds=ulid_milliseconds(text))
