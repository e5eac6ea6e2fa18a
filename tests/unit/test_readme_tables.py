"""The README's Inputs and Outputs tables name every variable and output, and nothing else.

Names come from `variable "x"` / `output "x"` blocks of the module's top-level
*.tf files, and from the first column of the README tables, where a cell may
list several names in backticks separated by commas.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"

_BLOCK = {
    "Inputs": re.compile(r'^variable\s+"([^"]+)"', re.MULTILINE),
    "Outputs": re.compile(r'^output\s+"([^"]+)"', re.MULTILINE),
}


def terraform_names(kind: str) -> set[str]:
    """Names declared by the module's own *.tf files (not the examples')."""
    pattern = _BLOCK[kind]
    return {
        name
        for path in sorted(REPO_ROOT.glob("*.tf"))
        for name in pattern.findall(path.read_text(encoding="utf-8"))
    }


def readme_table_names(section: str) -> set[str]:
    """Names in the first column of the first table under ``## <section>``."""
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(section)}\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"README.md has no `## {section}` section"
    rows = [line for line in match.group(1).splitlines() if line.startswith("|")]
    assert len(rows) > 2, f"README.md `## {section}` has no table"
    names: set[str] = set()
    for row in rows[2:]:  # skip the header and the |---| line
        first_cell = row.split("|")[1]
        names.update(re.findall(r"`([^`]+)`", first_cell))
    return names


@pytest.mark.parametrize("section", ["Inputs", "Outputs"])
def test_readme_table_matches_terraform(section: str) -> None:
    declared = terraform_names(section)
    documented = readme_table_names(section)
    assert declared, f"no {section.lower()} found in the module's *.tf files"

    missing = sorted(declared - documented)
    extra = sorted(documented - declared)
    problems = []
    if missing:
        problems.append(f"missing from README `## {section}`: {', '.join(missing)}")
    if extra:
        problems.append(f"in README `## {section}` but not in the *.tf files: {', '.join(extra)}")
    assert not problems, "; ".join(problems)
