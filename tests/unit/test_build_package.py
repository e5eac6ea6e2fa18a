"""The deployment zip is reproducible and holds exactly what Lambda needs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "build_package.py"


def _load_builder():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("build_package", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_builds_of_the_same_sources_are_byte_identical() -> None:
    builder = _load_builder()
    assert builder.build() == builder.build()


def test_zip_entries_are_sorted_with_fixed_timestamps_and_permissions(tmp_path: Path) -> None:
    builder = _load_builder()
    target = tmp_path / "pkg.zip"
    target.write_bytes(builder.build())
    with zipfile.ZipFile(target) as archive:
        infos = archive.infolist()
    names = [i.filename for i in infos]
    assert names == sorted(names)
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert {i.external_attr >> 16 for i in infos} == {0o100644}


def test_zip_ships_the_handlers_and_ulid_but_not_the_local_runtime_or_bytecode() -> None:
    builder = _load_builder()
    names = [arcname for arcname, _ in builder.entries()]
    assert "dynamodb_outbox/publisher.py" in names
    assert "dynamodb_outbox/envelope.py" in names
    assert "ulid/__init__.py" in names
    assert not [n for n in names if n.startswith("dynamodb_outbox/local/")]
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_check_fails_and_names_the_stale_entry_when_the_zip_differs(tmp_path: Path) -> None:
    builder = _load_builder()
    stale = tmp_path / "stale.zip"
    with zipfile.ZipFile(stale, "w") as archive:
        archive.writestr("dynamodb_outbox/envelope.py", "old contents")
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--output", str(stale)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "stale" in result.stderr
    assert "dynamodb_outbox/envelope.py" in result.stderr
    fresh = tmp_path / "fresh.zip"
    fresh.write_bytes(builder.build())
    ok = subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--output", str(fresh)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr


def test_committed_zip_matches_a_fresh_build() -> None:
    builder = _load_builder()
    assert (ROOT / "package" / "dynamodb_outbox.zip").read_bytes() == builder.build(), (
        "package/dynamodb_outbox.zip is stale: run `make package` and commit it"
    )
