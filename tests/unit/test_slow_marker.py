"""What ``make test`` leaves out (``-m "not slow"``) is exactly what it says it leaves out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import SLOW_MODULES

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
    marked = {line.split("::", 1)[0] for line in done.stdout.splitlines() if "::" in line}
    assert marked, done.stdout[-2000:]
    assert marked == set(SLOW_MODULES)
