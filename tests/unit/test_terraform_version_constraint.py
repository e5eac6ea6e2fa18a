"""versions.tf's required_version: 1.9 or newer, but not 1.15.0.

1.15.0's `init` fails on the module's validations that refer to another input
(hashicorp/terraform#38463; fixed in 1.15.1 by hashicorp/terraform#38471).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

VERSIONS_TF = Path(__file__).resolve().parents[2] / "versions.tf"


def parse(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def allowed(version: str) -> bool:
    """Terraform's reading of the constraint (only the operators it uses here)."""
    match = re.search(r'required_version\s*=\s*"([^"]+)"', VERSIONS_TF.read_text())
    assert match, "versions.tf has no required_version"
    checks = {">=": lambda a, b: a >= b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b}
    result = True
    for term in match.group(1).split(","):
        operator, bound = re.fullmatch(r"\s*(>=|!=|<)\s*([0-9.]+)\s*", term).groups()  # type: ignore[union-attr]
        result = result and checks[operator](parse(version), parse(bound))
    return result


@pytest.mark.parametrize("version", ["1.9.0", "1.11.4", "1.14.9", "1.15.1", "1.16.0"])
def test_terraform_versions_that_init_the_module_are_allowed(version: str) -> None:
    assert allowed(version)


@pytest.mark.parametrize("version", ["1.8.5", "1.15.0"])
def test_terraform_versions_that_cannot_are_refused(version: str) -> None:
    assert not allowed(version)
