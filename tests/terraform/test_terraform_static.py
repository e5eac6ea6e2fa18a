"""Terraform checks that need no AWS: fmt, init + validate, and `terraform test` with mocks.

`pytest tests/terraform` runs them with the apply test; each can also be run
by hand (see the commands in the assertion messages).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.terraform.tfhelpers import EXAMPLES_DIR, REPO_ROOT, describe, run_terraform

pytestmark = pytest.mark.terraform

# The module and every example: a new folder under examples/ holding *.tf files
# is validated without being listed here.
ROOT_MODULES = [
    ".",
    *sorted(
        f"examples/{path.name}"
        for path in EXAMPLES_DIR.iterdir()
        if path.is_dir() and any(path.glob("*.tf"))
    ),
    "tests/e2e/stack",
]


def test_every_example_is_validated() -> None:
    """Guards the enumeration above against silently finding nothing."""
    assert {"examples/complete", "examples/local"} <= set(ROOT_MODULES), ROOT_MODULES


def test_terraform_files_are_formatted(tf_env: dict[str, str]) -> None:
    result = run_terraform(["fmt", "-check", "-recursive", "-diff"], cwd=REPO_ROOT, env=tf_env)

    assert result.returncode == 0, "run `terraform fmt -recursive`:\n" + describe(result)


@pytest.mark.parametrize("module_dir", ROOT_MODULES)
def test_module_initialises_offline_and_validates(
    module_dir: str, tf_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**tf_env, "TF_DATA_DIR": str(tmp_path / ".terraform")}
    cwd = REPO_ROOT / module_dir

    init = run_terraform(["init", "-backend=false", "-input=false", "-no-color"], cwd=cwd, env=env)
    assert init.returncode == 0, describe(init)

    validate = run_terraform(["validate", "-no-color"], cwd=cwd, env=env)
    assert validate.returncode == 0, describe(validate)


def test_terraform_test_suite_passes(tf_env: dict[str, str], tmp_path: Path) -> None:
    """Runs tests/terraform/*.tftest.hcl (mock provider, plan only)."""
    env = {**tf_env, "TF_DATA_DIR": str(tmp_path / ".terraform")}
    init = run_terraform(
        ["init", "-backend=false", "-input=false", "-no-color", "-test-directory=tests/terraform"],
        cwd=REPO_ROOT,
        env=env,
    )
    assert init.returncode == 0, describe(init)

    result = run_terraform(
        ["test", "-no-color", "-test-directory=tests/terraform"], cwd=REPO_ROOT, env=env
    )

    assert result.returncode == 0, describe(result)
    assert "0 failed" in result.stdout and " passed" in result.stdout, describe(result)
