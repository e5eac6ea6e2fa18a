"""The deployment zip is reproducible and holds exactly what Lambda needs."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import io
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

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


def test_zip_ships_the_handlers_and_python_ulid_not_the_local_runtime_or_bytecode() -> None:
    builder = _load_builder()
    names = [arcname for arcname, _ in builder.entries()]
    ulid_version = builder.pinned_version("python-ulid")
    assert "dynamodb_outbox/publisher.py" in names
    assert "dynamodb_outbox/envelope.py" in names
    assert "dynamodb_outbox/event_ids.py" in names
    assert "ulid/__init__.py" in names
    assert f"python_ulid-{ulid_version}.dist-info/METADATA" in names
    assert f"python_ulid-{ulid_version}.dist-info/licenses/LICENSE" in names
    outside = [n for n in names if not n.startswith(("dynamodb_outbox/", "ulid/"))]
    assert outside == [
        f"python_ulid-{ulid_version}.dist-info/METADATA",
        f"python_ulid-{ulid_version}.dist-info/licenses/LICENSE",
    ]
    assert not [n for n in names if n.startswith("dynamodb_outbox/local/")]
    assert not [n for n in names if n.startswith("dynamodb_outbox/testing/")]
    assert "dynamodb_outbox/routing.py" in names  # the consumer imports it
    # The sources come from lambda/ only: no bytecode a machine happened to cache.
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_zip_ships_checked_hash_bytecode_of_every_module_for_each_runtime() -> None:
    """PEP 552 pycs (no timestamp: reproducible), one per shipped module and version.

    Checked: a source edited after deployment is compiled, not shadowed by its pyc.
    """
    builder = _load_builder()
    with zipfile.ZipFile(io.BytesIO(builder.build())) as archive:
        files = {i.filename: archive.read(i) for i in archive.infolist()}
    sources = [n for n in files if n.endswith(".py")]
    assert builder.BYTECODE_VERSIONS == ("3.11", "3.12", "3.13")
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    for version in builder.BYTECODE_VERSIONS:
        tag = "cpython-" + version.replace(".", "")
        for source in sources:
            folder, _, module = source.rpartition("/")
            pyc = files[f"{folder}/__pycache__/{module[:-3]}.{tag}.pyc"]
            flags = int.from_bytes(pyc[4:8], "little")
            assert flags == 0b11, (source, version)  # hash-based, checked against the source
            if version == running:  # the hash is keyed by the interpreter's own magic
                assert pyc[8:16] == importlib.util.source_hash(files[source]), source
    pycs = [n for n in files if n.endswith(".pyc")]
    assert len(pycs) == len(sources) * len(builder.BYTECODE_VERSIONS)
    own = f"cpython-{sys.version_info.major}{sys.version_info.minor}.pyc"
    assert {files[n][:4] for n in pycs if n.endswith(own)} == {importlib.util.MAGIC_NUMBER}


def test_the_default_runtime_gets_bytecode() -> None:
    """variables.tf's default lambda_runtime is one of the versions compiled."""
    builder = _load_builder()
    variables = (ROOT / "variables.tf").read_text()
    block = variables[variables.index('variable "lambda_runtime"') :]
    default = re.search(r'default\s*=\s*"python(3\.\d+)"', block)
    assert default is not None
    assert default.group(1) in builder.BYTECODE_VERSIONS


def test_a_zip_without_bytecode_holds_the_same_sources() -> None:
    builder = _load_builder()
    with zipfile.ZipFile(io.BytesIO(builder.build(with_bytecode=False))) as archive:
        bare = {i.filename: archive.read(i) for i in archive.infolist()}
    with zipfile.ZipFile(io.BytesIO(builder.build())) as archive:
        full = {i.filename: archive.read(i) for i in archive.infolist()}
    assert bare == {n: d for n, d in full.items() if not n.endswith(".pyc")}


def test_build_refuses_a_python_ulid_other_than_the_pinned_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = _load_builder()
    requirements = tmp_path / "requirements-dev.txt"
    requirements.write_text("boto3==1.0\npython-ulid==0.0.1\n")
    monkeypatch.setattr(builder, "REQUIREMENTS", requirements)
    with pytest.raises(builder.BuildError, match=r"pins 0\.0\.1; run `make venv`"):
        builder.entries()


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
    assert "python/dynamodb_outbox/consumer/_consumer.py" in layer_files
    assert "python/dynamodb_outbox/writer/_writer.py" in layer_files
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
# dependencies) and the Powertools layer (with its own). A handler importing
# anything else would work here, from the test venv, and fail on Lambda.
PROVIDED_DISTRIBUTIONS = (
    "boto3",
    "botocore",
    "s3transfer",
    "jmespath",
    "python-dateutil",
    "six",
    "urllib3",
    "aws-lambda-powertools",
    "typing-extensions",
)
HANDLERS = (
    "dynamodb_outbox.publisher",
    "dynamodb_outbox.sweeper",
    "dynamodb_outbox.reference_consumer",
    "dynamodb_outbox.consumer",
    "dynamodb_outbox.writer",
    "dynamodb_outbox.envelope",
)
# boto3 first, as the runtime has it; then the handler. Where each module came from.
_IMPORT_FROM_ZIP = """
import importlib, json, sys
import boto3
importlib.import_module(sys.argv[1])
print(json.dumps({name: getattr(sys.modules[name], "__file__", None)
                  for name in ("dynamodb_outbox", "ulid") if name in sys.modules}))
"""


