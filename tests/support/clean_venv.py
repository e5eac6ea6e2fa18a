"""A virtual environment holding only ``dynamodb-outbox[testing]``, built once and cached.

What an application team has after ``pip install "dynamodb-outbox[testing]"``:
the package (installed editable from this checkout's ``lambda/``, so a code
change needs no rebuild; its entry points, hence the pytest plugin, come from
``lambda/pyproject.toml``), its dependencies and the extra's, at the versions
``requirements-dev.txt`` pins, and nothing of this project's test tooling.

Built with pip's own configuration (this machine's wheel cache and local index,
or PyPI), about a minute, into ``.cache/clean-venv``; reused while its
key holds: the interpreter, ``requirements-dev.txt``, ``lambda/pyproject.toml``
and this checkout's path. The suite pays the build once, like
``benchmarks/.cache`` for python3.13.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache"
VENV = CACHE / "clean-venv"
_STAMP = ".installed"


def _key() -> str:
    digest = hashlib.sha256()
    digest.update(sys.version.encode())
    digest.update(str(REPO).encode())
    for path in (REPO / "requirements-dev.txt", REPO / "lambda" / "pyproject.toml"):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def clean_venv_python() -> Path:
    """The cached venv's interpreter, building the venv first when its key changed."""
    stamp = VENV / _STAMP
    key = _key()
    if stamp.exists() and stamp.read_text() == key:
        return VENV / "bin" / "python"
    # Built in place; the stamp, written last, marks it complete.
    shutil.rmtree(VENV, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    # The package's own dependencies and the extra's come from the install's
    # resolution; the constraints pin them to the project's versions.
    completed = subprocess.run(
        [str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet",
         "--disable-pip-version-check", "-c", str(REPO / "requirements-dev.txt"),
         "-e", f"{REPO / 'lambda'}[testing]"],
        capture_output=True, text=True, check=False, timeout=900,
    )  # fmt: skip
    if completed.returncode != 0:
        raise RuntimeError(f"building the clean venv failed:\n{completed.stderr[-4000:]}")
    stamp.write_text(key)
    return VENV / "bin" / "python"
