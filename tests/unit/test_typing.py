"""The package as a typed dependency: ``py.typed`` shipped, names exported, and
``mypy --strict`` run on code written against it (tests/typing/)."""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import dynamodb_outbox

REPO = Path(__file__).resolve().parents[2]
LAMBDA_DIR = REPO / "lambda"
TYPING_DIR = REPO / "tests" / "typing"
PUBLIC_MODULES = sorted(
    module.name
    for module in pkgutil.iter_modules(dynamodb_outbox.__path__, "dynamodb_outbox.")
    if not module.name.rsplit(".", 1)[1].startswith("_")
    and module.name not in ("dynamodb_outbox.local", "dynamodb_outbox.ops")
)


def run_mypy(*files: Path) -> list[str]:
    """mypy --strict on ``files``; the error lines about them (not about libraries)."""
    search_path = [str(LAMBDA_DIR), *filter(None, [os.environ.get("MYPYPATH")])]
    environment = {**os.environ, "MYPYPATH": os.pathsep.join(search_path)}
    completed = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--python-version", "3.11",
         "--cache-dir", str(REPO / ".mypy_cache"), *map(str, files)],
        cwd=REPO, env=environment, capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    prefix = str(TYPING_DIR.relative_to(REPO))
    return [line for line in completed.stdout.splitlines() if line.startswith(prefix)]


def test_a_typed_service_using_the_api_and_the_local_runtime_passes_mypy_strict() -> None:
    # Handlers typed with SQSEvent / DynamoDBStreamEvent and Powertools'
    # LambdaContext, the project's own handlers, a typed boto3 client.
    assert run_mypy(TYPING_DIR / "typed_service.py") == []


def _expected_error_line(path: Path) -> int:
    lines = path.read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if "expected: arg-type" in line)


@pytest.mark.parametrize(
    ("wrong_use", "wrong_type"),
    [("wrong_client.py", "Table"), ("wrong_sink_client.py", "SNSClient")],
    ids=["table-resource-as-writer-client", "sns-client-as-eventbridge-sink-client"],
)
def test_a_wrong_boto3_client_fails_type_checking(wrong_use: str, wrong_type: str) -> None:
    # Needs boto3-stubs' services (mypy-boto3-dynamodb, -events, -sns in
    # requirements-dev.txt): without them the client is Any and this fails, on purpose.
    path = TYPING_DIR / wrong_use
    errors = run_mypy(path)
    assert len(errors) == 1, errors
    line = _expected_error_line(path)
    assert re.search(rf":{line}: error: .*\"{wrong_type}\".*\[arg-type\]", errors[0]), errors


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_module_declares_all_and_each_name_exists(module_name: str) -> None:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    assert names, f"{module_name} has no __all__"
    missing = [name for name in names if not hasattr(module, name)]
    assert missing == []


def test_the_package_exports_the_names_application_code_uses_lazily() -> None:
    code = (
        "import sys, dynamodb_outbox as d; "
        "assert 'dynamodb_outbox.consumer' not in sys.modules; "
        "print(d.OutboxConsumer.__module__, d.OutboxWriter.__module__, "
        "sorted(set(d.__all__) - set(dir(d))))"
    )
    environment = {**os.environ, "PYTHONPATH": str(LAMBDA_DIR)}
    output = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True
    ).stdout
    assert output.split() == ["dynamodb_outbox.consumer", "dynamodb_outbox.writer", "[]"]
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        dynamodb_outbox.Nope  # type: ignore[attr-defined]  # noqa: B018


def test_py_typed_ships_in_the_package_the_zip_and_the_layer() -> None:
    assert (LAMBDA_DIR / "dynamodb_outbox" / "py.typed").is_file()
    package_data = re.search(
        r"^dynamodb_outbox = \[([^\]]*)\]", (LAMBDA_DIR / "pyproject.toml").read_text(), re.M
    )
    assert package_data is not None and '"py.typed"' in package_data.group(1)
    for name, path in (
        ("dynamodb_outbox.zip", "dynamodb_outbox/py.typed"),
        ("dynamodb_outbox_layer.zip", "python/dynamodb_outbox/py.typed"),
    ):
        with zipfile.ZipFile(REPO / "package" / name) as archive:
            assert path in archive.namelist(), name


def test_a_misspelt_name_imported_from_the_package_fails_type_checking() -> None:
    # The package loads its names lazily (PEP 562 __getattr__); type checkers
    # see its TYPE_CHECKING imports instead, so a typo is an error there too.
    path = TYPING_DIR / "wrong_name.py"
    errors = run_mypy(path)
    assert len(errors) == 1, errors
    typo = r':3: error: Module "dynamodb_outbox" has no attribute "OutboxWritter"'
    assert re.search(typo, errors[0]), errors


SERVICE_DIR = REPO / "examples" / "service"


def _readme_testing_files(target: Path) -> list[Path]:
    from tests.functional.test_testing_kit_outside_the_project import readme_testing_files

    written = []
    for name, text in readme_testing_files().items():
        (target / name).write_text(text, encoding="utf-8")
        written.append(target / name)
    return written


def test_a_user_project_and_the_readmes_tests_pass_mypy_strict(tmp_path: Path) -> None:
    # examples/service (a producer, two consumers, their tests on the testing
    # kit) and docs/testing.md's testing files, typed as a team types them: the
    # handlers take Powertools' LambdaContext, the tests pass the kit's.
    readme_files = _readme_testing_files(tmp_path)
    search_path = [str(LAMBDA_DIR), str(SERVICE_DIR), str(tmp_path)]
    environment = {**os.environ, "MYPYPATH": os.pathsep.join(search_path)}
    completed = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--python-version", "3.11",
         "--cache-dir", str(REPO / ".mypy_cache"), "--explicit-package-bases",
         str(SERVICE_DIR / "orders_service"), *map(str, SERVICE_DIR.glob("tests/*.py")),
         *map(str, readme_files)],
        cwd=REPO, env=environment, capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-2000:]
    assert "Success: no issues found" in completed.stdout
