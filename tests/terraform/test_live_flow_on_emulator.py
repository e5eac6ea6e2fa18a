"""Events flowing while an owner adds, changes and removes consumers: nothing lost, nothing twice.

tests/terraform/live_flow.py (scenario ``consumers``) applies its own copy of
examples/local to its own emulator, with consumers ``audit`` and ``shipping``,
then, while the shipped writer commits orders and the local runtime pumps the
deployed mappings (following each change as Lambda's pollers do):

1. adds ``billing``, changes ``audit``'s batch size, turns tracing on, moves to
   another Powertools release, and retires ``shipping`` (docs/live-changes.md,
   the removal runbook's first step), in one apply;
2. removes ``shipping`` (acknowledged) once its queue drained.

About three minutes (three applies, mostly the provider's SQS waiters), once
for the module, in a process of its own; test_live_switch_on_emulator.py runs
the transport switch beside it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.terraform.live_flow import (
    AUDIT_BATCH_AFTER,
    AUDIT_BATCH_BEFORE,
    POWERTOOLS_AFTER,
    POWERTOOLS_BEFORE,
    SCENARIOS,
    run_in_a_process,
    written_ids,
)

pytestmark = [pytest.mark.terraform, pytest.mark.apply]


@pytest.fixture(scope="module")
def facts(tf_cli_config: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The run's facts; ``tf_cli_config`` skips loudly without terraform or the mirror."""
    return run_in_a_process("consumers", tmp_path_factory.mktemp("live-consumers"))


def test_events_were_written_while_each_change_was_applied(facts: dict[str, Any]) -> None:
    assert [step["name"] for step in facts["steps"]] == [
        step.name for step in SCENARIOS["consumers"].steps
    ]
    for number, step in enumerate(facts["steps"], start=1):
        during = [w for w in facts["written"] if w["step"] == number and w["during_apply"]]
        assert step["written_during_apply"] == len(during) > 0, step["name"]


def test_every_event_took_effect_once_at_the_consumer_that_existed_throughout(
    facts: dict[str, Any],
) -> None:
    ledger = facts["end"]["ledgers"]["audit"]
    written = written_ids(facts)

    assert set(ledger) == written, {
        "lost": sorted(written - set(ledger))[:5],
        "unknown": sorted(set(ledger) - written)[:5],
    }
    assert {event: n for event, n in ledger.items() if n != 1} == {}


def test_the_added_consumer_took_every_event_written_after_its_apply_once(
    facts: dict[str, Any],
) -> None:
    assert facts["added_after"]["billing"] == 1
    ledger = facts["end"]["ledgers"]["billing"]

    assert written_ids(facts, from_step=2) <= set(ledger)
    assert set(ledger) <= written_ids(facts)
    assert {event: n for event, n in ledger.items() if n != 1} == {}


def test_the_removed_consumer_drained_before_its_queue_was_deleted(facts: dict[str, Any]) -> None:
    removal = facts["steps"][1]
    assert removal["drained_before"]["shipping"] == {"queue": 0, "dlq": 0}
    assert facts["removed_at"]["shipping"] == 2
    ledger = facts["end"]["ledgers"]["shipping"]
    # What was written before it retired reached it; nothing took effect twice.
    assert written_ids(facts) - written_ids(facts, from_step=1) <= set(ledger)
    assert set(ledger) <= written_ids(facts)
    assert {event: n for event, n in ledger.items() if n != 1} == {}


def test_redeliveries_reached_every_consumer_and_took_effect_once(facts: dict[str, Any]) -> None:
    """'Took effect once' must be able to fail. Lambda delivers at least once
    (an SQS message, a stream batch, may come again); a flow in which nothing is ever
    delivered twice proves only that each event was delivered once, whatever the
    consumer's idempotency does (a consumer with none passes)."""
    redelivered = facts["redeliveries"]
    assert redelivered["publisher"] > 0
    # shipping retires in the first apply: it may get too few messages to be sure of one
    for key in ("audit", "billing"):
        assert redelivered[key] > 0, key


def test_nothing_is_left_pending_in_flight_or_dropped(facts: dict[str, Any]) -> None:
    end = facts["end"]
    assert end["outbox_items_left"] == []
    assert end["depths"] == {key: {"queue": 0, "dlq": 0} for key in ("audit", "billing")}
    assert end["on_failure_depth"] == 0
    assert end["publisher_failure_records"] == 0
    assert end["dropped_at_seams"] == end["dead_lettered_at_seams"] == 0


def test_each_change_took_effect_in_the_emulator(facts: dict[str, Any]) -> None:
    initial, added, removed = facts["initial"], *facts["steps"]
    layers = facts["powertools_layers"]
    assert initial["consumers"]["audit"]["batch_size"] == AUDIT_BATCH_BEFORE
    assert initial["publisher"]["tracing"] == "PassThrough"
    assert initial["publisher"]["layers"] == [layers[POWERTOOLS_BEFORE]]
    # 1. consumer added, batch size, tracing, Powertools release, retired
    assert set(added["consumers"]) == {"audit", "billing", "shipping"}
    assert added["consumers"]["audit"]["batch_size"] == AUDIT_BATCH_AFTER
    assert added["consumers"]["shipping"]["rule"] is None
    for function in (added["publisher"], *added["consumers"].values()):
        assert function["tracing"] == "Active"
        assert function["layers"] == [layers[POWERTOOLS_AFTER]]
    # 2. removed
    assert set(removed["consumers"]) == {"audit", "billing"}
    # Each function update started new environments, as Lambda does.
    assert facts["cold_starts"]["publisher"] >= 2
    assert facts["cold_starts"]["audit"] >= 2
