"""The suite's xdist scheduler starts the longest scopes first and queues nothing behind them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.xdist_groups import EMULATOR_APPLY, LONGEST_FIRST, GroupedScheduling, group_of

CAMPAIGN = "tests/reliability/test_fault_campaign.py::test_fault_campaign"
ORDERED = [f"tests/reliability/test_ordered_per_subject.py::test_{n}" for n in range(3)]
APPLY = [f"tests/terraform/test_apply_local.py::test_{n}" for n in range(3)]
QUICK = [f"tests/unit/test_quick.py::test_{n}" for n in range(8)]
# Collected in path order: the long ones come after the quick ones.
COLLECTION = [*QUICK[:4], CAMPAIGN, *QUICK[4:], *ORDERED, *APPLY]


class FakeWorker:
    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[list[int]] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.append(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def _config(workers: int) -> Any:
    options = {"tx": [f"{workers}*popen"], "loadscopereorder": True}
    return SimpleNamespace(
        getvalue=options.__getitem__, option=SimpleNamespace(loadscopereorder=True)
    )


def _started(workers: int) -> tuple[GroupedScheduling, list[FakeWorker]]:
    scheduling = GroupedScheduling(_config(workers), None)
    nodes = [FakeWorker(f"gw{n}") for n in range(workers)]
    for node in nodes:
        scheduling.add_node(node)
        scheduling.add_node_collection(node, COLLECTION)
    scheduling.schedule()
    return scheduling, nodes


def _tests_sent(node: FakeWorker) -> list[str]:
    return [COLLECTION[index] for batch in node.sent for index in batch]


def test_the_longest_scopes_start_first_on_their_own_workers() -> None:
    _, nodes = _started(workers=3)

    firsts = [group_of(_tests_sent(node)[0]) for node in nodes]
    assert firsts == [
        "tests/reliability/test_ordered_per_subject.py",
        CAMPAIGN,
        EMULATOR_APPLY,
    ]


def test_one_quick_test_follows_a_long_scope_and_no_more() -> None:
    """xdist runs a worker's last test only once it has a next one: exactly one follows."""
    scheduling, nodes = _started(workers=3)
    ordered_worker, campaign_worker, _ = nodes

    assert _tests_sent(ordered_worker) == ORDERED  # three tests left: none needed yet
    assert _tests_sent(campaign_worker) == [CAMPAIGN, QUICK[-1]]  # the queue's last

    scheduling.mark_test_complete(campaign_worker, COLLECTION.index(CAMPAIGN))
    assert len(_tests_sent(campaign_worker)) > 2, "the worker gets more once the campaign ends"

    for nodeid in ORDERED[:2]:
        scheduling.mark_test_complete(ordered_worker, COLLECTION.index(nodeid))
    assert len(_tests_sent(ordered_worker)) == len(ORDERED) + 1


@pytest.mark.parametrize("workers", [1, 2, 3, 6])
def test_every_test_runs_once_as_an_xdist_worker_runs_them(workers: int) -> None:
    """A worker runs its last pending test only once it has a next one or is shut down."""
    scheduling, nodes = _started(workers)
    done: set[str] = set()
    while len(done) < len(COLLECTION):
        progressed = False
        for node in nodes:
            pending = [nodeid for nodeid in _tests_sent(node) if nodeid not in done]
            runnable = pending if node.shutting_down else pending[:-1]
            for nodeid in runnable:
                done.add(nodeid)
                scheduling.mark_test_complete(node, COLLECTION.index(nodeid))
                progressed = True
        assert progressed, f"deadlock: every worker waits with {len(done)} tests run"

    sent = [nodeid for node in nodes for nodeid in _tests_sent(node)]
    assert sorted(sent) == sorted(COLLECTION)
    assert scheduling.tests_finished


def test_the_long_scopes_named_exist() -> None:
    """A renamed or removed test would silently lose its place in the order."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for prefix in LONGEST_FIRST:
        if prefix.startswith("tests/"):
            assert (root / prefix.split("::")[0].split("[")[0]).exists(), prefix
