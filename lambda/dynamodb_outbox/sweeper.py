"""Sweeper: re-publishes outbox items the stream path left behind.

Lambda entry point: ``dynamodb_outbox.sweeper.handler``, run on a schedule.

Stream records live 24 hours and the stream mapping gives up after its retry
budget; from then on the outbox item in the table is the only copy of the
event. The sweeper finds items still pending after a minimum age and publishes
them through the publisher's own core
(:func:`dynamodb_outbox.publishing.publish_outbox_items`): same sink,
batching, failure rules, quarantine and delete.

The rules, and why:

* Reads are proportional to pending items, never to the table: one ``Query``
  per shard of the sparse pending index (only pending outbox items carry the
  shard attribute; a quarantined item has it removed), for sort keys below the
  ULID of ``now - min_age``. ULIDs sort by time, so that bound is "older than
  min age". The index is KEYS_ONLY, so the items are then read by key with a
  consistent ``BatchGetItem``: a stale "pending" would re-send an item the
  stream publisher quarantined (and the delete after it would remove the
  quarantine record), and on an ordered sink a stale "gone" lets a later
  sequence go out (docs/decisions.md, "The sweeper's read-back"). Never a
  ``Scan``.
* A run is bounded by ``max_items`` and by the Lambda's remaining time; what it
  does not reach stays pending for the next run.
* A retryable failure is retried within the run, with backoff, as the stream
  publisher does; an entry still failing when the time or attempts run out
  stops the run: the sink is throttled or down, and hammering it helps no one.
  The rest stays pending.
* Overlapping with the stream publisher can only duplicate an event, never lose
  one: an item is deleted only after its event was published (by whichever path
  did it), and the quarantine write never recreates an item that is gone. The
  sweeper re-reads each item before publishing and skips those already gone or
  no longer pending. Consumers absorb duplicates by event id.
* On a sink that keeps order per subject (SNS FIFO), a subject never has a
  later event sent ahead of an earlier one that is still pending
  (docs/decisions.md, "What "in order per subject" means"). A key that
  BatchGetItem left unread stops its partition for the rest of the run (its
  subject is unknown until it is read; order is promised per partition key
  and subject). Events that carry a ``sequence`` go out in sequence order: one
  consistent ``Query`` per partition that has such events finds the lower
  sequences still pending (:mod:`dynamodb_outbox.subject_sequences`; charged
  for the full size of the partition's outbox items, docs/decisions.md). A
  lower one older than min age that this run's keys lack is read by key and
  sent first; a subject waits only behind a lower one too young or unread. A
  partition whose Query fails is held for the run, the others go on.
  Publication failures already stop the run (above).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from dynamodb_outbox._clock import remaining_seconds
from dynamodb_outbox.log_keys import loggable_key
from dynamodb_outbox.outbox_item import DEFAULT_PENDING_SHARDS, OUTBOX_SK_PREFIX
from dynamodb_outbox.pending_index import (
    BATCH_GET_MAX_KEYS,
    DEFAULT_PENDING_INDEX,
    DEFAULT_READ_RETRIES,
    QUERY_MAX_PAGE,
    IndexReader,
    OldestFirst,
    ShardCursor,
    is_pending,
    key_id,
    pending_boundary_sk,
    read_back,
    shard_keys,
    sort_key,
    ulid_time,
)
from dynamodb_outbox.publishing import (
    OutboxCandidate,
    PublishDependencies,
    PublisherDynamoDBClient,
    PublishResult,
    describe_error,
    publish_outbox_items,
    table_client,
)
from dynamodb_outbox.regions import SINGLE_REGION, RegionScope, regional_shard
from dynamodb_outbox.settings import (
    DEFAULT_METRICS_NAMESPACE,
    ENV_MAX_ITEMS,
    ENV_MIN_AGE_SECONDS,
    ENV_TABLE_NAME,
    ClientFactory,
    integer_env,
    pending_index_from_environment,
    pending_shards_from_environment,
    region_scope_from_environment,
    required_env,
    sink_from_environment,
    table_keys_from_environment,
)
from dynamodb_outbox.sinks import Sink, sink_client
from dynamodb_outbox.stream_types import AttributeMap
from dynamodb_outbox.subject_sequences import (
    PendingSequences,
    lower_pending,
    partition_of,
    pending_sequences,
    sequence_of,
    subject_of,
)
from dynamodb_outbox.table_keys import TableKeys

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

__all__ = [
    "DEFAULT_MAX_ITEMS",
    "DEFAULT_MIN_AGE_SECONDS",
    "DEFAULT_TIME_RESERVE_SECONDS",
    "SweepResult",
    "SweeperDynamoDBClient",
    "SweeperRuntime",
    "default_runtime",
    "handler",
    "record_metrics",
    "runtime_from_environment",
    "sweep",
]

# Well above normal publish latency (the stream mapping polls 4 times a second
# and retries a failed batch within seconds): an item this old was missed.
DEFAULT_MIN_AGE_SECONDS: Final = 300
DEFAULT_MAX_ITEMS: Final = 1000
# Kept free at the end of a run for the deletes of what was just published.
DEFAULT_TIME_RESERVE_SECONDS: Final = 10.0
DEFAULT_SERVICE_NAME: Final = "dynamodb-outbox-sweeper"

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", DEFAULT_SERVICE_NAME))
metrics = Metrics(
    namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", DEFAULT_METRICS_NAMESPACE)
)


class SweeperDynamoDBClient(PublisherDynamoDBClient, IndexReader, Protocol):
    """The part of the boto3 DynamoDB client the sweeper uses (no Scan, on purpose)."""


# -------------------------------------------------------------------------- result


@dataclass
class SweepResult:
    """What one sweep did. ``publish`` holds the shared core's counts."""

    #: items older than min age with ``SK <`` this were looked for.
    boundary_sk: str = ""
    query_calls: int = 0
    #: pending items older than min age found this run (at most ``max_items``).
    pending_items: int = 0
    #: age of the oldest pending item, young ones included; 0 when none is pending.
    oldest_pending_age_seconds: float = 0.0
    oldest_pending_sk: str | None = None
    #: index entries whose sort key is not an outbox key (never published).
    foreign_keys: int = 0
    batch_get_calls: int = 0
    #: items read back by key.
    fetched: int = 0
    #: keys whose item was deleted or no longer pending when read (another path got it).
    not_pending: int = 0
    #: keys DynamoDB left unprocessed after the read retries (next run).
    unfetched: int = 0
    #: multi-region: items read back whose region stamp this sweeper does not take.
    other_region: int = 0
    #: multi-region: adopted regions' items released (``outbox-ops release``) less than
    #: ``adopt_after_seconds`` ago: their own region's sweeper publishes them while it is up.
    adoption_waits_for_release: int = 0
    #: keys left pending because an earlier event of their subject could not go
    #: first (ordered sinks only): an unread key of their partition, or a lower
    #: ``sequence`` of their subject still pending.
    held: int = 0
    #: consistent queries of one partition's pending sequences (ordered sinks only).
    partition_queries: int = 0
    #: partition Queries that failed; their partition was held for the run.
    sequence_query_failures: int = 0
    #: lower sequences not among the keys taken (newer ids, or past ``max_items``)
    #: read by key and sent before the events they held (ordered sinks only).
    blockers_sent_first: int = 0
    #: more old items than this run took (``max_items``, time, or a failure).
    more_pending: bool = False
    #: why the run stopped early: ``max_items``, ``time`` or ``retryable_failure``.
    stopped_by: str | None = None
    #: the outbox sort key where a retryable failure stopped the run.
    failure_sk: str | None = None
    publish: PublishResult = field(default_factory=PublishResult)

    @property
    def swept(self) -> int:
        return self.publish.published


