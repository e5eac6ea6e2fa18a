"""Helpers shared by the Terraform tests (paths, running terraform)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = REPO_ROOT / "examples"


def run_terraform(
    args: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run terraform, capturing its output for the assertion message."""
    return subprocess.run(
        ["terraform", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def describe(result: subprocess.CompletedProcess[str]) -> str:
    """The command, its exit code and its output, for assertion messages."""
    args = result.args if isinstance(result.args, str) else " ".join(result.args)
    return f"$ {args}\nexit code {result.returncode}\n{result.stdout}\n{result.stderr}"
