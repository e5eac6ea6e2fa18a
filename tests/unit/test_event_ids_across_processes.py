"""Event ids stay unique across ``os.fork()`` and across processes.

A collision is a silent loss: two different events share one idempotency key
and every consumer drops the second as a duplicate. Apps that fork workers
(multiprocessing, prefork servers) inherit the id generator's state, so each
test here forks the way they do and compares what both sides make.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable

import pytest

from dynamodb_outbox.envelope import Envelope

FORKS_REAL_CLOCK = 200
FORKS_FROZEN_CLOCK = 20
PROCESSES = 16
IDS_PER_PROCESS = 10_000

pytestmark = pytest.mark.skipif(
    not hasattr(os, "fork"), reason="os.fork() is POSIX only; these tests are about forking"
)


def _event_id() -> str:
    return Envelope(type="OrderPlaced", source="app.orders", subject="ORDER#1", data={}).id


def _fork_and_make_one_each(make: Callable[[], str]) -> tuple[str, str]:
    """The parent makes an id, forks, then each side makes one; returns (parent's, child's)."""
    make()  # the generator's state, as a busy parent has it when it forks
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one id down the pipe, then leave without pytest's cleanup
        try:
            os.close(read_end)
            os.write(write_end, make().encode())
        finally:
            os._exit(0)
    os.close(write_end)
    parent_id = make()
    with os.fdopen(read_end, "rb") as pipe:
        child_id = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return parent_id, child_id


def test_parent_and_child_never_share_an_id_after_a_fork_with_the_real_clock() -> None:
    pairs = [_fork_and_make_one_each(_event_id) for _ in range(FORKS_REAL_CLOCK)]
    collisions = [parent for parent, child in pairs if parent == child]
    assert all(len(child) == 26 for _, child in pairs), "every child made an id"
    assert collisions == [], f"{len(collisions)} of {FORKS_REAL_CLOCK} forks made the same id"


def test_parent_and_child_never_share_an_id_within_the_parents_millisecond(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Deterministic: both sides make their next id in the very millisecond of the last one."""
    frozen_ns = time.time_ns()
    monkeypatch.setattr(time, "time_ns", lambda: frozen_ns)
    pairs = [_fork_and_make_one_each(_event_id) for _ in range(FORKS_FROZEN_CLOCK)]
    collisions = [parent for parent, child in pairs if parent == child]
    assert collisions == [], f"{len(collisions)} of {FORKS_FROZEN_CLOCK} forks made the same id"


def _ids_of_one_process(count: int) -> list[str]:
    from dynamodb_outbox.event_ids import new_event_id

    return [new_event_id() for _ in range(count)]


def test_sixteen_forked_processes_make_ten_thousand_distinct_ids_each() -> None:
    _ids_of_one_process(1)  # the parent's state is what every forked worker inherits
    with multiprocessing.get_context("fork").Pool(PROCESSES) as pool:
        batches = pool.map(_ids_of_one_process, [IDS_PER_PROCESS] * PROCESSES)
    every_id = [event_id for batch in batches for event_id in batch]
    assert len(every_id) == PROCESSES * IDS_PER_PROCESS
    assert len(set(every_id)) == len(every_id), "duplicate ids across processes"
    for batch in batches:
        assert batch == sorted(batch), "the ids of one process must strictly increase"
        assert len(set(batch)) == len(batch)
