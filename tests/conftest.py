"""Session-wide hooks shared by every test folder."""

from __future__ import annotations

import shutil
import sys
from typing import Any

import pytest

from dynamodb_outbox.local.moto_events import deliver_event_account, forward_events_as_aws
from tests import faster_moto
from tests.dependency_shortcuts import OFF, allowed
from tests.go_garbage_collection import collect_go_garbage_less_often
from tests.shared_parsers import (
    cache_camelcase_conversion,
    cache_jsonpath_parse,
    share_botocore_loader,
)
from tests.xdist_groups import is_grouped, scheduler

share_botocore_loader()
cache_jsonpath_parse()
cache_camelcase_conversion()
collect_go_garbage_less_often()
faster_moto.install()


# In-process moto too: EventBridge events reach SQS with their ``account``, and
# an event forwarded to another region's bus keeps its origin (account, region).
deliver_event_account()
forward_events_as_aws()


def pytest_configure(config: pytest.Config) -> None:
    """Keep pytest-terraform from aborting the whole session when terraform is absent.

    The plugin raises in its own ``pytest_configure`` when no terraform binary is
    on PATH, unless replay mode is on. Turning replay on in that case lets the
    session start; the fixtures in ``tests/terraform`` then skip every Terraform
    test with a message saying so, and the Python suites still run.
    """
    if shutil.which("terraform") is None and shutil.which("tofu") is None:
        config.option.dest_tf_replay = True


_SCHEDULER = "tests/xdist_groups.py's scheduler"


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Run on one process when the scheduler is off (before xdist reads ``-n``).

    Without it, tests that share an expensive fixture would each set it up on
    their own worker, several applies of one example stack at once among them.
    """
    if getattr(config.option, "numprocesses", None) and not allowed("pytest-xdist", _SCHEDULER):
        config.option.numprocesses = 0


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Run tests that share an expensive fixture on one worker (tests/xdist_groups.py)."""
    return scheduler(config, log) if allowed("pytest-xdist", _SCHEDULER) else None


#: What ``-m "not slow"`` (pytest.ini) leaves out of ``make test`` (node-id
#: prefixes), named in the session header and summary so that nobody reads the
#: run as covering them. ``make test-slow`` runs them, and .ci/run runs both.
SLOW = (
    "tests/terraform/test_live_switch_on_emulator.py",
    "tests/terraform/test_multi_region_on_emulator.py",
    "tests/terraform/test_examples_on_emulator.py::test_complete_example_applies_and_destroys_cleanly",
    "tests/terraform/test_examples_on_emulator.py::test_sns_fifo_example_applies_and_destroys_cleanly",
    "tests/security/test_checkov.py::test_checkov_finds_no_failed_check",
)


def _slow_left_out(config: pytest.Config) -> list[str]:
    expression = config.getoption("markexpr", "") or ""
    if "not slow" not in expression:
        return []
    return [f"NOT RUN (marked slow, `make test-slow` runs it): {prefix}" for prefix in SLOW]


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"DEPENDENCY SHORTCUT {line}" for line in OFF] + _slow_left_out(config)


_UNGROUPED: set[str] = set()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Find tests that share a costly fixture but have no group in tests/xdist_groups.py.

    Without one they could run on another worker and set the fixture up again
    there (or, for module-level state, see only part of it); they fail at setup.
    """
    grouped_modules = {item.nodeid.split("::", 1)[0] for item in items if is_grouped(item.nodeid)}
    _UNGROUPED.update(
        item.nodeid
        for item in items
        if _shares_a_costly_fixture(item) and item.nodeid.split("::", 1)[0] not in grouped_modules
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.nodeid in _UNGROUPED:
        pytest.fail(
            "this test shares a session or module fixture with others but has no group in "
            "tests/xdist_groups.py: under `make test` each worker would set it up again",
            pytrace=False,
        )


def _shares_a_costly_fixture(item: pytest.Item) -> bool:
    fixture_info = getattr(item, "_fixtureinfo", None)
    if fixture_info is None:
        return False
    if "local_stack" in fixture_info.names_closure:
        return True
    return any(
        definition.scope == "module"
        for definitions in fixture_info.name2fixturedefs.values()
        for definition in definitions
    )


# ---------------------------------------------------------- campaign figures
# tests/reliability's campaigns add up counters in the process that runs them.
# Under xdist that is a worker, whose terminal output is not shown: each worker
# hands its counters to the controller, which prints the totals once.


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is None or "tests.reliability.campaign" not in sys.modules:
        return
    from tests.reliability.campaign import CAMPAIGN
    from tests.reliability.generated import GENERATED

    workeroutput["campaign_figures"] = CAMPAIGN.to_wire()
    workeroutput["generated_figures"] = GENERATED.to_wire()


def pytest_testnodedown(node: Any, error: object) -> None:
    output = getattr(node, "workeroutput", None) or {}
    if "campaign_figures" not in output:
        return
    from tests.reliability.campaign import CAMPAIGN
    from tests.reliability.generated import GENERATED

    CAMPAIGN.merge(output["campaign_figures"])
    GENERATED.merge(output["generated_figures"])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    left_out = _slow_left_out(terminalreporter.config)
    if left_out:
        terminalreporter.section("left out of this run", yellow=True, bold=True)
        for line in left_out:
            terminalreporter.write_line(line)
    if OFF:
        terminalreporter.section("dependency shortcuts OFF (slower suite)", red=True, bold=True)
        for line in OFF:
            terminalreporter.write_line(line)
    if "tests.reliability.campaign" not in sys.modules:
        return
    from tests.reliability.campaign import CAMPAIGN
    from tests.reliability.generated import GENERATED

    if GENERATED.total:
        terminalreporter.section("generated-input campaign")
        for line in GENERATED.lines():
            terminalreporter.write_line(line)
    if CAMPAIGN.figures["examples"]:
        terminalreporter.section("reliability campaign")
        for line in CAMPAIGN.lines():
            terminalreporter.write_line(line)
