"""The testing kit as an application team gets it, away from this project's conftest.

* docs/testing.md's "Testing your service" files run verbatim under pytest in a
  virtual environment holding only ``dynamodb-outbox[testing]``
  (tests/support/clean_venv.py): no project conftest, no ``tests`` package,
  no PYTHONPATH, none of the developer's AWS variables.
* examples/service's tests run under pytest with that example as the rootdir
  (its own conftest only), on this venv (the example's models need Pydantic).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.clean_venv import clean_venv_python

REPO = Path(__file__).resolve().parents[2]
TESTING_DOC = REPO / "docs" / "testing.md"
SERVICE = REPO / "examples" / "service"


def readme_testing_files() -> dict[str, str]:
    """The section's ```python blocks that open with ``# <file name>.py``, by file name."""
    text = TESTING_DOC.read_text(encoding="utf-8")
    section = text.split("\n## Testing your service\n", 1)[1].split("\n## ", 1)[0]
    files: dict[str, str] = {}
    for block in re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL):
        first_line = block.splitlines()[0]
        match = re.fullmatch(r"# (\w+\.py)", first_line)
        if match:
            files[match.group(1)] = block
    return files


def bare_environment(**extra: str) -> dict[str, str]:
    """PATH and HOME only: no PYTHONPATH, no AWS_*, nothing of this shell."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(Path.home()), **extra}


def test_the_readme_testing_section_passes_verbatim_in_a_clean_venv(tmp_path: Path) -> None:
    # GIVEN the documented consumer and its tests, written to files as printed
    files = readme_testing_files()
    assert sorted(files) == ["billing.py", "test_billing.py"]
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    python = clean_venv_python()

    # WHEN pytest runs them in a venv with only the package and its extra,
    # with the AWS variables a developer's shell may hold pointing elsewhere
    completed = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path)],
        cwd=tmp_path,
        env=bare_environment(AWS_PROFILE="someone-else", AWS_ENDPOINT_URL="http://127.0.0.1:9"),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )

    # THEN every test passes, and the project's own tooling was nowhere in reach
    assert completed.returncode == 0, completed.stdout[-6000:] + completed.stderr[-3000:]
    assert re.search(r"\b3 passed\b", completed.stdout), completed.stdout[-2000:]
    probe = subprocess.run(
        [str(python), "-c", "import tests.support"], cwd=tmp_path, env=bare_environment(),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert probe.returncode != 0


def test_the_example_service_tests_pass_with_only_the_kit() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "dynamodb_outbox.testing.plugin", "--rootdir", str(SERVICE),
         "-c", str(SERVICE / "pytest.ini"), str(SERVICE / "tests")],
        cwd=SERVICE,
        env=bare_environment(PYTHONPATH=str(REPO / "lambda")),
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-6000:] + completed.stderr[-3000:]
    assert re.search(r"\b9 passed\b", completed.stdout), completed.stdout[-2000:]


def code_lines(path: Path) -> int:
    return sum(
        1
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.strip().startswith("#")
    )


def test_the_readmes_line_counts_are_the_example_services() -> None:
    section = TESTING_DOC.read_text(encoding="utf-8").split("\n### What a team writes\n", 1)[1]
    rows = dict(re.findall(r"^\| `([^`]+)` \|.*\| (\d+) \|$", section, flags=re.MULTILINE))
    tests = sum(code_lines(path) for path in (SERVICE / "tests").glob("test_*.py"))
    assert rows == {
        "orders_service/api.py": str(code_lines(SERVICE / "orders_service" / "api.py")),
        "orders_service/billing.py": str(code_lines(SERVICE / "orders_service" / "billing.py")),
        "orders_service/shipping.py": str(code_lines(SERVICE / "orders_service" / "shipping.py")),
        "tests/conftest.py": str(code_lines(SERVICE / "tests" / "conftest.py")),
        "tests/test_*.py": str(tests),
    }
