"""Event ids and ages as the commands print them."""

from __future__ import annotations

from datetime import datetime

from dynamodb_outbox.outbox_item import OUTBOX_SK_PREFIX
from dynamodb_outbox.pending_index import ulid_time


def event_id_of(sort_key: str) -> str:
    return sort_key[len(OUTBOX_SK_PREFIX) :] if sort_key.startswith(OUTBOX_SK_PREFIX) else ""


def age_seconds(sort_key: str, now: datetime) -> float | None:
    made = ulid_time(sort_key)
    return None if made is None else max(0.0, (now - made).total_seconds())


def format_age(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    whole = int(seconds)
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
