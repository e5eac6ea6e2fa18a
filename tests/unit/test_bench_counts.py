"""The call-counting part of `make bench`, at stream batch size 100 (counts, not timings).

Ours batches 10 entries per PutEvents and 25 deletes per BatchWriteItem
(10 + 4 calls for 100 events); the baseline makes one PutEvents and one
DeleteItem per event. Both run on moto in-process with the same records.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.measures import (
    LAYER_ZIP_PATH,
    ZIP_PATH,
    calls_goal,
    count_calls,
    sweeper_reads,
    zip_size,
)

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results.json"


def test_calls_per_event_at_batch_size_100() -> None:
    (row,) = count_calls((100,))

    ours, baseline = row["ours"], row["baseline"]
    assert ours["events"] == baseline["events"] == 100
    assert ours["calls_per_event"] <= 0.15, ours["by_operation"]
    assert ours["by_operation"] == {"PutEvents": 10, "BatchWriteItem": 4}
    assert baseline["calls_per_event"] == 2.0
    assert baseline["by_operation"] == {"PutEvents": 100, "DeleteItem": 100}
    assert calls_goal(100) == 0.15


def test_the_committed_bench_results_describe_the_committed_zips() -> None:
    # results.json is only written by `make bench`; a zip rebuilt since makes it stale.
    zip_size = json.loads(RESULTS.read_text())["zip_size"]

    stale = "benchmarks/results.json is older than package/: run `make bench`"
    assert zip_size["bytes"] == ZIP_PATH.stat().st_size, stale
    assert zip_size.get("layer_bytes") == LAYER_ZIP_PATH.stat().st_size, stale


def test_the_committed_bench_results_give_the_zip_without_bytecode_as_built_now() -> None:
    recorded = json.loads(RESULTS.read_text())["zip_size"]
    fresh = zip_size()

    assert recorded.get("source_only_bytes") == fresh["source_only_bytes"], (
        "benchmarks/results.json is older than lambda/: run `make bench`"
    )
    assert fresh["bytecode_for"] == ["cpython-311", "cpython-312", "cpython-313"]
    assert fresh["source_only_bytes"] < fresh["bytes"] <= fresh["goal_bytes"]


def test_sweeper_read_units_are_one_unit_per_item_read_back_and_half_per_4_kb_scanned() -> None:
    # 10 pending outbox items (each under 4 KB) among 50 entities, 8 index shards.
    reads = sweeper_reads(entities=50, pending=10)

    ours = reads["ours"]
    # The index Query is eventually consistent (GSIs always are); the read-back is
    # consistent (docs/decisions.md, "The sweeper's read-back").
    assert ours["consistent_by_operation"] == {"Query": [False], "BatchGetItem": [True]}
    assert ours["read_units_by_operation"]["BatchGetItem"] == 10 * 1.0
    assert ours["read_units_by_operation"]["Query"] == ours["calls"]["Query"] * 0.5
    scan = reads["baseline_scan"]
    assert scan["items_read"] == 60
    assert scan["read_units"] == 0.5 * -(-scan["table_bytes"] // 4096)
