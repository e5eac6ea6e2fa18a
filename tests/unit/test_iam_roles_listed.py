"""Every IAM role the module declares is one the organisation inputs are tested on.

tests/terraform/organisation.tftest.hcl checks the path, name prefix,
permissions boundary and tags of the roles it names; a role added to a .tf file
without being named there would escape those checks.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
ROLE = re.compile(r'^resource\s+"aws_iam_role"\s+"(\w+)"', re.MULTILINE)


def test_every_role_the_module_declares_is_checked_for_the_organisation_inputs() -> None:
    declared = {
        name
        for path in [*REPO_ROOT.glob("*.tf"), *REPO_ROOT.glob("modules/**/*.tf")]
        for name in ROLE.findall(path.read_text(encoding="utf-8"))
    }
    checks = (REPO_ROOT / "tests/terraform/organisation.tftest.hcl").read_text(encoding="utf-8")
    run = checks.split('run "every_role_gets_the_path_prefix_boundary_and_role_tags"', 1)[1]
    run = run.split("\nrun ", 1)[0]

    assert declared == {"publisher", "sweeper", "sweeper_schedule", "consumer", "forwarder"}
    assert {name for name in declared if f"aws_iam_role.{name}" not in run} == set()
