"""Campaign counters survive the trip from xdist workers to the controller.

Under ``make test`` the campaigns of tests/reliability run on workers; the
controller prints the totals (tests/conftest.py), so each worker's counters must
add up, and maxima stay maxima.
"""

from __future__ import annotations

from collections import Counter

from tests.reliability.campaign import Campaign
from tests.reliability.generated import GeneratedCampaign


def test_campaign_counters_from_two_workers_add_up_and_maxima_stay_maxima() -> None:
    first, second, total = Campaign(profile="ci"), Campaign(profile="ci"), Campaign()
    first.add(Counter({"events committed": 40, "losses": 0}), Counter({"throttled": 3}))
    first.maximum("max deliveries of one stream record", 3)
    second.add(Counter({"events committed": 60}), Counter({"throttled": 2, "crash": 1}))
    second.maximum("max deliveries of one stream record", 2)

    total.merge(first.to_wire())
    total.merge(second.to_wire())

    assert total.profile == "ci"
    assert total.figures["examples"] == 2
    assert total.figures["events committed"] == 100
    assert total.figures["max deliveries of one stream record"] == 3
    assert total.faults == Counter({"throttled": 5, "crash": 1})
    # no process saw the whole campaign, so no wall time is claimed for it
    assert not any(line.startswith("  wall time") for line in total.lines())
    assert any(line.startswith("  wall time") for line in first.lines())


def test_generated_counters_from_two_workers_add_up() -> None:
    first, second, total = GeneratedCampaign("ci"), GeneratedCampaign("ci"), GeneratedCampaign()
    first.records["stream records"] += 10
    first.invariants["no batch failed"] += 2
    second.records["stream records"] += 5
    second.outcomes["writer accepted"] += 4

    total.merge(first.to_wire())
    total.merge(second.to_wire())

    assert (total.profile, total.total) == ("ci", 15)
    assert total.outcomes["writer accepted"] == 4
    assert total.invariants["no batch failed"] == 2
