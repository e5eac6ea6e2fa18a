"""docs/aws-semantics.md is the one AWS-rules document, and what it points at exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "aws-semantics.md"
SEARCHED = ("lambda", "docs", "tests", "scripts", "examples", "README.md")
THIS_FILE = Path(__file__).resolve()


def project_text_files() -> list[Path]:
    files: list[Path] = []
    for name in SEARCHED:
        path = ROOT / name
        candidates = [path] if path.is_file() else path.rglob("*")
        files += [
            f
            for f in candidates
            if f.is_file() and f.suffix in {".py", ".md", ".tf", ".hcl"} and f != THIS_FILE
        ]
    return files


def test_no_file_cites_a_semantics_document_outside_the_repository() -> None:
    citing = [
        str(f.relative_to(ROOT))
        for f in project_text_files()
        if "AWS-SEMANTICS" in f.read_text(encoding="utf-8", errors="replace")
    ]
    assert citing == []


def test_every_section_names_its_aws_sources_and_where_it_is_honoured() -> None:
    sections = DOC.read_text(encoding="utf-8").split("\n## ")[1:]
    assert len(sections) >= 8
    for section in sections:
        title = section.splitlines()[0]
        assert "Sources:" in section, f"section {title!r} names no AWS source"
        assert "Honoured by:" in section, f"section {title!r} says not where it is honoured"


def test_the_files_it_points_at_exist() -> None:
    text = DOC.read_text(encoding="utf-8")
    paths = set(re.findall(r"`((?:tests|lambda)/[\w/.*-]+)`", text))
    paths |= {f"lambda/dynamodb_outbox/{name}" for name in re.findall(r"`(\w+\.py)`", text)}
    paths |= set(re.findall(r"`(\w+\.tf)`", text))
    assert len(paths) > 15
    missing = [p for p in sorted(paths) if not list(ROOT.glob(p))]
    assert missing == []


def test_the_local_runtime_readme_links_to_it() -> None:
    readme = ROOT / "lambda" / "dynamodb_outbox" / "local" / "README.md"
    links = re.findall(r"\]\(([^)]*aws-semantics\.md)\)", readme.read_text(encoding="utf-8"))
    assert links and all((readme.parent / link).resolve() == DOC for link in links)
