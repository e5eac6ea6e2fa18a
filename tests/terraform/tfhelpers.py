"""Helpers shared by the Terraform tests (paths, running terraform)."""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from filelock import FileLock

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = REPO_ROOT / "examples"
_LOCK_DIR = Path(tempfile.gettempdir()) / "dynamodb-outbox-terraform-init-locks"


def lock_for_init_in(directory: Path) -> FileLock:
    """A lock around ``terraform init`` in ``directory``, shared by parallel test workers.

    Init writes ``.terraform.lock.hcl`` into the module directory whatever the
    TF_DATA_DIR, and a concurrent init may read it half written.
    """
    _LOCK_DIR.mkdir(exist_ok=True)
    name = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:16]
    return FileLock(_LOCK_DIR / f"{name}.lock", timeout=600)


def run_terraform(
    args: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float = 600,
    stderr_to_stdout: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run terraform, capturing its output for the assertion message.

    ``stderr_to_stdout`` keeps the diagnostics (stderr) in order with the
    progress lines (stdout), next to the run block they belong to.
    """
    return subprocess.run(
        ["terraform", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if stderr_to_stdout else subprocess.PIPE,
        text=True,
        timeout=timeout,
        check=False,
    )


def describe(result: subprocess.CompletedProcess[str]) -> str:
    """The command, its exit code and its output, for assertion messages."""
    args = result.args if isinstance(result.args, str) else " ".join(result.args)
    stderr = "" if result.stderr is None else result.stderr
    return f"$ {args}\nexit code {result.returncode}\n{result.stdout}\n{stderr}"
