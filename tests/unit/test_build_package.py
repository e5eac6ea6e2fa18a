"""The deployment zip is reproducible and holds exactly what Lambda needs."""

from __future__ import annotations

import importlib.util
import io
import json
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


def test_zip_ships_the_handlers_alone_not_the_local_runtime_bytecode_or_other_packages() -> None:
    builder = _load_builder()
    names = [arcname for arcname, _ in builder.entries()]
    assert "dynamodb_outbox/publisher.py" in names
    assert "dynamodb_outbox/envelope.py" in names
    assert "dynamodb_outbox/ulid_codec.py" in names
    assert [n for n in names if not n.startswith("dynamodb_outbox/")] == []
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


def test_layer_zip_holds_the_function_zip_files_under_python() -> None:
    """Lambda adds a Python layer's python/ folder to sys.path: same files, one level down."""
    builder = _load_builder()
    with zipfile.ZipFile(io.BytesIO(builder.build())) as function_zip:
        function_files = {i.filename: function_zip.read(i) for i in function_zip.infolist()}
    with zipfile.ZipFile(io.BytesIO(builder.build_layer())) as layer_zip:
        infos = layer_zip.infolist()
        layer_files = {i.filename: layer_zip.read(i) for i in infos}

    assert layer_files == {f"python/{name}": data for name, data in function_files.items()}
    assert "python/dynamodb_outbox/consumer.py" in layer_files
    assert "python/dynamodb_outbox/writer.py" in layer_files
    assert not [n for n in layer_files if n.startswith("python/dynamodb_outbox/local/")]
    assert [i.filename for i in infos] == sorted(i.filename for i in infos)
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert {i.external_attr >> 16 for i in infos} == {0o100644}
    assert builder.build_layer() == builder.build_layer()


def test_check_names_a_stale_layer_zip(tmp_path: Path) -> None:
    builder = _load_builder()
    stale = tmp_path / "layer.zip"
    with zipfile.ZipFile(stale, "w") as archive:
        archive.writestr("dynamodb_outbox/envelope.py", builder.build())  # not under python/
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--layer-output", str(stale)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "stale" in result.stderr
    assert "python/dynamodb_outbox/envelope.py" in result.stderr
    stale.write_bytes(builder.build_layer())
    ok = subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--layer-output", str(stale)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr


def test_committed_layer_zip_matches_a_fresh_build() -> None:
    builder = _load_builder()
    assert (ROOT / "package" / "dynamodb_outbox_layer.zip").read_bytes() == builder.build_layer(), (
        "package/dynamodb_outbox_layer.zip is stale: run `make package` and commit it"
    )


# What Lambda gives a function besides the zip: the runtime's boto3 (with its own
# dependencies) and the Powertools layer (with its own). Anything else a handler
# imports would import here, from the test venv, and fail on Lambda.
PROVIDED_DISTRIBUTIONS = {
    "boto3",
    "botocore",
    "s3transfer",
    "jmespath",
    "python-dateutil",
    "six",
    "urllib3",
    "aws-lambda-powertools",
    "typing-extensions",
}
HANDLERS = (
    "dynamodb_outbox.publisher",
    "dynamodb_outbox.sweeper",
    "dynamodb_outbox.reference_consumer",
    "dynamodb_outbox.consumer",
    "dynamodb_outbox.writer",
)
# boto3 first, as the runtime has it (with whatever optional extras it finds);
# then the handler, and the top-level modules it adds.
_IMPORT_FROM_ZIP = """
import importlib, importlib.metadata, json, sys
import boto3
before = set(sys.modules)
importlib.import_module(sys.argv[1])
owners = importlib.metadata.packages_distributions()
added = {name.split(".")[0] for name in set(sys.modules) - before}
added -= set(sys.stdlib_module_names)
print(json.dumps({
    "package_file": sys.modules["dynamodb_outbox"].__file__,
    "from": {root: owners.get(root, ["?"]) for root in sorted(added)},
}))
"""


def _distribution(name: str) -> str:
    return name.lower().replace("_", "-")


def test_each_handler_imports_from_the_zip_with_only_what_lambda_provides(tmp_path: Path) -> None:
    with zipfile.ZipFile(ROOT / "package" / "dynamodb_outbox.zip") as archive:
        archive.extractall(tmp_path)
    for handler in HANDLERS:
        done = subprocess.run(
            [sys.executable, "-B", "-c", _IMPORT_FROM_ZIP, handler],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(tmp_path), "AWS_DEFAULT_REGION": "us-east-1"},
            check=True,
        )
        seen = json.loads(done.stdout)
        assert Path(seen["package_file"]).is_relative_to(tmp_path), seen["package_file"]
        foreign = {
            root: owners
            for root, owners in seen["from"].items()
            if root != "dynamodb_outbox"
            and not {_distribution(owner) for owner in owners} & PROVIDED_DISTRIBUTIONS
        }
        assert foreign == {}, f"{handler} imports what neither the zip nor Lambda provides"
