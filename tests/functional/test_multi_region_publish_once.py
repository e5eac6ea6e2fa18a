"""Multi-region: an outbox item is published only by the region that wrote it.

One moto table stands for one replica of a global table: items stamped with
another region are what that region's writes look like once replicated here
(every replica holds every item, and its stream carries every INSERT).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from dynamodb_outbox.local.filters import RecordFilter
from dynamodb_outbox.outbox_item import ATTR_PENDING_SHARD, OUTBOX_SK_PREFIX, outbox_item
from dynamodb_outbox.publisher import publish_stream_batch
from dynamodb_outbox.publishing import PublishDependencies
from dynamodb_outbox.regions import (
    ATTR_REGION,
    ATTR_RELEASED_AT,
    SINGLE_REGION,
    RegionScope,
    region_of,
    stream_filter_patterns,
)
from dynamodb_outbox.settings import ConfigurationError, region_scope_from_environment
from dynamodb_outbox.sinks import EventBridgeSink
from dynamodb_outbox.sweeper import SweepResult, record_metrics, sweep
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS
from dynamodb_outbox.writer import InvalidWrite, OutboxWriter
from tests.factories import make_envelope, stream_record
from tests.functional.outbox_helpers import FIXED_NOW, RecordingEvents, ulid_at

if TYPE_CHECKING:
    from tests.functional.conftest import EventBus, OutboxTable

HOME, OTHER, THIRD = "us-east-1", "eu-west-1", "ap-southeast-2"
OLD = FIXED_NOW - timedelta(minutes=10)


def _item(pk: str, region: str | None, n: int = 0) -> tuple[str, dict[str, Any]]:
    envelope = make_envelope(id=ulid_at(OLD + timedelta(milliseconds=n)))
    return envelope.id, outbox_item(pk, envelope, region=region)


def _deps(table: OutboxTable, bus: EventBus) -> PublishDependencies[Any]:
    return PublishDependencies(
        sink=EventBridgeSink(RecordingEvents(bus.client), bus.name),
        table_name=table.name,
        dynamodb_client=table.client,
        sleep=lambda _: None,
        clock=lambda: FIXED_NOW,
        table_keys=DEFAULT_TABLE_KEYS,
    )


def _sweep(table: OutboxTable, bus: EventBus, scope: RegionScope) -> Any:
    return sweep(_deps(table, bus), min_age_seconds=300, now=FIXED_NOW, region_scope=scope)


# ------------------------------------------------------------------------- the writer


def test_the_writer_stamps_its_region_and_files_the_item_under_its_regions_shards(
    outbox_table: OutboxTable,
) -> None:
    writer = OutboxWriter(outbox_table.name, outbox_table.client, region=OTHER)

    result = writer.write(
        {"PK": "ORDER#1", "SK": "ORDER"}, [writer.new_event("ORDER#1", "T", {}, source="orders")]
    )

    item = outbox_table.get(
        {"PK": {"S": "ORDER#1"}, "SK": {"S": OUTBOX_SK_PREFIX + result.event_ids[0]}}
    )
    assert item is not None
    assert item[ATTR_REGION] == {"S": OTHER}
    assert item[ATTR_PENDING_SHARD]["S"].startswith(f"{OTHER}#")


def test_a_single_region_writer_stamps_nothing(outbox_table: OutboxTable) -> None:
    writer = OutboxWriter.from_environment(
        {"OUTBOX_TABLE_NAME": outbox_table.name, "AWS_REGION": HOME}, outbox_table.client
    )

    result = writer.write(
        {"PK": "ORDER#1", "SK": "ORDER"}, [writer.new_event("ORDER#1", "T", {}, source="orders")]
    )

    item = outbox_table.get(
        {"PK": {"S": "ORDER#1"}, "SK": {"S": OUTBOX_SK_PREFIX + result.event_ids[0]}}
    )
    assert item is not None and ATTR_REGION not in item
    assert "#" not in item[ATTR_PENDING_SHARD]["S"]


def test_the_writer_takes_the_runtime_region_when_the_module_says_multi_region() -> None:
    environ = {"OUTBOX_TABLE_NAME": "orders", "OUTBOX_MULTI_REGION": "true", "AWS_REGION": OTHER}

    assert OutboxWriter.from_environment(environ).region == OTHER
    with pytest.raises(InvalidWrite, match="AWS_REGION is not set"):
        OutboxWriter.from_environment({**environ, "AWS_REGION": ""})
    with pytest.raises(InvalidWrite, match="OUTBOX_MULTI_REGION must be true or false"):
        OutboxWriter.from_environment({**environ, "OUTBOX_MULTI_REGION": "yes"})
    with pytest.raises(InvalidWrite, match="region"):
        OutboxWriter("orders", region="eu#west-1")


# ---------------------------------------------------------------------- the stream


def test_the_stream_filter_admits_only_this_regions_inserts() -> None:
    _, home = _item("ORDER#1", HOME)
    _, other = _item("ORDER#2", OTHER)
    _, unstamped = _item("ORDER#3", None)
    records = {
        name: stream_record(item, "1")
        for name, item in {"home": home, "other": other, "unstamped": unstamped}.items()
    }
    records["home delete"] = stream_record(home, "2", "REMOVE")

    def admitted(scope: RegionScope) -> set[str]:
        matcher = RecordFilter(stream_filter_patterns("SK", OUTBOX_SK_PREFIX, scope))
        return {name for name, record in records.items() if matcher.matches(record)}

    assert admitted(RegionScope(HOME)) == {"home"}
    assert admitted(RegionScope(HOME, unstamped=True)) == {"home", "unstamped"}
    assert admitted(RegionScope(OTHER)) == {"other"}
    assert admitted(SINGLE_REGION) == {"home", "other", "unstamped"}


def test_the_filters_are_the_modules() -> None:
    """The JSON tests/terraform/multi_region.tftest.hcl pins for the module's mapping."""
    patterns = [
        json.loads(p)
        for p in stream_filter_patterns(
            "SK", OUTBOX_SK_PREFIX, RegionScope("eu-west-1", unstamped=True)
        )
    ]
    keys = {"SK": {"S": [{"prefix": "OUTBOX#"}]}}
    assert patterns == [
        {
            "eventName": ["INSERT"],
            "dynamodb": {"Keys": keys, "NewImage": {"outbox_region": {"S": ["eu-west-1"]}}},
        },
        {
            "eventName": ["INSERT"],
            "dynamodb": {"Keys": keys, "NewImage": {"outbox_region": {"S": [{"exists": False}]}}},
        },
    ]


