"""The outbox item: the table's side of an event, the layout every part shares.

An event is written as one item next to its entity: the entity's partition key,
sort key ``OUTBOX#<event id>`` (under the table's sort key name, see
:mod:`dynamodb_outbox.table_keys`), the stored envelope as one JSON string
(``envelope``), ``outbox_status`` and the ``outbox_pending_shard`` the sparse
``outbox-pending`` index is keyed on. These names are a contract between the
writer, the publisher, the sweeper, ``outbox-ops`` and the Terraform module
(stream filters, the index), and the README's Versioning section promises them:
items written by one version are handled by the next.

The event itself, what it says and how it is checked, is
:mod:`dynamodb_outbox.envelope`.
"""

from __future__ import annotations

import zlib
from typing import Final

from dynamodb_outbox.envelope import Envelope
from dynamodb_outbox.regions import ATTR_REGION, regional_shard

__all__ = [
    "ATTR_ENVELOPE",
    "ATTR_EVENT_TYPE",
    "ATTR_PENDING_SHARD",
    "ATTR_PK",
    "ATTR_QUARANTINED_AT",
    "ATTR_QUARANTINE_REASON",
    "ATTR_SEQUENCE",
    "ATTR_SK",
    "ATTR_STATUS",
    "ATTR_SUBJECT",
    "DEFAULT_PENDING_SHARDS",
    "MAX_PENDING_SHARDS",
    "OUTBOX_SK_PREFIX",
    "STATUS_PENDING",
    "STATUS_QUARANTINED",
    "outbox_item",
    "outbox_sk",
    "pending_shard",
    "shard_count",
    "writers_shard_count",
]

#: The sort key prefix of every outbox item: ``OUTBOX#<event id>``.
OUTBOX_SK_PREFIX: Final = "OUTBOX#"

# Attribute names of an outbox item. They are a contract between the writer, the
# publisher, the sweeper and the Terraform module (filters, pending index). The
# key names are the defaults of a setting (dynamodb_outbox.table_keys).
ATTR_PK = "PK"
ATTR_SK = "SK"
ATTR_ENVELOPE = "envelope"
ATTR_EVENT_TYPE = "event_type"
ATTR_STATUS = "outbox_status"
ATTR_PENDING_SHARD = "outbox_pending_shard"
ATTR_QUARANTINE_REASON = "quarantine_reason"
ATTR_QUARANTINED_AT = "quarantined_at"
# Only on an outbox item whose event carries a ``sequence``: the sweeper reads
# them (and nothing else) to hold a subject behind its lower pending sequence.
ATTR_SUBJECT = "outbox_subject"
ATTR_SEQUENCE = "outbox_sequence"

STATUS_PENDING = "PENDING"
STATUS_QUARANTINED = "QUARANTINED"

#: THE number of pending-index shards: the writer spreads pending items over
#: ``00``..``07`` and the sweeper and ``outbox-ops`` read exactly those. Not a
#: setting: a writer with another count would put items in shards the sweeper
#: never reads (issue 23), so the writer, the sweeper and the CLI refuse any
#: other value. Changing it changes the stored format: items already pending
#: keep their shard.
DEFAULT_PENDING_SHARDS: Final = 8
#: The most shards :func:`pending_shard` spreads over: a shard is two digits.
MAX_PENDING_SHARDS: Final = 100


def outbox_sk(event_id: str) -> str:
    """The sort key value of the outbox item of event ``event_id``: ``OUTBOX#<event id>``."""
    return OUTBOX_SK_PREFIX + event_id


def shard_count(shards: object) -> int:
    """``shards`` if :func:`pending_shard` can spread over it (1 to :data:`MAX_PENDING_SHARDS`).

    The one bound of a shard count (the writer's item, the sweeper's and
    ``outbox-ops``' index reads). Raises ``ValueError``.
    """
    if isinstance(shards, bool) or not isinstance(shards, int):
        raise ValueError(f"pending shards must be an integer, got {shards!r}")
    if not 1 <= shards <= MAX_PENDING_SHARDS:
        raise ValueError(f"pending shards must be between 1 and {MAX_PENDING_SHARDS}, got {shards}")
    return shards


def writers_shard_count(value: object, setting: str) -> int:
    """``value`` if it is :data:`DEFAULT_PENDING_SHARDS`, the one count writers use.

    The one check of a shard count given as a setting (the writer's
    ``pending_shards``, ``OUTBOX_PENDING_SHARDS``, ``--pending-shards``): items
    filed under other shards would never be swept. Raises ``ValueError``
    naming ``setting``.
    """
    if isinstance(value, bool) or value != DEFAULT_PENDING_SHARDS:
        raise ValueError(
            f"{setting} must be {DEFAULT_PENDING_SHARDS} (the writers' shard count, the "
            f"shards the sweeper reads), got {value!r}"
        )
    return DEFAULT_PENDING_SHARDS


def pending_shard(event_id: str, shards: int = DEFAULT_PENDING_SHARDS) -> str:
    """The pending-index partition of an event: spreads writes over ``shards`` keys."""
    return f"{zlib.crc32(event_id.encode()) % shard_count(shards):02d}"


def outbox_item(
    pk: str,
    envelope: Envelope,
    pending_shards: int = DEFAULT_PENDING_SHARDS,
    *,
    partition_key: str = ATTR_PK,
    sort_key: str = ATTR_SK,
    region: str | None = None,
) -> dict[str, dict[str, str]]:
    """The outbox item (low-level DynamoDB attribute values) announcing ``envelope``.

    ``partition_key``/``sort_key`` name the table's key attributes
    (:class:`~dynamodb_outbox.table_keys.TableKeys`). ``region`` (multi-region
    deployments, :mod:`dynamodb_outbox.regions`) stamps the writing region on
    the item and files it under that region's pending shards.
    """
    if not pk:
        raise ValueError("the outbox item's partition key must be a non-empty string")
    item = {
        partition_key: {"S": pk},
        sort_key: {"S": outbox_sk(envelope.id)},
        ATTR_ENVELOPE: {"S": envelope.to_json()},
        ATTR_EVENT_TYPE: {"S": envelope.type},
        ATTR_STATUS: {"S": STATUS_PENDING},
        ATTR_PENDING_SHARD: {
            "S": regional_shard(pending_shard(envelope.id, pending_shards), region)
        },
    }
    if region is not None:
        item[ATTR_REGION] = {"S": region}
    if envelope.sequence is not None:
        item[ATTR_SUBJECT] = {"S": envelope.subject}
        item[ATTR_SEQUENCE] = {"N": str(envelope.sequence)}
    return item
