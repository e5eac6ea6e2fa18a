"""Multi-region: each outbox item is published by the region that wrote it.

On a DynamoDB global table every replica's stream carries every write, local
and replicated, and the pending index holds every replica's pending items.
Deployed once per region, the module would publish each event once per region.
So in a multi-region deployment:

* the writer stamps the region it writes in on the outbox item
  (:data:`ATTR_REGION`) and files the item under that region's shards of the
  pending index (``<region>#00`` .. ``<region>#07``);
* each region's stream mapping admits only INSERTs stamped with its own region
  (``main.tf``, ``stream_filter_pattern``), and the publisher checks it again
  in code (:meth:`RegionScope.takes`), as it does for the other filters;
* each region's sweeper reads only its own region's shards and checks the stamp
  of what it reads back.

Items without a stamp (written before multi-region was turned on, or by a
writer not configured for it) are taken by the one region whose deployment says
``publishes_unstamped``: the region the table lived in before it became global.
A region that is lost leaves its pending items stranded until another region
adopts them (:attr:`RegionScope.adopted`, ``outbox-ops adopt``).

The attribute name and the shard separator are read from
``shared_with_terraform.json``, the one file the Terraform module reads too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from dynamodb_outbox.stream_types import string_attribute

__all__ = [
    "ATTR_REGION",
    "ATTR_RELEASED_AT",
    "REGION_SHARD_SEPARATOR",
    "SINGLE_REGION",
    "RegionScope",
    "is_region_name",
    "region_of",
    "regional_shard",
    "stream_filter_patterns",
]

_SHARED: Final[dict[str, Any]] = json.loads(
    (Path(__file__).with_name("shared_with_terraform.json")).read_text(encoding="utf-8")
)

#: The outbox item's attribute holding the region that wrote it (``outbox_region``).
ATTR_REGION: Final[str] = _SHARED["region_attribute"]
#: Between the region and the shard number in a regional pending shard: ``eu-west-1#03``.
REGION_SHARD_SEPARATOR: Final[str] = _SHARED["region_shard_separator"]


#: When ``outbox-ops release`` last put a quarantined item back to pending (ISO 8601, UTC,
#: milliseconds). The standing adoption measures an adopted region's item from it: a
#: released item keeps its event id, whose time would make it look long stranded.
ATTR_RELEASED_AT: Final = "outbox_released_at"


def released_at(item: Mapping[str, Any] | None) -> datetime | None:
    """When the item was last released (None: never, or a value that is not a UTC time)."""
    text = string_attribute(item, ATTR_RELEASED_AT)
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def regional_shard(shard: str, region: str | None) -> str:
    """The pending-index partition of a shard: ``shard`` alone, or ``<region>#<shard>``."""
    return shard if region is None else f"{region}{REGION_SHARD_SEPARATOR}{shard}"


def region_of(item: Mapping[str, Any] | None) -> str | None:
    """The region stamped on a low-level outbox item (or stream image); None when unstamped."""
    return string_attribute(item, ATTR_REGION) or None


