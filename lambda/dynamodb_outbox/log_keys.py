"""What the functions write to their logs about an item's key.

An outbox item shares its entity's partition key, and entity keys may hold
personal data (``CUSTOMER#<email>``); the envelope's ``subject`` defaults to
that key. Logs keep forever what they are given, so they never get it: they
get the outbox sort key (``OUTBOX#<ulid>``, the event id, made by the writer
and free of caller data), which finds the item through the pending index and
``outbox-ops pending``, and a SHA-256 digest of anything else, which still
tells two entities apart and joins log lines about the same one.

The digest is unsalted and shortened: it keeps keys out of the logs, it does
not make them secret (a guess like a known email address can be checked
against it).
"""

from __future__ import annotations

import hashlib
from typing import Final

from dynamodb_outbox.outbox_item import OUTBOX_SK_PREFIX
from dynamodb_outbox.stream_types import AttributeMap
from dynamodb_outbox.table_keys import TableKeys

__all__ = ["DIGEST_HEX_CHARS", "key_digest", "loggable_key"]

# 64 bits: no two entities of one table share a digest in practice.
DIGEST_HEX_CHARS: Final = 16


def key_digest(value: str) -> str:
    """A short SHA-256 digest of a key value, ``sha256:<16 hex digits>``."""
    return "sha256:" + hashlib.sha256(value.encode("utf-8")).hexdigest()[:DIGEST_HEX_CHARS]


def loggable_key(key: AttributeMap, table_keys: TableKeys) -> dict[str, str]:
    """An item key as logs may carry it: an outbox sort key as is, every other value digested."""
    label: dict[str, str] = {}
    for name, attribute in key.items():
        value = str(next(iter(attribute.values()), ""))
        outbox_sort_key = name == table_keys.sort and value.startswith(OUTBOX_SK_PREFIX)
        label[name] = value if outbox_sort_key else key_digest(value)
    # The partition key first, then the sort key, whatever order the key map came in.
    order = {table_keys.partition: 0, table_keys.sort: 1}
    return dict(sorted(label.items(), key=lambda item: order.get(item[0], 2)))
