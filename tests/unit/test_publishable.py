"""What a Terraform Registry release needs from the repository (docs/releasing.md)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def _tracked_text_files() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    suffixes = {".md", ".tf", ".py", ".hcl", ".toml", ".txt", ".ini", ".cfg"}
    return [REPO_ROOT / name for name in names if Path(name).suffix in suffixes]


def test_no_org_placeholder_is_left_in_the_repository() -> None:
    left = [
        str(path.relative_to(REPO_ROOT))
        for path in _tracked_text_files()
        if path.is_file()
        and "<org>" in path.read_text(encoding="utf-8")
        and path.name != "test_publishable.py"
    ]
    assert left == []


def test_readme_usage_is_a_registry_block_pinned_to_the_changelog_s_minor() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    usage = readme.split("## Usage", 1)[1].split("```", 2)[1]
    assert 'source  = "<namespace>/dynamodb-outbox/aws"' in usage
    constraint = re.search(r'version = "~> (\d+)\.(\d+)"', usage)
    assert constraint is not None, usage

    changelog = (REPO_ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    newest = re.search(r"^## \[(\d+)\.(\d+)\.(\d+)\]", changelog, re.MULTILINE)
    assert newest is not None, "CHANGELOG.md has no versioned section"
    assert newest.groups()[:2] == constraint.groups()


def test_releasing_doc_says_how_to_tag_and_publish() -> None:
    releasing = (REPO_ROOT / "docs" / "releasing.md").read_text(encoding="utf-8")
    for step in ("git tag -a v", "git push origin v", "registry.terraform.io", "make package"):
        assert step in releasing, step
