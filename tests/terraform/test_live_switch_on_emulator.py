"""The transport switch by its runbook, events flowing: nothing lost, nothing twice.

tests/terraform/live_flow.py (scenario ``switch``) applies its own copy of
examples/local (EventBridge, consumer ``audit``) to its own emulator, then
follows docs/live-changes.md, "Switching publish_to", while the shipped writer
commits orders and the local runtime pumps the deployed mappings:

1. pause publishing (``stream_mapping`` and ``sweeper`` disabled), apply;
2. once the queues drained, switch ``publish_to`` to ``sns`` (acknowledged),
   still paused, apply;
3. resume, apply: what was written meanwhile goes out on SNS.

About three and a half minutes (four applies), once for the module, in a
process of its own. Marked ``slow``: it does not fit in ``make test``'s
5-minute budget beside the rest, so ``make test-slow`` runs it (and ``make
test`` names it as left out). In ``make test`` the switch is covered by the
generated-input campaign's ``switch_to`` draw and by the runbook's plans on the
mock provider (live_changes_root.tftest.hcl).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.terraform.live_flow import SCENARIOS, run_in_a_process, written_ids

pytestmark = [pytest.mark.terraform, pytest.mark.apply, pytest.mark.slow]


@pytest.fixture(scope="module")
def facts(tf_cli_config: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The run's facts; ``tf_cli_config`` skips loudly without terraform or the mirror."""
    return run_in_a_process("switch", tmp_path_factory.mktemp("live-switch"))


def test_events_were_written_while_each_runbook_step_was_applied(facts: dict[str, Any]) -> None:
    assert [step["name"] for step in facts["steps"]] == [
        step.name for step in SCENARIOS["switch"].steps
    ]
    for number, step in enumerate(facts["steps"], start=1):
        during = [w for w in facts["written"] if w["step"] == number and w["during_apply"]]
        assert step["written_during_apply"] == len(during) > 0, step["name"]


def test_every_event_took_effect_once_across_the_switch(facts: dict[str, Any]) -> None:
    ledger = facts["end"]["ledgers"]["audit"]
    written = written_ids(facts)

    assert set(ledger) == written, {
        "lost": sorted(written - set(ledger))[:5],
        "unknown": sorted(set(ledger) - written)[:5],
    }
    assert {event: n for event, n in ledger.items() if n != 1} == {}


def test_redeliveries_reached_the_consumer_and_took_effect_once(facts: dict[str, Any]) -> None:
    """'Took effect once' must be able to fail: Lambda delivers at least
    once, and a flow that never delivers twice passes a consumer without idempotency."""
    assert facts["redeliveries"]["publisher"] > 0
    assert facts["redeliveries"]["audit"] > 0


def test_the_queue_was_drained_before_the_switch(facts: dict[str, Any]) -> None:
    assert facts["steps"][1]["drained_before"] == {"audit": {"queue": 0, "dlq": 0}}


def test_nothing_is_left_pending_in_flight_or_dropped(facts: dict[str, Any]) -> None:
    end = facts["end"]
    assert end["outbox_items_left"] == []
    assert end["depths"] == {"audit": {"queue": 0, "dlq": 0}}
    assert end["on_failure_depth"] == 0
    assert end["publisher_failure_records"] == 0
    assert end["dropped_at_seams"] == end["dead_lettered_at_seams"] == 0


def test_each_runbook_step_took_effect_in_the_emulator(facts: dict[str, Any]) -> None:
    initial, paused, switched, resumed = facts["initial"], *facts["steps"]
    assert initial["event_bus_name"] and initial["sns_topic_arn"] is None
    assert initial["publisher"]["mapping_state"] == "Enabled"
    assert paused["publisher"]["mapping_state"] == "Disabled"
    assert switched["event_bus_name"] is None and switched["sns_topic_arn"]
    assert switched["publisher"]["mapping_state"] == "Disabled"
    assert switched["publisher"]["sink"] != paused["publisher"]["sink"]
    assert resumed["publisher"]["mapping_state"] == "Enabled"
    # The publisher's new environment is a cold start, as on Lambda.
    assert facts["cold_starts"]["publisher"] >= 2
