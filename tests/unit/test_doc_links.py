"""The README a module user reads: its contents, its two commands, and links that resolve.

The README keeps the module's story (what it is, usage, inputs, outputs,
guarantees and limits) and links the rest in docs/. A moved or renamed
section must not leave a link pointing nowhere, so every relative link of the
README, docs/*.md and the examples' READMEs must name an existing file, and
its anchor, when given, a heading of that file (GitHub's anchor rule:
lowercase, punctuation dropped, spaces to hyphens, ``-1``, ``-2`` for repeats).
Where the documentation lists the transports, it names every one the
publisher knows.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
DOCUMENTS = sorted(
    [README, *(REPO_ROOT / "docs").glob("*.md"), *(REPO_ROOT / "examples").glob("*/README.md")]
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def outside_code_fences(text: str) -> list[str]:
    """The lines of a Markdown text that are not inside ``` fences."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def heading_slug(heading: str) -> str:
    """GitHub's anchor for a heading's text, before repeats are numbered."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def headings(path: Path) -> list[tuple[int, str]]:
    """(level, text) of each heading of a Markdown file, in order."""
    found = []
    for line in outside_code_fences(path.read_text(encoding="utf-8")):
        match = re.match(r"^(#{1,6}) (.+?)\s*$", line)
        if match:
            found.append((len(match.group(1)), match.group(2)))
    return found


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for _, text in headings(path):
        slug = heading_slug(text)
        result.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return result


def links(path: Path) -> list[str]:
    return [
        target
        for line in outside_code_fences(path.read_text(encoding="utf-8"))
        for target in LINK.findall(line)
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


def section(path: Path, heading: str) -> str:
    text = path.read_text(encoding="utf-8")
    assert f"\n{heading}\n" in text, f"{path.name} has no {heading!r}"
    return re.split(r"\n## ", text.split(f"\n{heading}\n", 1)[1], maxsplit=1)[0]


def test_the_slugs_are_githubs() -> None:
    assert heading_slug("Alarms notify no one until `alarms.actions` is set") == (
        "alarms-notify-no-one-until-alarmsactions-is-set"
    )
    assert heading_slug("Putting the bus DLQ's events back") == "putting-the-bus-dlqs-events-back"
    assert heading_slug("What `kms_key_arn` encrypts") == "what-kms_key_arn-encrypts"
    assert heading_slug("`make demo` and `make test`") == "make-demo-and-make-test"


def test_the_readme_contents_list_every_section_and_only_its_headings() -> None:
    contents = section(README, "## Contents")
    listed = re.findall(r"^\s*- \[[^\]]+\]\(#([^)]+)\)$", contents, flags=re.MULTILINE)
    sections = [heading_slug(text) for level, text in headings(README) if level == 2]

    assert listed, "README.md's Contents lists nothing"
    assert set(listed) <= anchors(README), set(listed) - anchors(README)
    assert [slug for slug in listed if slug in sections] == [
        slug for slug in sections if slug != "contents"
    ], "README.md's Contents must list every ## section, in order"


def test_the_readme_opens_with_its_two_commands_before_usage() -> None:
    text = README.read_text(encoding="utf-8")
    try_it = section(README, "## Try it")

    assert re.search(r"```sh\nmake demo\b.*\nmake test\b.*\n```", try_it), try_it
    assert text.index("\n## Try it\n") < text.index("\n## Usage\n")
    assert text[: text.index("\n## Try it\n")].count("\n") < 80, "Try it is not near the top"


def test_the_readme_names_every_example() -> None:
    usage = section(README, "## Usage")
    examples = sorted(p.name for p in (REPO_ROOT / "examples").iterdir() if p.is_dir())

    missing = [name for name in examples if f"`examples/{name}`" not in usage]
    assert not missing, f"README.md's Usage does not name: {missing}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_resolves_to_a_file_and_heading(document: Path) -> None:
    broken = []
    for target in links(document):
        path_part, _, anchor = target.partition("#")
        linked = (document.parent / path_part).resolve() if path_part else document
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.relative_to(REPO_ROOT)}")
    assert not broken, f"{document.relative_to(REPO_ROOT)}: " + "; ".join(broken)


def test_the_readme_links_the_docs_it_moved_out() -> None:
    targets = {target.partition("#")[0] for target in links(README)}

    for page in ("docs/python.md", "docs/testing.md", "docs/operations.md", "docs/design.md"):
        assert page in targets, f"README.md does not link {page}"


def table_row(path: Path, first_cell: str) -> str:
    (row,) = [
        line
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith(first_cell)
    ]
    return row


def test_the_documented_transports_are_the_publishers() -> None:
    from dynamodb_outbox.sinks import PUBLISH_TO_EVENTBRIDGE, PUBLISH_TO_SNS, PUBLISH_TO_SNS_FIFO

    transports = {PUBLISH_TO_EVENTBRIDGE, PUBLISH_TO_SNS, PUBLISH_TO_SNS_FIFO}
    rows = {
        "README.md's `publish_to` input": table_row(README, "| `publish_to` |"),
        "docs/python.md's `OUTBOX_PUBLISH_TO`": table_row(
            REPO_ROOT / "docs" / "python.md", "| `OUTBOX_PUBLISH_TO` |"
        ),
    }
    for where, row in rows.items():
        named = set(re.findall(r"`([a-z_]+)`", row))
        assert transports <= named, f"{where} does not name {sorted(transports - named)}"
