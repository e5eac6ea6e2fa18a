"""Breaker checks of the shipped bytecode (issue 28): reproducible from scratch, loud when unsure.

``test_two_builds_of_the_same_sources_are_byte_identical`` builds twice in one
process: the second build is served by ``functools.cache`` (and the first,
usually, by ``.cache/bytecode``), so it compares a cache with itself. These
compile for real, twice, with no cache.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "build_package.py"


def _load_builder():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("build_package_breaker", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bytecode_compiled_twice_from_scratch_is_byte_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = _load_builder()
    monkeypatch.setattr(builder, "BYTECODE_CACHE", tmp_path / "one")
    first = builder.build()
    builder = _load_builder()  # a fresh functools.cache
    monkeypatch.setattr(builder, "BYTECODE_CACHE", tmp_path / "two")
    second = builder.build()
    assert first == second
    assert first == (ROOT / "package" / "dynamodb_outbox.zip").read_bytes()


def test_an_interpreter_named_for_a_version_but_of_another_is_refused_not_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # BYTECODE_PYTHON_3_12 names the interpreter to use; naming a 3.11 by mistake
    # must not silently fall back to whatever pyenv or PATH has.
    builder = _load_builder()
    monkeypatch.setenv("BYTECODE_PYTHON_3_12", sys.executable)
    if sys.version.startswith("3.12."):
        pytest.skip("the running interpreter is a 3.12")
    with pytest.raises(builder.BuildError, match="BYTECODE_PYTHON_3_12"):
        builder.bytecode_python("3.12")


def test_check_without_one_interpreter_is_loud(tmp_path: Path) -> None:
    """No CPython 3.12 anywhere: --check fails with a message, it does not pass silently."""
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    missing = next(v for v in ("3.12", "3.13", "3.11") if v != running)
    env = {
        "HOME": str(tmp_path),
        "PYENV_ROOT": str(tmp_path / "no-pyenv"),
        "PATH": "/nonexistent",
    }
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"],
        capture_output=True,
        text=True,
        env={**env, "SYSTEMROOT": os.environ.get("SYSTEMROOT", "")},
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"no CPython {missing} found" in done.stderr
