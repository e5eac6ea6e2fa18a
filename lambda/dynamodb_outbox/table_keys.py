"""The names of the table's key attributes: one setting for every part of the outbox.

An outbox item lives in its entity's partition: partition key = the entity's,
sort key = ``OUTBOX#<event id>``. The attributes holding them are named ``PK``
and ``SK`` by default; a table keyed otherwise (``pk``/``sk``, ``id``/``sort``)
adopts the outbox by naming its own. The same two names must reach the writer
(constructor arguments), the publisher and the sweeper (``OUTBOX_PARTITION_KEY``
and ``OUTBOX_SORT_KEY``, which the module sets from ``table.partition_key`` and
``table.sort_key``), ``outbox-ops`` (``--partition-key``/``--sort-key``), the
stream mapping's filter and the pending index's sort key: a part that reads
another name finds no outbox item at all, so nothing would be published.

Both key attributes must be strings (``S``): the sort key holds ``OUTBOX#<ulid>``
and the sweeper compares sort keys as text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from dynamodb_outbox.outbox_item import (
    ATTR_ENVELOPE,
    ATTR_EVENT_TYPE,
    ATTR_PENDING_SHARD,
    ATTR_PK,
    ATTR_QUARANTINE_REASON,
    ATTR_QUARANTINED_AT,
    ATTR_SK,
    ATTR_STATUS,
    OUTBOX_SK_PREFIX,
)
from dynamodb_outbox.regions import ATTR_REGION, ATTR_RELEASED_AT
from dynamodb_outbox.stream_types import string_attribute

# The public face (docs/python.md, "The public API"); the other names serve the
# package's own modules.
__all__ = ["InvalidTableKeys", "TableKeys"]

#: DynamoDB: a key attribute's name is 1 to 255 bytes of UTF-8.
MAX_KEY_NAME_BYTES: Final = 255

#: The other attributes of an outbox item; a key named like one would collide with it.
OUTBOX_ATTRIBUTES: Final = frozenset(
    {
        ATTR_ENVELOPE,
        ATTR_EVENT_TYPE,
        ATTR_STATUS,
        ATTR_PENDING_SHARD,
        ATTR_QUARANTINE_REASON,
        ATTR_QUARANTINED_AT,
        ATTR_RELEASED_AT,
    }
)


class InvalidTableKeys(ValueError):
    """A key attribute name the outbox cannot use; the message names which key and why.

    ``roles`` says which name is at fault: ``("partition",)``, ``("sort",)``, or
    both when the two names clash.
    """

    def __init__(self, message: str, *roles: str) -> None:
        super().__init__(message)
        self.roles = roles


def _check_name(role: str, name: object) -> None:
    if not isinstance(name, str) or not name:
        raise InvalidTableKeys(
            f"the {role} key attribute name must be a non-empty string, got {name!r}", role
        )
    if len(name.encode("utf-8")) > MAX_KEY_NAME_BYTES:
        raise InvalidTableKeys(
            f"the {role} key attribute name {name[:40]!r}... is over DynamoDB's "
            f"{MAX_KEY_NAME_BYTES} bytes for a key attribute name",
            role,
        )
    if name == ATTR_REGION:
        raise InvalidTableKeys(
            f"the {role} key attribute name {name!r} is the attribute a multi-region "
            "writer stamps its region in; choose another",
            role,
        )
    if name in OUTBOX_ATTRIBUTES:
        raise InvalidTableKeys(
            f"the {role} key attribute name {name!r} is an attribute of every outbox item "
            f"(one of {', '.join(sorted(OUTBOX_ATTRIBUTES))}); choose another",
            role,
        )


@dataclass(frozen=True)
class TableKeys:
    """The table's partition and sort key attribute names (``PK``/``SK`` by default)."""

    partition: str = ATTR_PK
    sort: str = ATTR_SK

    def __post_init__(self) -> None:
        _check_name("partition", self.partition)
        _check_name("sort", self.sort)
        if self.partition == self.sort:
            raise InvalidTableKeys(
                f"the partition and sort key attribute names are both {self.partition!r}; "
                "the outbox needs a table with a partition key and a separate sort key",
                "partition",
                "sort",
            )

    @property
    def names(self) -> tuple[str, str]:
        """Partition key name, then sort key name."""
        return self.partition, self.sort

    def key_of(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """The key of ``item`` (low-level or plain values): its two key attributes only.

        Raises ``KeyError`` naming the attribute when ``item`` lacks one.
        """
        return {name: _copied(item[name]) for name in self.names}

    def sort_value(self, item: object) -> str:
        """The sort key's string (``S``) value in a low-level item or key; "" when absent."""
        return string_attribute(item, self.sort) or ""

    def stream_filter_pattern(self) -> str:
        """The publisher's stream filter: INSERTs of items whose sort key starts with ``OUTBOX#``.

        The same JSON the module puts on its event source mapping (``main.tf``),
        for a :class:`~dynamodb_outbox.local.StreamMapping` in tests.
        """
        return json.dumps(
            {
                "dynamodb": {"Keys": {self.sort: {"S": [{"prefix": OUTBOX_SK_PREFIX}]}}},
                "eventName": ["INSERT"],
            },
            separators=(",", ":"),
            sort_keys=True,
        )


def _copied(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value


DEFAULT_TABLE_KEYS: Final = TableKeys()
