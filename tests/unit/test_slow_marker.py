"""What ``make test`` leaves out (``-m "not slow"``) is exactly what it says it leaves out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import SLOW

ROOT = Path(__file__).resolve().parents[2]


def test_the_modules_named_as_left_out_are_the_ones_marked_slow() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "slow",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    marked = [line for line in done.stdout.splitlines() if "::" in line]
    assert marked, done.stdout[-2000:]
    # every test marked slow is named, and every name stands for a test marked slow
    assert [node for node in marked if not node.startswith(SLOW)] == []
    assert [prefix for prefix in SLOW if not any(n.startswith(prefix) for n in marked)] == []
