"""The call-counting part of `make bench`, at stream batch size 100 (counts, not timings).

Ours batches 10 entries per PutEvents and 25 deletes per BatchWriteItem
(10 + 4 calls for 100 events); the baseline makes one PutEvents and one
DeleteItem per event. Both run on moto in-process with the same records.
"""

from __future__ import annotations

from benchmarks.measures import calls_goal, count_calls


def test_calls_per_event_at_batch_size_100() -> None:
    (row,) = count_calls((100,))

    ours, baseline = row["ours"], row["baseline"]
    assert ours["events"] == baseline["events"] == 100
    assert ours["calls_per_event"] <= 0.15, ours["by_operation"]
    assert ours["by_operation"] == {"PutEvents": 10, "BatchWriteItem": 4}
    assert baseline["calls_per_event"] == 2.0
    assert baseline["by_operation"] == {"PutEvents": 100, "DeleteItem": 100}
    assert calls_goal(100) == 0.15
