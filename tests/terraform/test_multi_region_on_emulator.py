"""examples/multi-region applied on the emulator: publish once where written, adoption, forwarding.

tests/terraform/multi_region_flow.py, in a process of its own, applies the
example as written (two providers, one global table: the replica made by
scripts/moto_server.py's ``ReplicaUpdates``), re-plans it, writes orders in
both regions, replicates, runs each region's publisher as deployed and the
home region's deployed consumer (which gets the other region's events through
the forwarding rule), cuts the other region off with items replicated out, has
the home region's sweeper adopt them as deployed (at virtual time), brings the
other region back, and destroys. About two and a half minutes (the apply and
destroy, mostly the provider's SQS waiters): marked ``slow``, so ``make
test-slow`` runs it and ``make test`` names it as left out. In ``make test``
the same behaviour is proven in-process (tests/runtime/test_multi_region*.py)
and the example's plan on the mock provider (multi_region.tftest.hcl).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest

from tests.terraform.multi_region_flow import HOME, OTHER
from tests.terraform.tfhelpers import REPO_ROOT

pytestmark = [pytest.mark.terraform, pytest.mark.apply, pytest.mark.slow]

RUN_TIMEOUT_SECONDS = 900


@pytest.fixture(scope="module")
def facts(tf_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The run's facts; ``tf_env`` skips loudly without terraform or the provider mirror."""
    work = tmp_path_factory.mktemp("multi-region")
    facts_path = work / "facts.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.terraform.multi_region_flow",
            "--facts",
            str(facts_path),
            "--work",
            str(work / "stack"),
        ],
        cwd=REPO_ROOT,
        env=tf_env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )
    assert result.returncode == 0, (
        f"exit code {result.returncode}\n{result.stdout}\n{result.stderr[-6000:]}"
    )
    loaded: dict[str, Any] = json.loads(facts_path.read_text(encoding="utf-8"))
    return loaded


def test_the_example_applies_with_a_replica_the_other_region_reads(facts: dict[str, Any]) -> None:
    deployed = facts["deployed"]
    assert deployed["home_replicas"] == [OTHER]
    assert deployed["other_replica_stream"] == "NEW_AND_OLD_IMAGES"
    assert deployed["other_replica_indexes"] == ["outbox-pending"]
    assert facts["replan_exit_code"] == 0, facts["replan"]
    assert "Destroy complete!" in facts["destroy"]


def test_each_region_deployed_its_own_filters_and_scopes(facts: dict[str, Any]) -> None:
    deployed = facts["deployed"]
    stamps = {
        region: [json.loads(f)["dynamodb"]["NewImage"]["outbox_region"]["S"] for f in filters]
        for region, filters in deployed["filters"].items()
    }
    assert stamps == {HOME: [[HOME], [{"exists": False}]], OTHER: [[OTHER]]}
    assert deployed["scopes"][HOME] == {
        "region": HOME,
        "unstamped": True,
        "adopted": [OTHER],
        "adopt_after_seconds": 3600,
    }
    assert deployed["scopes"][OTHER]["adopted"] == [HOME]


def test_no_event_lost_each_taking_effect_once_at_the_consumer(facts: dict[str, Any]) -> None:
    written = {event_id for ids in facts["written"].values() for event_id in ids}
    delivered = Counter(d["id"] for d in facts["delivered"])
    # The home consumer got every event of both regions (the other's forwarded) ...
    assert set(delivered) == written
    # ... the adopted ones twice (adopted here, then the returning region's own,
    # forwarded), and each took effect once: its idempotency absorbed the rest.
    assert {i for i, n in delivered.items() if n > 1} == set(facts["stranded"])
    effects = facts["ledger_effects"]
    assert effects["ProcessedEvents"] == len(written)
    assert effects["DuplicateEvents"] == sum(delivered.values()) - len(written)
    assert effects["UntrustedEvents"] == 0 and effects["FailedEvents"] == 0
    assert facts["pending"] == {HOME: [], OTHER: []}


def test_nothing_is_published_by_a_region_that_did_not_write_it_but_adoption(
    facts: dict[str, Any],
) -> None:
    writer_of = {i: region for region, ids in facts["written"].items() for i in ids}
    foreign = {d["id"] for d in facts["delivered"] if writer_of[d["id"]] != d["region"]}
    # A forwarded event keeps the region it was published in: only the adopted
    # items went out from a region that did not write them.
    assert foreign == set(facts["stranded"])
    assert facts["adoption_sweep"]["published"] == len(facts["stranded"])