@dataclass(frozen=True)
class RegionScope:
    """Which outbox items one region's publisher and sweeper take.

    ``region`` None: a single-region deployment, which takes every item
    (stamped or not). Otherwise the region's own items; unstamped ones only
    when ``unstamped`` (one region of the table does that); and the items of
    the regions in ``adopted`` (failover: another region was lost), by the
    sweeper only, once they are ``adopt_after_seconds`` old: a standing rule
    that stays idle while those regions publish their own within minutes.
    """

    region: str | None = None
    unstamped: bool = False
    adopted: tuple[str, ...] = ()
    adopt_after_seconds: int = 0

    def __post_init__(self) -> None:
        if self.region is not None and not _is_region(self.region):
            raise ValueError(f"region must be an AWS region name, got {self.region!r}")
        for other in self.adopted:
            if not _is_region(other):
                raise ValueError(f"an adopted region must be an AWS region name, got {other!r}")
            if other == self.region:
                raise ValueError(f"region {other} cannot adopt itself")
        if self.adopted and self.region is None:
            raise ValueError("adopting another region's items needs a multi-region scope")
        if isinstance(self.adopt_after_seconds, bool) or self.adopt_after_seconds < 0:
            raise ValueError(f"adopt_after_seconds must be >= 0, got {self.adopt_after_seconds}")

    @property
    def multi_region(self) -> bool:
        return self.region is not None

    def takes_region(self, stamped: str | None) -> bool:
        """Whether an item stamped ``stamped`` (None: unstamped) is this scope's to publish."""
        if self.region is None:
            return True
        if stamped is None:
            return self.unstamped
        return stamped == self.region or stamped in self.adopted

    def takes(self, item: Mapping[str, Any] | None) -> bool:
        """Whether this scope publishes the low-level outbox item (or stream NewImage) ``item``."""
        if self.region is None:  # single region: no lookup on the publisher's hot path
            return True
        return self.takes_region(region_of(item))

    def adopts(self, item: Mapping[str, Any] | None) -> bool:
        """Whether ``item`` is taken only as another region's, by the standing adoption."""
        return bool(self.adopted) and region_of(item) in self.adopted

    def adoption_waits(self, item: Mapping[str, Any] | None, now: datetime) -> bool:
        """Whether an adopted region's item is too recent to adopt, by its last release.

        The sweeper's query already leaves out items whose event id is younger than
        ``adopt_after_seconds``; a released item keeps its event id, so its age is
        counted from its release instead: while its region is up, its own sweeper
        publishes it within minutes of the release.
        """
        if not self.adopts(item):
            return False
        released = released_at(item)
        return released is not None and (now - released).total_seconds() < self.adopt_after_seconds

    def shard_regions(self) -> list[str | None]:
        """The regions whose pending shards the sweeper reads (None: the unprefixed shards)."""
        if self.region is None:
            return [None]
        regions: list[str | None] = [self.region, *self.adopted]
        if self.unstamped:
            regions.append(None)
        return regions


SINGLE_REGION: Final = RegionScope()


#: What multi_region.tf accepts as a region name, and the shape of the provider's
#: region its stream filter matches: a stamp of any other shape (say "US-EAST-1")
#: would match no region's filter and sit in shards no sweeper reads.
_REGION_NAME: Final = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]+")


def _is_region(name: object) -> bool:
    # "us-east-1", "eu-central-2", "us-gov-west-1", "cn-north-1": lowercase, as AWS names them.
    return (
        isinstance(name, str)
        and 0 < len(name) <= 32
        and _REGION_NAME.fullmatch(name) is not None
        and REGION_SHARD_SEPARATOR not in name
    )


def is_region_name(name: object) -> bool:
    """Whether ``name`` is an AWS region name as the module takes it (``eu-west-1``)."""
    return _is_region(name)


def parse_regions(text: str) -> tuple[str, ...]:
    """A comma-separated list of region names, blanks ignored, order kept, no repeats."""
    seen: list[str] = []
    for part in text.split(","):
        name = part.strip()
        if name and name not in seen:
            seen.append(name)
    return tuple(seen)


def regions_text(regions: Iterable[str]) -> str:
    return ",".join(regions)


def stream_filter_patterns(sort_key: str, prefix: str, scope: RegionScope) -> list[str]:
    """The stream mapping's filters (OR-ed) for ``scope``: the JSON the module builds.

    ``main.tf``/``multi_region.tf`` (``stream_filter_patterns``) hold the module's
    copy, for a :class:`~dynamodb_outbox.local.StreamMapping` in tests. Single
    region: every outbox INSERT. Multi-region: the INSERTs stamped with the
    scope's region, and those without a stamp when the scope takes them.
    """
    keys = {sort_key: {"S": [{"prefix": prefix}]}}
    if scope.region is None:
        patterns: list[dict[str, Any]] = [{"dynamodb": {"Keys": keys}, "eventName": ["INSERT"]}]
    else:
        stamps: list[Any] = [[scope.region]]
        if scope.unstamped:
            stamps.append([{"exists": False}])
        patterns = [
            {
                "dynamodb": {"Keys": keys, "NewImage": {ATTR_REGION: {"S": stamp}}},
                "eventName": ["INSERT"],
            }
            for stamp in stamps
        ]
    return [json.dumps(p, separators=(",", ":"), sort_keys=True) for p in patterns]