def test_the_publisher_checks_the_region_again_in_code(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN a batch that got past the filter with an item of each region and an unstamped one
    items = {
        name: _item(f"ORDER#{n}", region, n)
        for n, (name, region) in enumerate([("home", HOME), ("other", OTHER), ("unstamped", None)])
    }
    for _, item in items.values():
        outbox_table.put(item)
    records = [stream_record(item, str(n + 1)) for n, (_, item) in enumerate(items.values())]

    # WHEN the home region's publisher (taking unstamped items) handles it
    result = publish_stream_batch(
        records,  # type: ignore[arg-type]
        _deps(outbox_table, event_bus),
        region_scope=RegionScope(HOME, unstamped=True),
    )

    # THEN it publishes its own and the unstamped item, and leaves the other region's alone
    assert sorted(event_bus.received_ids()) == sorted([items["home"][0], items["unstamped"][0]])
    assert (result.published, result.skipped) == (2, 1)
    assert outbox_table.sort_keys() == {OUTBOX_SK_PREFIX + items["other"][0]}


def test_a_single_region_publisher_publishes_every_outbox_insert(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    items = [_item(f"ORDER#{n}", region, n) for n, region in enumerate([HOME, OTHER, None])]
    for _, item in items:
        outbox_table.put(item)

    result = publish_stream_batch(
        [stream_record(item, str(n + 1)) for n, (_, item) in enumerate(items)],  # type: ignore[misc]
        _deps(outbox_table, event_bus),
    )

    assert result.published == 3


# ------------------------------------------------------------------------ the sweeper


def test_each_regions_sweeper_sweeps_only_its_own_regions_items(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN old pending items written in three regions, and one written before multi-region
    ids = {}
    for n, (name, region) in enumerate(
        [("home", HOME), ("other", OTHER), ("third", THIRD), ("unstamped", None)]
    ):
        ids[name], item = _item(f"ORDER#{n}", region, n)
        outbox_table.put(item)

    # WHEN the other region's sweeper runs
    other = _sweep(outbox_table, event_bus, RegionScope(OTHER))
    # THEN it publishes its own item only
    assert event_bus.received_ids() == [ids["other"]]
    assert other.pending_items == 1

    # WHEN the home region's sweeper (which takes unstamped items) runs
    home = _sweep(outbox_table, event_bus, RegionScope(HOME, unstamped=True))
    # THEN it publishes its own and the unstamped one; the third region's stays pending
    assert sorted(event_bus.received_ids()) == sorted([ids["home"], ids["unstamped"]])
    assert home.swept == 2
    assert outbox_table.pending_sort_keys() == {OUTBOX_SK_PREFIX + ids["third"]}


def test_the_sweeper_checks_the_stamp_of_what_it_reads_back(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN an item filed under this region's shards but stamped with another region
    _, item = _item("ORDER#1", OTHER)
    item[ATTR_PENDING_SHARD] = {"S": item[ATTR_PENDING_SHARD]["S"].replace(OTHER, HOME)}
    outbox_table.put(item)

    result = _sweep(outbox_table, event_bus, RegionScope(HOME))

    assert event_bus.received_ids() == []
    assert (result.pending_items, result.other_region) == (1, 1)
    assert region_of(outbox_table.get({"PK": item["PK"], "SK": item["SK"]})) == OTHER


# ----------------------------------------------------------------------- the settings


def test_the_region_scope_comes_from_the_modules_variables() -> None:
    base = {"OUTBOX_MULTI_REGION": "true", "AWS_REGION": HOME}

    assert region_scope_from_environment({"AWS_REGION": HOME}) == SINGLE_REGION
    assert region_scope_from_environment(base) == RegionScope(HOME, unstamped=False)
    assert region_scope_from_environment(
        {
            **base,
            "OUTBOX_PUBLISHES_UNSTAMPED": "true",
            "OUTBOX_ADOPTED_REGIONS": f"{OTHER}, {THIRD}",
        }
    ) == RegionScope(HOME, unstamped=True, adopted=(OTHER, THIRD))
    assert region_scope_from_environment(
        {**base, "OUTBOX_ADOPTED_REGIONS": OTHER, "OUTBOX_ADOPT_AFTER_SECONDS": "900"}
    ) == RegionScope(HOME, adopted=(OTHER,), adopt_after_seconds=900)
    with pytest.raises(ConfigurationError, match="OUTBOX_ADOPT_AFTER_SECONDS"):
        region_scope_from_environment({**base, "OUTBOX_ADOPT_AFTER_SECONDS": "-1"})
    with pytest.raises(ConfigurationError, match="OUTBOX_ADOPTED_REGIONS"):
        region_scope_from_environment({**base, "OUTBOX_ADOPTED_REGIONS": HOME})
    with pytest.raises(ConfigurationError, match="OUTBOX_ADOPTED_REGIONS is set but"):
        region_scope_from_environment({"OUTBOX_ADOPTED_REGIONS": OTHER})
    with pytest.raises(ConfigurationError, match="AWS_REGION is not set"):
        region_scope_from_environment({"OUTBOX_MULTI_REGION": "true"})


def test_a_standing_adoption_takes_another_regions_items_only_past_its_age(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN an item of another region 10 minutes old, one 2 hours old, and one of this region
    young_id, young = _item("ORDER#1", OTHER)
    stranded = make_envelope(id=ulid_at(FIXED_NOW - timedelta(hours=2)))
    own_id, own = _item("ORDER#3", HOME, 3)
    for item in (young, outbox_item("ORDER#2", stranded, region=OTHER), own):
        outbox_table.put(item)

    # WHEN this region's sweeper runs with other's region adopted after an hour
    scope = RegionScope(HOME, adopted=(OTHER,), adopt_after_seconds=3600)
    result = _sweep(outbox_table, event_bus, scope)

    # THEN the stranded item and its own one go out; the young one is left to its region
    assert sorted(event_bus.received_ids()) == sorted([stranded.id, own_id])
    assert result.swept == 2
    assert outbox_table.pending_sort_keys() == {OUTBOX_SK_PREFIX + young_id}


def test_a_standing_adoption_counts_a_released_items_age_from_its_release(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # GIVEN three items of another region, all written 2 hours ago (their event ids'
    # time): one released 10 minutes ago, one released 2 hours ago, one never released,
    # and one of this region released a minute ago
    at = {
        name: make_envelope(id=ulid_at(FIXED_NOW - timedelta(hours=2, milliseconds=-n)))
        for n, name in enumerate(["recent", "old", "never", "own"])
    }
    released = {
        "recent": FIXED_NOW - timedelta(minutes=10),
        "old": FIXED_NOW - timedelta(hours=2),
        "own": FIXED_NOW - timedelta(minutes=1),
    }
    for n, (name, envelope) in enumerate(at.items()):
        item = outbox_item(f"ORDER#{n}", envelope, region=HOME if name == "own" else OTHER)
        if name in released:
            item[ATTR_RELEASED_AT] = {"S": released[name].isoformat().replace("+00:00", "Z")}
        outbox_table.put(item)

    # WHEN this region's sweeper runs, adopting the other region after an hour
    scope = RegionScope(HOME, adopted=(OTHER,), adopt_after_seconds=3600)
    result = _sweep(outbox_table, event_bus, scope)

    # THEN the recently released item is left to its own region (up: it released it),
    # counted as such; the rest go out, this region's own released item at once
    assert sorted(event_bus.received_ids()) == sorted([at["old"].id, at["never"].id, at["own"].id])
    assert (result.adoption_waits_for_release, result.other_region) == (1, 0)
    assert outbox_table.pending_sort_keys() == {OUTBOX_SK_PREFIX + at["recent"].id}


def test_a_key_named_like_the_region_stamp_is_refused() -> None:
    with pytest.raises(InvalidWrite, match="stamps its region"):
        OutboxWriter("orders", partition_key="PK", sort_key=ATTR_REGION)


def test_released_items_waiting_for_their_region_do_not_starve_this_regions_own(
    outbox_table: OutboxTable, event_bus: EventBus
) -> None:
    # Review of issue 29: waiting released items were taken oldest-first up to
    # max_items before the wait was applied, so max_items of them starved the rest.
    # GIVEN five items of another region written 2 hours ago and released a minute
    # ago (that region is up: its own sweeper takes them), and one of this region's
    # own, 10 minutes old
    for n in range(5):
        envelope = make_envelope(id=ulid_at(FIXED_NOW - timedelta(hours=2, milliseconds=-n)))
        item = outbox_item(f"ORDER#o{n}", envelope, region=OTHER)
        item[ATTR_RELEASED_AT] = {
            "S": (FIXED_NOW - timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
        }
        outbox_table.put(item)
    own = make_envelope(id=ulid_at(FIXED_NOW - timedelta(minutes=10)))
    outbox_table.put(outbox_item("ORDER#own", own, region=HOME))

    # WHEN this region's sweeper runs once with max_items = 5, adopting the other
    scope = RegionScope(HOME, adopted=(OTHER,), adopt_after_seconds=3600)
    result = sweep(
        _deps(outbox_table, event_bus),
        min_age_seconds=300,
        now=FIXED_NOW,
        region_scope=scope,
        max_items=5,
    )

    # THEN the waiting items use none of the run's budget: its own item goes out
    assert event_bus.received_ids() == [own.id]
    assert (result.swept, result.adoption_waits_for_release) == (1, 5)
    assert (result.more_pending, result.stopped_by) == (False, None)


def test_adoption_waits_are_a_metric_like_the_other_counters() -> None:
    recorded: dict[str, float] = {}

    class Target:
        def add_metric(self, *, name: str, unit: Any, value: float) -> None:
            recorded[name] = value

    record_metrics(SweepResult(adoption_waits_for_release=3), Target(), "PutEvents")  # type: ignore[arg-type]
    assert recorded["AdoptionWaitsForRelease"] == 3
