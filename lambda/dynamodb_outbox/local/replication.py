"""A DynamoDB global table, in-process: replication between one table per region.

moto serves several regions in one process, each with its own tables and
streams, but it has no global tables. :class:`GlobalTableReplication` plays the
part of DynamoDB's replication between same-named tables of several regions,
with the behaviour the outbox must survive (DynamoDB developer guide, "Global
tables: how it works", both versions):

* every write made in one region reaches every other region after
  ``delay_seconds`` (AWS: asynchronous, typically within a second; the
  ``ReplicationLatency`` metric measures it) and then appears in that region's
  stream as well: every replica's stream carries every write, local and
  replicated;
* conflicting writes to one item resolve by **last writer wins**: a replicated
  write older than the item's last write in the target region is dropped
  there (ties go to the region whose name sorts last, a fixed choice standing
  for AWS's internal one), so every replica converges on the latest write;
* how a replicated record is marked: version ``2019.11.21`` (current) adds
  nothing to the item or the stream record, so a reader cannot tell a
  replicated INSERT from a local one by the record alone; version
  ``2017.11.29`` (legacy) keeps ``aws:rep:updateregion``,
  ``aws:rep:updatetime`` and ``aws:rep:deleting`` on every item, which the
  replicated writes here carry (local writes do not get them here: DynamoDB
  adds them within the write, which an in-process replica cannot);
* a region can be cut off (:meth:`cut_off`) and come back (:meth:`restore`):
  meanwhile nothing replicates from or to it, and on its return what queued up
  flows both ways, with last-writer-wins deciding each item.

It is a :class:`~dynamodb_outbox.local.drain.Pollable`: add it to a
:class:`~dynamodb_outbox.local.LocalRuntime` next to each region's stream
mapping and ``drain()`` settles replication too. It reads each region's stream
with iterators of its own; the publisher's mapping is not disturbed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .clock import VirtualClock
from .events import epoch_seconds
from .results import PollResult

__all__ = ["GLOBAL_TABLE_VERSIONS", "GlobalTableReplication", "ReplicationStats"]

VERSION_CURRENT: Final = "2019.11.21"
VERSION_LEGACY: Final = "2017.11.29"
GLOBAL_TABLE_VERSIONS: Final = (VERSION_CURRENT, VERSION_LEGACY)
#: The attributes version 2017.11.29 keeps on every item (do not write them yourself).
LEGACY_ATTRIBUTES: Final = ("aws:rep:deleting", "aws:rep:updateregion", "aws:rep:updatetime")


@dataclass(frozen=True)
class _Change:
    source: str
    at: float
    event_name: str
    keys: dict[str, Any]
    new_image: dict[str, Any] | None

    @property
    def key_text(self) -> str:
        return json.dumps(self.keys, sort_keys=True)


@dataclass
class ReplicationStats:
    """What replication did, per target region where it says so."""

    #: local writes read from the regions' streams.
    local_writes: int = 0
    #: replicated writes applied, per target region.
    applied: Counter[str] = field(default_factory=Counter)
    #: replicated writes dropped by last writer wins, per target region.
    conflicts_lost: Counter[str] = field(default_factory=Counter)


class GlobalTableReplication:
    """Replicates ``table_name`` between the regions of ``clients``.

    ``clients`` maps each region to its ``(dynamodb, dynamodbstreams)`` clients
    (moto in-process: clients made with that ``region_name``); each region's
    table must exist with a stream carrying new images, as a global table's
    replicas do. ``version`` is the global tables version whose marking the
    replicated items follow.
    """

    def __init__(
        self,
        table_name: str,
        clients: Mapping[str, tuple[Any, Any]],
        clock: VirtualClock,
        *,
        delay_seconds: float = 1.0,
        version: str = VERSION_CURRENT,
    ) -> None:
        if len(clients) < 2:
            raise ValueError("a global table has replicas in at least two regions")
        if delay_seconds < 0:
            raise ValueError(f"delay_seconds must be >= 0, got {delay_seconds}")
        if version not in GLOBAL_TABLE_VERSIONS:
            raise ValueError(f"version must be one of {GLOBAL_TABLE_VERSIONS}, got {version!r}")
        self.table_name = table_name
        self.regions = sorted(clients)
        self._clients = dict(clients)
        self._clock = clock
        self.delay_seconds = delay_seconds
        self.version = version
        self.stats = ReplicationStats()
        self._stream_arn = {
            region: dynamodb.describe_table(TableName=table_name)["Table"]["LatestStreamArn"]
            for region, (dynamodb, _) in self._clients.items()
        }
        # Per region and shard: the last sequence number read (None: from the start).
        self._positions: dict[str, dict[str, str | None]] = {r: {} for r in self.regions}
        # (target region, change) waiting for its delay or for a region's return.
        self._queue: list[tuple[str, _Change]] = []
        # Writes this replicator made in a region, to tell them apart in its stream.
        self._echoes: dict[str, Counter[str]] = {r: Counter() for r in self.regions}
        # (region, key) -> (time, source region) of the item's last write there.
        self._last_write: dict[tuple[str, str], tuple[float, str]] = {}
        self._cut: set[str] = set()

    # ----------------------------------------------------------------- faults

    def cut_off(self, region: str) -> None:
        """``region`` is lost: nothing replicates from or to it until :meth:`restore`."""
        self._check(region)
        self._cut.add(region)

    def restore(self, region: str) -> None:
        """``region`` is back: what queued up replicates both ways."""
        self._check(region)
        self._cut.discard(region)

    def is_cut_off(self, region: str) -> bool:
        return region in self._cut

    # ---------------------------------------------------------------- polling

    def poll(self) -> PollResult:
        """Read new local writes from every reachable region; apply the replicated writes due."""
        result = PollResult()
        for region in self.regions:
            if region not in self._cut and self._read_stream(region):
                result.progressed = True
        now = self._clock.now()
        waiting: list[tuple[str, _Change]] = []
        for target, change in self._queue:
            if self._blocked(target, change):
                waiting.append((target, change))
            elif change.at + self.delay_seconds <= now:
                self._apply(target, change)
                result.progressed = True
            else:
                waiting.append((target, change))
                result.wait_until(change.at + self.delay_seconds)
        self._queue = waiting
        return result

    def has_pending_work(self) -> bool:
        """Whether a replicated write waits for its delay (not for a region's return)."""
        return any(not self._blocked(target, change) for target, change in self._queue)

    def pending_for(self, region: str) -> int:
        """Replicated writes queued for ``region`` (for example while it is cut off)."""
        return sum(1 for target, _ in self._queue if target == region)

    # --------------------------------------------------------------- internals

    def _check(self, region: str) -> None:
        if region not in self._clients:
            raise ValueError(f"{region} is not a region of this global table ({self.regions})")

    def _blocked(self, target: str, change: _Change) -> bool:
        return target in self._cut or change.source in self._cut

    def _read_stream(self, region: str) -> bool:
        _, streams = self._clients[region]
        arn = self._stream_arn[region]
        moved = False
        description = streams.describe_stream(StreamArn=arn)["StreamDescription"]
        for shard in description.get("Shards", []):
            shard_id = shard["ShardId"]
            last = self._positions[region].get(shard_id)
            kwargs: dict[str, Any] = {"StreamArn": arn, "ShardId": shard_id}
            if last is None:
                kwargs["ShardIteratorType"] = "TRIM_HORIZON"
            else:
                kwargs.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=last)
            iterator: str | None = streams.get_shard_iterator(**kwargs)["ShardIterator"]
            while iterator:
                page = streams.get_records(ShardIterator=iterator, Limit=1000)
                records = page.get("Records", [])
                for record in records:
                    self._positions[region][shard_id] = record["dynamodb"]["SequenceNumber"]
                    self._observe(region, record)
                    moved = True
                iterator = page.get("NextShardIterator") if records else None
        return moved

    def _observe(self, region: str, record: Mapping[str, Any]) -> None:
        data = record["dynamodb"]
        new_image = data.get("NewImage") if record["eventName"] != "REMOVE" else None
        change = _Change(
            source=region,
            at=epoch_seconds(data.get("ApproximateCreationDateTime", self._clock.now())),
            event_name=record["eventName"],
            keys=dict(data["Keys"]),
            new_image=dict(new_image) if new_image is not None else None,
        )
        echo = _fingerprint(change.key_text, change.new_image)
        if self._echoes[region][echo] > 0:
            self._echoes[region][echo] -= 1  # a write this replicator made: not local
            return
        self.stats.local_writes += 1
        self._last_write[(region, change.key_text)] = (change.at, region)
        for target in self.regions:
            if target != region:
                self._queue.append((target, change))

    def _apply(self, target: str, change: _Change) -> None:
        last = self._last_write.get((target, change.key_text))
        if last is not None and last > (change.at, change.source):
            self.stats.conflicts_lost[target] += 1  # a later write there wins
            return
        dynamodb, _ = self._clients[target]
        if change.new_image is None:
            gone = dynamodb.delete_item(
                TableName=self.table_name, Key=change.keys, ReturnValues="ALL_OLD"
            )
            if gone.get("Attributes"):
                self._echoes[target][_fingerprint(change.key_text, None)] += 1
        else:
            image = dict(change.new_image)
            if self.version == VERSION_LEGACY:
                image.update(
                    {
                        "aws:rep:deleting": {"BOOL": False},
                        "aws:rep:updateregion": {"S": change.source},
                        "aws:rep:updatetime": {"N": f"{change.at:.6f}"},
                    }
                )
            dynamodb.put_item(TableName=self.table_name, Item=image)
            self._echoes[target][_fingerprint(change.key_text, image)] += 1
        self._last_write[(target, change.key_text)] = (change.at, change.source)
        self.stats.applied[target] += 1


def _fingerprint(key_text: str, image: Mapping[str, Any] | None) -> str:
    return key_text + "|" + (json.dumps(image, sort_keys=True) if image is not None else "-")
