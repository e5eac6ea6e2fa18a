#!/usr/bin/env python3
"""Tag a release after checking that every statement of its version agrees.

``make release VERSION=x.y.z`` runs it. It refuses, naming what is wrong:

- a version that is not ``MAJOR.MINOR.PATCH``, or whose tag ``vX.Y.Z`` exists;
- a working tree with uncommitted or untracked changes (the tag would name a
  commit other than what was checked);
- a version that disagrees anywhere: ``__version__`` in
  ``lambda/dynamodb_outbox/__init__.py`` (the one source: ``lambda/pyproject.toml``
  reads it, see :func:`version_statements`), the README usage block's
  ``version = "~> MAJOR.MINOR"`` pin;
- a deployment zip in ``package/`` (what the module deploys) built from
  another ``__version__``: rebuild it with ``make package`` first;
- a CHANGELOG.md without the section ``## [X.Y.Z] - YYYY-MM-DD``, or dated
  after today.

Then it creates the annotated tag ``vX.Y.Z`` on HEAD and prints the push
command; it never pushes. Standard library only, so it runs without the venv.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

INIT_PY = Path("lambda/dynamodb_outbox/__init__.py")
PYPROJECT = Path("lambda/pyproject.toml")
README = Path("README.md")
CHANGELOG = Path("CHANGELOG.md")
# The zips the module deploys, and where each holds the package's __init__.py.
PACKAGE_ZIPS = {
    Path("package/dynamodb_outbox.zip"): "dynamodb_outbox/__init__.py",
    Path("package/dynamodb_outbox_layer.zip"): "python/dynamodb_outbox/__init__.py",
}

# What pyproject.toml must say so that the package's version is __version__.
PYPROJECT_VERSION_ATTR = "dynamodb_outbox.__version__"

SEMVER = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")
# The registry usage block: `version = "~> 0.2"` (a pessimistic pin on the minor).
README_PIN = re.compile(r'^\s*version\s*=\s*"~>\s*([0-9]+\.[0-9]+)"', re.MULTILINE)


class ReleaseError(Exception):
    """A reason not to tag, in words for the person releasing."""


def package_version(root: Path) -> str:
    """``__version__`` of the package: the one source of the version."""
    return _literal_version((root / INIT_PY).read_text(encoding="utf-8"), str(INIT_PY))


def _literal_version(source: str, where: str) -> str:
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named = any(isinstance(t, ast.Name) and t.id == "__version__" for t in targets)
            if named and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return node.value.value
    raise ReleaseError(f'{where} has no literal __version__ = "x.y.z"')


def zip_versions(root: Path) -> dict[str, str]:
    """``__version__`` as built into each deployment zip that exists."""
    versions = {}
    for archive, member in PACKAGE_ZIPS.items():
        if (root / archive).exists():
            with zipfile.ZipFile(root / archive) as opened:
                source = opened.read(member).decode("utf-8")
            versions[str(archive)] = _literal_version(source, f"{archive}:{member}")
    return versions


def pyproject_version_source(root: Path) -> str:
    """Where lambda/pyproject.toml takes the version from (an attr path or a literal)."""
    project = tomllib.loads((root / PYPROJECT).read_text(encoding="utf-8"))
    if "version" in project["project"]:
        return str(project["project"]["version"])
    dynamic = project.get("tool", {}).get("setuptools", {}).get("dynamic", {})
    return str(dynamic.get("version", {}).get("attr", ""))


def readme_pin(root: Path) -> str | None:
    """The ``MAJOR.MINOR`` of ``version = "~> ..."`` in the README's "## Usage" block."""
    readme = (root / README).read_text(encoding="utf-8")
    usage = readme.split("## Usage", 1)[1].split("```", 2)[1] if "## Usage" in readme else ""
    match = README_PIN.search(usage)
    return match.group(1) if match else None


def changelog_section_date(root: Path, version: str) -> str | None:
    """The date of CHANGELOG.md's ``## [version] - YYYY-MM-DD``, None without one."""
    heading = re.compile(
        rf"^## \[{re.escape(version)}\] - ([0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}})\s*$", re.MULTILINE
    )
    match = heading.search((root / CHANGELOG).read_text(encoding="utf-8"))
    if match is None:
        return None
    datetime.date.fromisoformat(match.group(1))  # a real date, or ValueError
    return match.group(1)


def disagreements(root: Path, version: str) -> list[str]:
    """Every version statement that does not say ``version``, one line each."""
    problems = []
    source = package_version(root)
    if source != version:
        problems.append(f"{INIT_PY}: __version__ is {source!r}, not {version!r}")
    pyproject = pyproject_version_source(root)
    if pyproject != PYPROJECT_VERSION_ATTR:
        problems.append(
            f"{PYPROJECT}: the version must be dynamic, read from {PYPROJECT_VERSION_ATTR} "
            f"([tool.setuptools.dynamic] version = {{attr = ...}}), not {pyproject!r}"
        )
    for archive, built in zip_versions(root).items():
        if built != version:
            problems.append(
                f"{archive} was built from __version__ {built!r}: rebuild it (make package)"
            )
    major_minor = ".".join(version.split(".")[:2])
    pin = readme_pin(root)
    if pin != major_minor:
        problems.append(
            f'{README}: the usage block pins version = "~> {pin}", not "~> {major_minor}"'
            if pin
            else f'{README}: no usage block pin version = "~> {major_minor}"'
        )
    try:
        dated = changelog_section_date(root, version)
        if dated is None:
            problems.append(f"{CHANGELOG}: no section ## [{version}] - YYYY-MM-DD")
        elif datetime.date.fromisoformat(dated) > datetime.date.today():
            problems.append(f"{CHANGELOG}: the [{version}] section is dated {dated}, after today")
    except ValueError as error:
        problems.append(f"{CHANGELOG}: the [{version}] section's date is not a date ({error})")
    return problems


def git(root: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ReleaseError(f"git {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def release(root: Path, version: str) -> str:
    """Check everything, then create the tag; returns the tag's name."""
    if not SEMVER.fullmatch(version):
        raise ReleaseError(f"VERSION must be MAJOR.MINOR.PATCH (e.g. 0.2.0), got {version!r}")
    tag = f"v{version}"
    dirty = git(root, "status", "--porcelain", "--untracked-files=normal")
    if dirty.strip():
        raise ReleaseError(
            "the working tree has changes; commit or stash them first:\n" + dirty.rstrip()
        )
    if git(root, "tag", "--list", tag).strip():
        raise ReleaseError(f"the tag {tag} exists: a tag is never moved, release a new version")
    problems = disagreements(root, version)
    if problems:
        raise ReleaseError(f"{version} disagrees with:\n- " + "\n- ".join(problems))
    git(root, "tag", "-a", tag, "-m", version)
    return tag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", help="MAJOR.MINOR.PATCH, without the v")
    parser.add_argument("--repo", type=Path, default=REPO_ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        tag = release(args.repo, args.version)
    except ReleaseError as error:
        print(f"make release: refused: {error}", file=sys.stderr)
        return 1
    print(f"Tagged {tag}. Publish it with: git push origin {tag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
