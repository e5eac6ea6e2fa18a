"""``make demo REGIONS=2``, in-process and small: the report's invariants and figures."""

from __future__ import annotations

import io

from demo import multi_region


def test_two_regions_one_lost_and_adopted_keep_every_invariant() -> None:
    out = io.StringIO()

    report = multi_region.run(12, out)

    assert report["invariants"] == dict.fromkeys(report["invariants"], True), report
    assert report["adopted by the survivor"] > 0
    # the lost region's last order did not replicate out: it waited for the return
    assert report["adopted by the survivor"] < report["orders"][multi_region.LOST]
    # what the survivor adopted, the returning region published again (the worst case)
    assert report["events that took effect in both regions"] == report["adopted by the survivor"]
    assert "phase 4" in out.getvalue()
