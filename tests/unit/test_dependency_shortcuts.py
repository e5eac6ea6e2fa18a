"""The suite's shortcuts into dependencies run only on the releases they were checked against."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import dependency_shortcuts
from tests.dependency_shortcuts import CHECKED_AGAINST, allowed

ROOT = Path(__file__).resolve().parents[2]


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements-dev.txt").read_text().splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if match:
            pins[re.sub(r"[-_.]+", "-", match[1]).lower()] = match[2]
    return pins


def test_each_shortcut_was_checked_against_the_pinned_release() -> None:
    pins = _pins()
    for distribution, checked in CHECKED_AGAINST.items():
        assert pins[distribution] == checked, (
            f"requirements-dev.txt pins {distribution}=={pins[distribution]} but the shortcuts "
            f"into it were checked against {checked}: re-check them (tests/dependency_shortcuts.py)"
        )


def test_another_release_turns_a_shortcut_off_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dependency_shortcuts, "OFF", [])
    monkeypatch.delenv("OUTBOX_TEST_SHORTCUTS", raising=False)

    assert allowed("moto", "a shortcut", lambda _: CHECKED_AGAINST["moto"])
    assert dependency_shortcuts.OFF == []
    assert not allowed("moto", "a shortcut", lambda _: "9.9.9")
    assert not allowed("moto", "a shortcut", lambda _: None)
    assert [
        f"a shortcut is OFF: it patches moto internals checked against {CHECKED_AGAINST['moto']}, "
        "but 9.9.9 is installed (tests/dependency_shortcuts.py says how to re-check it)",
        f"a shortcut is OFF: it patches moto internals checked against {CHECKED_AGAINST['moto']}, "
        "but no release is installed (tests/dependency_shortcuts.py says how to re-check it)",
    ] == dependency_shortcuts.OFF


def test_a_session_on_unchecked_releases_runs_on_one_process_and_says_so() -> None:
    env = {
        **os.environ,
        "OUTBOX_TEST_PRETEND_VERSIONS": "moto=0.0,pytest-xdist=0.0,botocore=0.0,jsonpath-ng=0.0",
    }
    env.pop("OUTBOX_TEST_SHORTCUTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-rN",
         f"{Path(__file__).relative_to(ROOT)}::test_each_shortcut_was_checked_against_the_pinned_release"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "1 passed" in output
    assert not re.search(r"\d+ workers \[", output)  # -n 2 was turned into one process
    assert "DEPENDENCY SHORTCUT tests/xdist_groups.py's scheduler is OFF" in output  # header
    assert "dependency shortcuts OFF" in output  # summary
    for shortcut in (
        "tests/faster_moto.py",
        "shared_parsers.share_botocore_loader",
        "shared_parsers.cache_jsonpath_parse",
        "shared_parsers.cache_camelcase_conversion",
        "tests/xdist_groups.py's scheduler",
    ):
        assert f"{shortcut} is OFF" in output, shortcut
