"""The terraform processes the suite starts inherit a GOGC (tests/go_garbage_collection.py)."""

from __future__ import annotations

import subprocess
import sys


def test_subprocesses_of_the_suite_see_gogc() -> None:
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ.get('GOGC', 'unset'))"],
        capture_output=True,
        text=True,
        check=True,
    )

    assert child.stdout.strip() != "unset", (
        "terraform started by the tests should collect garbage less often: "
        "tests/conftest.py calls collect_go_garbage_less_often()"
    )