# ------------------------------------------------------------------------- the run


class _Sweep:
    def __init__(
        self,
        deps: PublishDependencies[SweeperDynamoDBClient],
        *,
        index_name: str,
        shards: int,
        min_age_seconds: int,
        max_items: int,
        now: datetime,
        time_left: Callable[[], float] | None,
        time_reserve_seconds: float,
        read_retries: int,
        region_scope: RegionScope,
    ) -> None:
        if isinstance(min_age_seconds, bool) or min_age_seconds < 0:
            raise ValueError(f"min_age_seconds must be >= 0, got {min_age_seconds}")
        if isinstance(max_items, bool) or max_items < 1:
            raise ValueError(f"max_items must be >= 1, got {max_items}")
        self.deps = deps
        self.table_name = deps.table_name
        self.dynamodb = deps.dynamodb_client
        self.index_name = index_name
        # Multi-region: this region's shards (and adopted regions', and the
        # unprefixed ones where this region takes unstamped items), never others'.
        self.region_scope = region_scope
        self.shards = [
            regional_shard(shard, region)
            for region in region_scope.shard_regions()
            for shard in shard_keys(shards)
        ]
        # Multi-region, where this region does not take unstamped items: their
        # shards are read for the age metric only. An unstamped item no region
        # publishes (none set publishes_unstamped, or that region is lost) then
        # raises every region's oldest-pending alarm instead of none.
        self._watched_shards = (
            shard_keys(shards) if region_scope.multi_region and not region_scope.unstamped else []
        )
        self._adopted_shards = {
            regional_shard(shard, region)
            for region in region_scope.adopted
            for shard in shard_keys(shards)
        }
        self.min_age_seconds = min_age_seconds
        self.max_items = max_items
        self.now = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
        self.time_left = time_left
        self.time_reserve_seconds = time_reserve_seconds
        self.sleep = deps.sleep
        self.read_retries = read_retries
        self.table_keys = deps.table_keys
        self.ordered = deps.sink.rules.orders_by_subject
        # Ordered sinks only: partitions stopped for the rest of the run (an unread
        # key), the pending sequences of each partition read so far (subject ->
        # [(sequence, sort key)] ascending), and the sort keys this run has sent
        # (or quarantined) or found gone.
        self._stopped_partitions: set[str] = set()
        self._sequences: dict[str, PendingSequences] = {}
        self._settled: set[str] = set()
        # Keys left pending by the read-back (unread, or held on an ordered sink).
        self._more_from_reads = False
        # Spread the budget over the shards (the hash spreads items evenly), so a
        # backlog costs about ``max_items`` keys read, not ``shards * max_items``.
        self.page_limit = max(1, min(QUERY_MAX_PAGE, -(-max_items // len(self.shards))))
        self.result = SweepResult(
            boundary_sk=pending_boundary_sk(self.now - timedelta(seconds=min_age_seconds))
        )
        # An adopted region's items are taken only once older than this (its own
        # sweeper takes them after min age while that region is up).
        adopt_age = max(min_age_seconds, region_scope.adopt_after_seconds)
        self._adoption_boundary_sk = pending_boundary_sk(self.now - timedelta(seconds=adopt_age))

    # -- reads

    def query(self, request: dict[str, Any]) -> Mapping[str, Any]:
        self.result.query_calls += 1
        return self.dynamodb.query(
            TableName=self.table_name,
            IndexName=self.index_name,
            ScanIndexForward=True,
            **request,
        )

    def _oldest_young_key(self, shard: str) -> AttributeMap | None:
        """The oldest key of a shard with nothing older than min age (for the age metric)."""
        return ShardCursor(self.query, shard, page_limit=1, table_keys=self.table_keys).peek()

    def _boundary_of(self, shard: str) -> str:
        if shard in self._adopted_shards:
            return self._adoption_boundary_sk
        return self.result.boundary_sk

    def out_of_time(self) -> bool:
        return self.time_left is not None and self.time_left() < self.time_reserve_seconds

    def pending_keys(self) -> OldestFirst:
        """Old pending keys, oldest first across shards (``take_keys`` takes them)."""
        cursors = [
            ShardCursor(
                self.query,
                shard,
                sort_key_condition="#sk < :boundary",
                values={":boundary": {"S": self._boundary_of(shard)}},
                page_limit=self.page_limit,
                table_keys=self.table_keys,
            )
            for shard in self.shards
        ]
        oldest: list[str] = []
        for cursor in cursors:
            head = cursor.peek()
            if head is None:
                head = self._oldest_young_key(cursor.shard)
            if head is not None:
                oldest.append(sort_key(head, self.table_keys))
        for shard in self._watched_shards:
            head = self._oldest_young_key(shard)
            if head is not None:
                oldest.append(sort_key(head, self.table_keys))
        self._record_oldest(oldest)
        return OldestFirst(cursors)

    def take_keys(self, merged: OldestFirst, limit: int) -> list[AttributeMap]:
        """The next outbox keys of ``merged``, at most ``limit``."""
        keys: list[AttributeMap] = []
        more = False
        self.result.stopped_by = None
        while merged.peek() is not None:
            if self.out_of_time():
                self.result.stopped_by, more = "time", True
                break
            key = merged.pop()
            if sort_key(key, self.table_keys).startswith(OUTBOX_SK_PREFIX):
                keys.append(key)
            else:  # a non-outbox item carrying the shard attribute: never ours to publish
                self.result.foreign_keys += 1
                logger.warning(
                    "pending index holds a non-outbox key; ignored",
                    extra={"key": loggable_key(key, self.table_keys)},
                )
            if len(keys) >= limit:
                # No peek: it could read a page this run would not use.
                more = merged.has_more()
                self.result.stopped_by = "max_items" if more else None
                break
        self.result.more_pending = more or self._more_from_reads
        self.result.pending_items += len(keys)
        return keys

    def _record_oldest(self, sort_keys: Sequence[str]) -> None:
        for sk in sorted(text for text in sort_keys if text.startswith(OUTBOX_SK_PREFIX)):
            made = ulid_time(sk)
            if made is None:
                logger.warning("pending outbox key is not a ULID", extra={"sk": sk})
                continue
            self.result.oldest_pending_sk = sk
            self.result.oldest_pending_age_seconds = max(0.0, (self.now - made).total_seconds())
            return

    def fetch(self, keys: Sequence[AttributeMap]) -> list[AttributeMap]:
        """The items of ``keys`` that are still pending, in the order of ``keys``."""
        read = read_back(
            self.dynamodb,
            self.table_name,
            keys,
            # Consistent on every sink: a stale "pending" re-sends an item the
            # publisher quarantined and then deletes its quarantine record;
            # ordered, a stale "gone" releases later sequences.
            consistent=True,
            retries=self.read_retries,
            sleep=self.sleep,
            may_retry=lambda: not self.out_of_time(),
            table_keys=self.table_keys,
        )
        self.result.batch_get_calls += read.calls
        if read.unread:
            logger.warning(
                "keys left unread; the next run picks them up", extra={"count": len(read.unread)}
            )
        unread_ids = {key_id(key, self.table_keys) for key in read.unread}
        self.result.fetched += len(read.items)
        self.result.unfetched += len(unread_ids)
        self._more_from_reads = self._more_from_reads or bool(unread_ids)
        self.result.more_pending = self.result.more_pending or bool(unread_ids)
        items: list[AttributeMap] = []
        for key in keys:
            partition = self._partition(key)
            if key_id(key, self.table_keys) in unread_ids:
                if self.ordered:  # its subject is unknown: stop its whole partition
                    self._stopped_partitions.add(partition)
                continue
            if self.ordered and partition in self._stopped_partitions:
                self.result.held += 1
                continue
            if self.ordered and sort_key(key, self.table_keys) in self._settled:
                self.result.not_pending += 1  # sent earlier this run, before a later sequence
                continue
            item = read.items.get(key_id(key, self.table_keys))
            if item is None or not is_pending(item):
                # Published and deleted, or quarantined, since the index was read.
                self.result.not_pending += 1
                self._settled.add(sort_key(key, self.table_keys))
                continue
            if not self.region_scope.takes(item):
                # Filed under this region's shards but stamped with another region
                # (a hand-made item, or a writer given the wrong region): the
                # stamp decides, as it does on the stream.
                self.result.other_region += 1
                continue
            if self.region_scope.adoption_waits(item, self.now):
                self.result.adoption_waits_for_release += 1
                continue
            items.append(item)
        if self.ordered:
            items = self._in_sequence_order(items)
            self._more_from_reads = self._more_from_reads or self.result.held > 0
            self.result.more_pending = self.result.more_pending or self.result.held > 0
        return items

    # -- order per subject (ordered sinks)

    def _partition(self, key: Mapping[str, Any]) -> str:
        return partition_of(key, self.table_keys)

    def _in_sequence_order(self, items: list[AttributeMap]) -> list[AttributeMap]:
        """``items`` with each subject's sequenced events in sequence order, held ones left out.

        A subject's events go at the place of its first one in ``items`` (other
        subjects keep their places); an event goes only when every lower
        sequence of its subject still pending in the table goes before it in
        this run. Lower sequences old enough to sweep that ``items`` lacks (their
        ids are newer, or beyond ``max_items``) are read by key and sent first,
        so held keys never fill a run. A partition whose Query fails is held
        for this run, and the run goes on with the others.
        """
        for item in items:
            if sequence_of(item) is not None and subject_of(item) is not None:
                self._pending_sequences(item, self._partition(item))
        if self._stopped_partitions:  # a Query failed: its partition waits for the next run
            kept = [item for item in items if self._partition(item) not in self._stopped_partitions]
            self.result.held += len(items) - len(kept)
            items = kept
        groups: dict[tuple[str, str], list[int]] = {}
        for place, item in enumerate(items):
            subject = subject_of(item)
            if sequence_of(item) is not None and subject is not None:
                groups.setdefault((self._partition(item), subject), []).append(place)
        if not groups:
            return items
        blockers = self._read_blockers(items, groups)
        placed: list[list[AttributeMap]] = [[item] for item in items]
        for (partition, subject), places in groups.items():
            ready = {sort_key(items[place], self.table_keys): items[place] for place in places}
            highest = max(sequence_of(items[place]) or 0 for place in places)
            taken: list[AttributeMap] = []
            # Held events are not settled: a later page meets them in this walk and
            # stops there, so nothing passes them within the run.
            for sequence, sk in self._sequences[partition].get(subject, []):
                if sk in self._settled:
                    continue
                if sk not in ready and sk in blockers and sequence < highest:
                    taken.append(blockers.pop(sk))  # read for this subject: sent first
                    self.result.blockers_sent_first += 1
                    continue
                if sk not in ready:
                    break  # a lower sequence this run cannot send first
                taken.append(ready.pop(sk))
            if ready:
                self.result.held += len(ready)
                logger.info(
                    "subject held behind a lower pending sequence",
                    extra={
                        "held": len(ready),
                        "key": loggable_key(
                            self.table_keys.key_of(items[places[0]]), self.table_keys
                        ),
                    },
                )
            for place in places:
                placed[place] = []
            placed[places[0]] = taken
            self._settled.update(sort_key(item, self.table_keys) for item in taken)
        return [item for group in placed for item in group]

    def _read_blockers(
        self, items: Sequence[AttributeMap], groups: Mapping[tuple[str, str], list[int]]
    ) -> dict[str, AttributeMap]:
        """Lower pending sequences of ``groups`` old enough to sweep and not in ``items``, read.

        By sort key; only those still pending. Unread ones stay out (their
        subject is held).
        """
        present = {sort_key(item, self.table_keys) for item in items}
        wanted: list[AttributeMap] = []
        for (partition, subject), places in groups.items():
            highest = max(sequence_of(items[place]) or 0 for place in places)
            partition_value = items[places[0]][self.table_keys.partition]
            for sk in lower_pending(
                self._sequences[partition], subject, highest, self._settled | present
            ):
                if sk >= self.result.boundary_sk:
                    break  # too young: the stream path may be sending it now
                wanted.append(
                    {self.table_keys.partition: partition_value, self.table_keys.sort: {"S": sk}}
                )
        found: dict[str, AttributeMap] = {}
        for start in range(0, len(wanted), BATCH_GET_MAX_KEYS):
            read = read_back(
                self.dynamodb,
                self.table_name,
                wanted[start : start + BATCH_GET_MAX_KEYS],
                retries=self.read_retries,
                sleep=self.sleep,
                may_retry=lambda: not self.out_of_time(),
                table_keys=self.table_keys,
            )
            self.result.batch_get_calls += read.calls
            self.result.unfetched += len(read.unread)
            unread = {key_id(key, self.table_keys) for key in read.unread}
            for key in wanted[start : start + BATCH_GET_MAX_KEYS]:
                item = read.items.get(key_id(key, self.table_keys))
                if item is not None and is_pending(item):
                    found[sort_key(key, self.table_keys)] = item
                elif key_id(key, self.table_keys) not in unread:
                    # Published and deleted, or quarantined, since the Query.
                    self._settled.add(sort_key(key, self.table_keys))
        return found

    def _pending_sequences(
        self, item: Mapping[str, Any], partition: str
    ) -> PendingSequences | None:
        """The partition's pending sequenced events (read once per run); None if it is held."""
        if partition in self._stopped_partitions:
            return None
        known = self._sequences.get(partition)
        if known is None:
            try:
                known, calls = pending_sequences(
                    self.dynamodb,
                    self.table_name,
                    item[self.table_keys.partition],
                    self.table_keys,
                )
            except (ClientError, BotoCoreError) as exc:
                self.result.sequence_query_failures += 1
                self._stopped_partitions.add(partition)
                logger.warning(
                    "cannot query a partition's pending sequences; it is held for this run",
                    extra={
                        "key": loggable_key(self.table_keys.key_of(item), self.table_keys),
                        "error": describe_error(exc),
                    },
                )
                return None
            self.result.partition_queries += calls
            self._sequences[partition] = known
        return known

    # -- the run

    def run(self) -> SweepResult:
        merged = self.pending_keys()
        publish = self.result.publish
        position = 0
        budget = self.max_items
        stopped = False
        # Rounds: an adopted region's released item still waiting for its own
        # region (known only once read back: the index holds keys) uses none of
        # the run's budget, so the keys behind it are taken in a further round.
        # Without it, max_items waiting items starved every other pending item.
        while budget > 0 and not stopped:
            keys = self.take_keys(merged, budget)
            waits_before = self.result.adoption_waits_for_release
            for start in range(0, len(keys), BATCH_GET_MAX_KEYS):
                if self.out_of_time():
                    self.result.stopped_by, self.result.more_pending = "time", True
                    stopped = True
                    break
                items = self.fetch(keys[start : start + BATCH_GET_MAX_KEYS])
                candidates = []
                for item in items:
                    candidates.append(
                        OutboxCandidate(
                            key=self.table_keys.key_of(item),
                            item=item,
                            position=position,
                            checkpoint=sort_key(item, self.table_keys),
                        )
                    )
                    position += 1
                publish_outbox_items(
                    candidates,
                    self.deps,
                    should_continue=lambda: not self.out_of_time(),
                    result=publish,
                    time_left=self.time_left,
                )
                if publish.failure_position is not None:
                    self.result.stopped_by, self.result.more_pending = "retryable_failure", True
                    self.result.failure_sk = publish.failure_checkpoint
                    logger.warning(
                        "retryable failure; stopping the sweep, the rest stays pending",
                        extra={"sk": publish.failure_checkpoint},
                    )
                    stopped = True
                    break
                if publish.stopped_at_position is not None:
                    self.result.stopped_by, self.result.more_pending = "time", True
                    stopped = True
                    break
            waited = self.result.adoption_waits_for_release - waits_before
            if self.result.stopped_by != "max_items" or waited == 0:
                break  # nothing left, out of time, or the budget spent on items that went
            budget = waited
        publish.records = position
        return self.result


def sweep(
    deps: PublishDependencies[SweeperDynamoDBClient],
    *,
    index_name: str = DEFAULT_PENDING_INDEX,
    shards: int = DEFAULT_PENDING_SHARDS,
    min_age_seconds: int = DEFAULT_MIN_AGE_SECONDS,
    max_items: int = DEFAULT_MAX_ITEMS,
    now: datetime | None = None,
    time_left: Callable[[], float] | None = None,
    time_reserve_seconds: float = DEFAULT_TIME_RESERVE_SECONDS,
    read_retries: int = DEFAULT_READ_RETRIES,
    region_scope: RegionScope = SINGLE_REGION,
) -> SweepResult:
    """Publish pending outbox items older than ``min_age_seconds``; delete what was published.

    ``deps`` says where to publish and which table to read (its client must
    read the pending index too); its ``sleep`` also paces the read retries.
    ``now`` (default: ``deps.clock()``) sets the age boundary. ``time_left`` returns
    the seconds the invocation has left (the handler passes the Lambda
    context's); the run stops taking new work when fewer than
    ``time_reserve_seconds`` remain. ``shards`` must match the writers'
    ``pending_shards``. Query and BatchGetItem errors propagate (nothing has been
    published for the keys they concern); publish failures follow the
    publisher's rules: retried within the run's time, and an entry still
    failing then stops the run. ``deps.table_keys`` names the table's key
    attributes; the pending index's sort key is the table's sort key.
    ``region_scope`` (multi-region, :mod:`dynamodb_outbox.regions`) says whose
    pending shards are read and whose items are published: this region's, the
    unstamped ones where it takes them, and those of the regions it adopts.
    """
    return _Sweep(
        deps,
        index_name=index_name,
        shards=shards,
        min_age_seconds=min_age_seconds,
        max_items=max_items,
        now=now if now is not None else deps.clock(),
        time_left=time_left,
        time_reserve_seconds=time_reserve_seconds,
        read_retries=read_retries,
        region_scope=region_scope,
    ).run()


# ------------------------------------------------------------------------- handler


class SweeperRuntime(NamedTuple):
    """What the handler needs from its environment, built once per execution environment."""

    sink: Sink
    table_name: str
    dynamodb_client: SweeperDynamoDBClient
    index_name: str
    shards: int
    min_age_seconds: int
    max_items: int
    table_keys: TableKeys
    region_scope: RegionScope = SINGLE_REGION


def runtime_from_environment(
    environ: Mapping[str, str] | None = None,
    client_factory: ClientFactory | None = None,
) -> SweeperRuntime:
    """The sweeper's settings; raises :class:`ConfigurationError` naming a bad variable."""
    environ = os.environ if environ is None else environ
    return SweeperRuntime(
        # The sink's client without botocore's parameter validation (sinks.sink_client).
        sink=sink_from_environment(environ, client_factory or sink_client),
        table_name=required_env(ENV_TABLE_NAME, environ),
        # Without botocore's parameter validation (publishing.table_client).
        dynamodb_client=client_factory("dynamodb") if client_factory else table_client(),
        index_name=pending_index_from_environment(environ),
        shards=pending_shards_from_environment(environ),
        min_age_seconds=integer_env(environ, ENV_MIN_AGE_SECONDS, DEFAULT_MIN_AGE_SECONDS, 0),
        max_items=integer_env(environ, ENV_MAX_ITEMS, DEFAULT_MAX_ITEMS, 1),
        table_keys=table_keys_from_environment(environ),
        region_scope=region_scope_from_environment(environ),
    )


@cache
def default_runtime() -> SweeperRuntime:
    """:func:`runtime_from_environment` once per execution environment.

    ``default_runtime.cache_clear()`` forgets it (tests that change the environment).
    """
    return runtime_from_environment()


def record_metrics(result: SweepResult, target: Metrics, sink_name: str) -> None:
    """Every value, zeros included, so dashboards and alarms see a steady series."""
    counts = {
        "SweptEvents": result.swept,
        "PendingItems": result.pending_items,
        "QuarantinedEvents": result.publish.quarantined,
        "RetryableFailures": result.publish.retryable_failures,
        "DeleteLeftovers": result.publish.delete_leftovers,
        f"{sink_name}Calls": result.publish.send_calls,
        # Ordered sinks: items left pending behind an earlier event of their subject,
        # lower sequences read and sent first, partition Queries that failed.
        "HeldItems": result.held,
        "SentFirstEvents": result.blockers_sent_first,
        "SequenceReadFailures": result.sequence_query_failures,
        # Multi-region: adopted regions' released items left to their own region.
        "AdoptionWaitsForRelease": result.adoption_waits_for_release,
    }
    for name, value in counts.items():
        target.add_metric(name=name, unit=MetricUnit.Count, value=value)
    target.add_metric(
        name="OldestPendingAgeSeconds",
        unit=MetricUnit.Seconds,
        value=result.oldest_pending_age_seconds,
    )


def _summary(result: SweepResult) -> dict[str, Any]:
    summary = asdict(result)
    summary["swept"] = result.swept
    return summary


@logger.inject_lambda_context(clear_state=True)
def handler(event: Mapping[str, Any] | None, context: LambdaContext) -> dict[str, Any]:
    """Lambda entry point: ``dynamodb_outbox.sweeper.handler`` (the scheduled event is ignored)."""
    runtime = default_runtime()  # a configuration error fails the invocation, visibly
    result = sweep(
        PublishDependencies(
            runtime.sink,
            runtime.table_name,
            runtime.dynamodb_client,
            table_keys=runtime.table_keys,
        ),
        index_name=runtime.index_name,
        shards=runtime.shards,
        min_age_seconds=runtime.min_age_seconds,
        max_items=runtime.max_items,
        time_left=remaining_seconds(context),
        region_scope=runtime.region_scope,
    )
    record_metrics(result, metrics, runtime.sink.rules.name)
    metrics.flush_metrics()
    logger.info("sweep done", extra={"result": _summary(result)})
    return _summary(result)
