"""The module reads the provider's region without a deprecated attribute.

hashicorp/aws 6.x deprecates aws_region's `name` (6.0) and `id` (6.47.0,
hashicorp/terraform-provider-aws#48036) in favour of `region`, which 5.x lacks.
A static reference to any of them warns on one major or fails on the other;
main.tf reads them with lookup() on the whole object, which neither checks.
tests/terraform/provider_compat.tftest.hcl checks the value on 5.x.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
STATIC_REFERENCE = re.compile(r"data\.aws_region\.[A-Za-z_]+(\[[^\]]*\])?\.(id|name|region)\b")


def test_no_module_file_reads_an_aws_region_attribute_directly() -> None:
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(REPO_ROOT.glob("*.tf"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if STATIC_REFERENCE.search(line)
    ]

    assert found == []


def test_the_region_is_looked_up_from_region_then_id() -> None:
    main = (REPO_ROOT / "main.tf").read_text(encoding="utf-8")

    assert 'lookup(data.aws_region.current, "region", null)' in main
    assert 'lookup(data.aws_region.current, "id", null)' in main


def test_the_region_is_chosen_by_a_conditional_not_coalesce() -> None:
    # coalesce() puts the marks of all its arguments on its result, so the
    # deprecated `id` would mark every ARN built from the region on 6.47+.
    main = (REPO_ROOT / "main.tf").read_text(encoding="utf-8")
    (definition,) = [line for line in main.splitlines() if line.strip().startswith("region_name ")]

    assert "coalesce" not in definition
    assert "local.region_from_6x != null ? local.region_from_6x :" in definition