def _lambda_like_site(target: Path) -> Path:
    """A folder holding only what Lambda provides: links to those distributions' top levels."""
    target.mkdir()
    for name in PROVIDED_DISTRIBUTIONS:
        distribution = importlib.metadata.distribution(name)
        for file in distribution.files or ():
            top = file.parts[0]
            if top.endswith((".dist-info", ".data")) or top in {"..", "__pycache__"}:
                continue
            link = target / top
            if not link.exists():
                link.symlink_to(Path(str(distribution.locate_file(top))))
    return target


def test_each_handler_imports_from_the_zip_with_only_what_lambda_provides(tmp_path: Path) -> None:
    """python-ulid must come from the zip; nothing else the venv has may be needed."""
    extracted = tmp_path / "zip"
    with zipfile.ZipFile(ROOT / "package" / "dynamodb_outbox.zip") as archive:
        archive.extractall(extracted)
    site = _lambda_like_site(tmp_path / "site")
    for handler in HANDLERS:
        done = subprocess.run(
            # -S: no site-packages at all, so only the zip and the Lambda-like site count.
            [sys.executable, "-S", "-B", "-c", _IMPORT_FROM_ZIP, handler],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": f"{extracted}:{site}", "AWS_DEFAULT_REGION": "us-east-1"},
            check=False,
        )
        assert done.returncode == 0, f"{handler} cannot import on Lambda:\n{done.stderr}"
        files = json.loads(done.stdout)
        assert Path(files["dynamodb_outbox"]).is_relative_to(extracted), files
        if "ulid" in files:
            assert Path(files["ulid"]).is_relative_to(extracted), files


def test_the_names_shared_with_terraform_ship_in_the_installed_distribution() -> None:
    """``regions`` reads shared_with_terraform.json at import: a wheel without it fails."""
    text = (ROOT / "lambda" / "pyproject.toml").read_text()
    assert re.search(r'^dynamodb_outbox = \[[^\]]*"shared_with_terraform\.json"', text, re.M)


def test_handlers_load_the_shipped_bytecode_and_compile_nothing(tmp_path: Path) -> None:
    """On a runtime the zip has bytecode for, no module of the package is compiled at start.

    Lambda's task directory is read-only: a module compiled from source is
    compiled again at every cold start. ``-v`` names where each code object
    came from.
    """
    extracted = tmp_path / "zip"
    with zipfile.ZipFile(ROOT / "package" / "dynamodb_outbox.zip") as archive:
        archive.extractall(extracted)
    site = _lambda_like_site(tmp_path / "site")
    for handler in ("dynamodb_outbox.publisher", "dynamodb_outbox.sweeper"):
        done = subprocess.run(
            [sys.executable, "-S", "-B", "-v", "-c", f"import boto3, {handler}"],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": f"{extracted}:{site}", "AWS_DEFAULT_REGION": "us-east-1"},
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        loaded = re.findall(r"^# code object from '?(.+?)'?$", done.stderr, re.MULTILINE)
        ours = [path for path in loaded if Path(path).is_relative_to(extracted)]
        assert ours, f"{handler}: nothing loaded from the zip"
        compiled = [path for path in ours if not path.endswith(".pyc")]
        assert not compiled, f"{handler} compiled these at start: {compiled}"


def test_a_source_edited_after_deployment_runs_instead_of_its_shipped_bytecode(
    tmp_path: Path,
) -> None:
    """Checked-hash pycs: an edit in the deployed function (the console's editor) takes effect."""
    extracted = tmp_path / "zip"
    with zipfile.ZipFile(ROOT / "package" / "dynamodb_outbox.zip") as archive:
        archive.extractall(extracted)
    source = extracted / "dynamodb_outbox" / "sizes.py"
    source.write_text(source.read_text() + "\nEDITED_AFTER_DEPLOYMENT = True\n")
    done = subprocess.run(
        [
            sys.executable,
            "-S",
            "-B",
            "-c",
            "import dynamodb_outbox.sizes as s; print(hasattr(s, 'EDITED_AFTER_DEPLOYMENT'))",
        ],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(extracted)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
