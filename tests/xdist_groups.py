"""Which tests must share a pytest-xdist worker, decided from their node ids.

``make test`` runs the suite on several workers. Each worker has its own
sessions and modules, so tests that share an expensive session or module
fixture must run on the same worker, or the fixture is set up again in another
process: examples/local applied to the emulator (90 s, mostly the provider's
SQS waits), the demo run, a module-wide generated-input campaign.

xdist's own ``--dist loadgroup`` cannot do it here: it renames each test's
``_nodeid``, which pytest 9 no longer reads. The grouping is a scheduler of our
own instead (:class:`GroupedScheduling`, installed by ``tests/conftest.py``),
built on ``--dist loadscope`` with this module's groups as its scopes; every
other test is a scope of its own, so it goes to any free worker. It overrides
private methods of xdist's scheduler, so it is used only on the release named
in tests/dependency_shortcuts.py (on another, the suite runs on one process).
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadScopeScheduling

#: Tests of examples/local applied once per session (``local_stack``), and the
#: validate of examples/local, whose init writes the same lock file.
EMULATOR_APPLY = "examples-local-apply"
_EMULATOR_APPLY_PREFIXES = (
    "tests/terraform/test_apply_local.py::",
    "tests/terraform/test_iam_least_privilege.py::",
    "tests/terraform/test_live_changes_on_emulator.py::",
    "tests/terraform/test_terraform_static.py::test_module_initialises_offline_and_validates"
    "[examples/local]",
)
#: examples/existing-table applied once (module fixture), planned, then destroyed.
EXISTING_TABLE_STACK = "examples-existing-table-stack"
_EXISTING_TABLE_PREFIXES = (
    "tests/terraform/test_examples_on_emulator.py::test_adding_a_consumer_plans_only",
    "tests/terraform/test_examples_on_emulator.py::test_existing_table_example_destroys",
)
#: Modules whose tests share a module-scoped fixture or module-level state.
WHOLE_MODULES = (
    "tests/demo/test_demo.py",  # demo_run: one `make demo` for the module
    "tests/reliability/test_generated_inputs.py",  # stack; GENERATED, totalled last
    "tests/reliability/test_ordered_per_subject.py",  # ordered_run: one faulty run, 4 checks
    "tests/unit/test_typing.py",  # mypy's cache directory
    "tests/terraform/test_validate_messages.py",  # the cases' root module, initialised once
    "tests/terraform/test_wrong_kind_messages.py",  # the cases' root module, validated once
    "tests/terraform/test_live_flow_on_emulator.py",  # facts: one live_flow.py run
    "tests/terraform/test_live_switch_on_emulator.py",  # facts: one live_flow.py run
    "tests/terraform/test_multi_region_on_emulator.py",  # facts: one multi_region_flow.py run
)


def group_of(nodeid: str) -> str:
    """The scheduling scope of a test: its group, or its own node id."""
    if nodeid.startswith(_EMULATOR_APPLY_PREFIXES):
        return EMULATOR_APPLY
    if nodeid.startswith(_EXISTING_TABLE_PREFIXES):
        return EXISTING_TABLE_STACK
    module = nodeid.split("::", 1)[0]
    if module in WHOLE_MODULES:
        return module
    return nodeid


def is_grouped(nodeid: str) -> bool:
    return group_of(nodeid) != nodeid


#: The scopes that take longest, longest first (wall time in a full run on 2
#: cores). They start first, and only one quick test waits behind each on its
#: worker: ``loadscope`` orders scopes by test count and queues up to two more
#: on a worker, so a one-test campaign started late, or another long scope
#: queued behind it, stretched the whole run by minutes.
LONGEST_FIRST = (
    # Three and four applies of their own (about 3 to 4 minutes, mostly the
    # provider's SQS waiters, little CPU): started first, on workers of their own.
    "tests/terraform/test_live_switch_on_emulator.py",
    "tests/terraform/test_live_flow_on_emulator.py",
    # examples/multi-region: one apply and destroy of two regions (slow).
    "tests/terraform/test_multi_region_on_emulator.py",
    "tests/reliability/test_ordered_per_subject.py",
    "tests/reliability/test_fault_campaign.py::test_fault_campaign",
    EMULATOR_APPLY,
    "tests/demo/test_demo.py",
    "tests/terraform/test_examples_on_emulator.py::test_complete_example_applies_and_destroys",
    EXISTING_TABLE_STACK,
    # examples/sns_fifo: an apply, a re-plan and a destroy (about as long as
    # complete's), on a worker of its own, started early so nothing waits on it.
    "tests/terraform/test_examples_on_emulator.py::test_sns_fifo_example_applies_and_destroys",
    "tests/reliability/test_generated_inputs.py",
    "tests/terraform/test_validate_messages.py",
    "tests/security/test_checkov.py::",
    # The *.tftest.hcl files in three terraform test processes (about 30 s of
    # CPU each).
    "tests/terraform/test_terraform_static.py::test_terraform_test_files_pass[process-1]",
    "tests/terraform/test_terraform_static.py::test_terraform_test_files_pass[process-2]",
    "tests/terraform/test_terraform_static.py::test_terraform_test_files_pass[process-3]",
    "tests/terraform/test_provider_compat.py::",
)


def rank_of(scope: str) -> int:
    """Where a scope starts: its place in LONGEST_FIRST, or after all of them."""
    for rank, prefix in enumerate(LONGEST_FIRST):
        if scope.startswith(prefix):
            return rank
    return len(LONGEST_FIRST)


class GroupedScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """``loadscope`` with :func:`group_of` as the scope, the longest scopes first."""

    _ordered = False

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)

    def _assign_work_unit(self, node: Any) -> None:
        if not self._ordered:
            # The queue is complete before the first unit is handed out.
            self._ordered = True
            ranked = [scope for scope in self.workqueue if rank_of(scope) < len(LONGEST_FIRST)]
            for scope in sorted(ranked, key=rank_of, reverse=True):
                self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)

    def _reschedule(self, node: Any) -> None:
        if not self.workqueue or node.shutting_down or not self._runs_a_long_scope(node):
            super()._reschedule(node)
            return
        # An xdist worker runs its last test only once it knows the next one
        # (or is shut down), so one unit must follow: the last in the queue,
        # a quick one.
        if self._pending_of(self.assigned_work[node]) <= 1:
            self.workqueue.move_to_end(next(reversed(self.workqueue)), last=False)
            self._assign_work_unit(node)

    def _runs_a_long_scope(self, node: Any) -> bool:
        return any(
            rank_of(scope) < len(LONGEST_FIRST) and self._pending_of({scope: tests}) > 0
            for scope, tests in self.assigned_work[node].items()
        )


def scheduler(config: Any, log: Any) -> GroupedScheduling:
    return GroupedScheduling(config, log)
