"""The Powertools release the module deploys is the one the tests run with.

The module's `powertools_version` default (variables.tf) picks the public
Powertools layer its functions run; requirements-dev.txt pins the
aws_lambda_powertools the Python tests import. Bumping one without the other
fails here, as does an example setting another release (no terraform needed).
A value that is no v3 release fails at `terraform validate` with the module's
message naming the input.
"""

from __future__ import annotations

import re
from importlib.metadata import version as installed_version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.terraform.tfhelpers import REPO_ROOT, describe, run_terraform

VARIABLES_TF = REPO_ROOT / "variables.tf"
EXAMPLES_DIR = REPO_ROOT / "examples"
REQUIREMENTS_DEV = REPO_ROOT / "requirements-dev.txt"
POWERTOOLS = canonicalize_name("aws-lambda-powertools")

# The variable's block runs from its header to the first closing brace at the
# start of a line (terraform fmt puts it there).
_VARIABLE_BLOCK = re.compile(
    r'^variable "powertools_version" \{\n(.*?)^\}', re.MULTILINE | re.DOTALL
)
_STRING_DEFAULT = re.compile(r'^\s*default\s*=\s*"([^"]*)"\s*$', re.MULTILINE)
_EXAMPLE_SETTING = re.compile(r'^\s*powertools_version\s*=\s*"([^"]*)"', re.MULTILINE)


def module_default_powertools_version() -> str:
    block = _VARIABLE_BLOCK.search(VARIABLES_TF.read_text())
    assert block is not None, f'no variable "powertools_version" block in {VARIABLES_TF}'
    default = _STRING_DEFAULT.search(block.group(1))
    assert default is not None, 'variable "powertools_version" has no string default'
    return default.group(1)


def pinned_powertools_version() -> str:
    for line in REQUIREMENTS_DEV.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        if canonicalize_name(requirement.name) != POWERTOOLS:
            continue
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", f"{REQUIREMENTS_DEV.name} must pin {line!r} exactly"
        return specifier.version
    raise AssertionError(f"{REQUIREMENTS_DEV.name} does not pin aws_lambda_powertools")


def test_module_default_is_the_powertools_the_tests_pin() -> None:
    default = module_default_powertools_version()
    pinned = pinned_powertools_version()

    assert default == pinned, (
        f'variables.tf: powertools_version defaults to "{default}" but '
        f"requirements-dev.txt pins aws_lambda_powertools=={pinned}: "
        "the functions would run another Powertools than the tests. Change both together."
    )


def test_examples_set_the_powertools_the_tests_pin() -> None:
    pinned = pinned_powertools_version()
    settings = {
        f"{path.relative_to(REPO_ROOT)}: {value}"
        for path in sorted(EXAMPLES_DIR.glob("*/*.tf"))
        for value in _EXAMPLE_SETTING.findall(path.read_text())
    }

    assert settings, "no example sets powertools_version (examples/complete shows every input)"
    assert all(setting.endswith(f": {pinned}") for setting in settings), (
        f"requirements-dev.txt pins aws_lambda_powertools=={pinned}; the examples set {settings}"
    )


def test_tests_run_the_pinned_powertools() -> None:
    pinned = pinned_powertools_version()

    assert installed_version("aws_lambda_powertools") == pinned, (
        "the virtualenv is out of date: pip install -r requirements-dev.txt"
    )


@pytest.mark.terraform
def test_validate_names_powertools_version_when_it_is_not_a_release(
    tf_env: dict[str, str], aws_provider_env: dict[str, str], tmp_path: Path
) -> None:
    root = tmp_path / "caller"
    root.mkdir()
    (root / "main.tf").write_text(
        'module "outbox" {\n'
        f'  source             = "{REPO_ROOT.as_posix()}"\n'
        '  name               = "orders-outbox"\n'
        '  powertools_version = "latest"\n'
        "}\n"
    )
    env = {**tf_env, "TF_DATA_DIR": str(tmp_path / ".terraform")}
    init = run_terraform(["init", "-backend=false", "-input=false", "-no-color"], cwd=root, env=env)
    assert init.returncode == 0, describe(init)

    validate = run_terraform(["validate", "-no-color"], cwd=root, env={**env, **aws_provider_env})

    assert validate.returncode != 0, describe(validate)
    message = " ".join(validate.stderr.split())
    assert (
        "The powertools_version must be a Powertools for AWS Lambda (Python) v3 release" in message
    ), describe(validate)
    assert 'got "latest"' in message, describe(validate)
