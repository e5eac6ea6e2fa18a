"""``make release VERSION=x.y.z`` (scripts/release.py): what it refuses, and the tag.

Each refusal is run in a temporary git repository holding the files that state
the version, one thing wrong at a time; the last tests hold this repository's
own statements together.
"""

from __future__ import annotations

import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from scripts import release
from scripts.release import ReleaseError

REPO_ROOT = Path(__file__).resolve().parents[2]

INIT = '"""The package."""\n\n__version__ = "{version}"\n'
PYPROJECT = """\
[project]
name = "dynamodb-outbox"
dynamic = ["version"]

[tool.setuptools.dynamic]
version = { attr = "dynamodb_outbox.__version__" }
"""
README = """\
# terraform-aws-dynamodb-outbox

## Usage

```hcl
module "outbox" {
  source  = "<namespace>/dynamodb-outbox/aws"
  version = "~> {pin}"

  name = "orders"
}
```
"""
CHANGELOG = "# Changelog\n\n## [Unreleased]\n\n## [{version}] - {date}\n\n### Added\n\n- x.\n"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


def make_repo(
    path: Path,
    *,
    version: str = "0.2.0",
    pin: str = "0.2",
    changelog_version: str = "0.2.0",
    date: str = "2026-12-04",
    commit: bool = True,
) -> Path:
    files = {
        "lambda/dynamodb_outbox/__init__.py": INIT.format(version=version),
        "lambda/pyproject.toml": PYPROJECT,
        "README.md": README.replace("{pin}", pin),
        "CHANGELOG.md": CHANGELOG.format(version=changelog_version, date=date),
    }
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text, encoding="utf-8")
    git(path, "init", "-q", "-b", "main")
    if commit:
        globals()["commit"](path)
    return path


def commit(path: Path) -> None:
    git(path, "-c", "user.name=t", "-c", "user.email=t@example.com", "add", ".")
    git(path, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init")


def tags(repo: Path) -> list[str]:
    return git(repo, "tag", "--list").split()


@pytest.fixture(autouse=True)
def _git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    # `git tag -a` needs a committer; the test's, not the machine's.
    for key in ("GIT_AUTHOR", "GIT_COMMITTER"):
        monkeypatch.setenv(f"{key}_NAME", "release-test")
        monkeypatch.setenv(f"{key}_EMAIL", "release-test@example.com")


def test_a_consistent_clean_repository_is_tagged(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)

    assert release.main(["0.2.0", "--repo", str(repo)]) == 0

    assert tags(repo) == ["v0.2.0"]
    assert git(repo, "cat-file", "-t", "v0.2.0").strip() == "tag"  # annotated
    assert git(repo, "rev-parse", "v0.2.0^{commit}") == git(repo, "rev-parse", "HEAD")


def test_a_dirty_tree_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo / "README.md").write_text((repo / "README.md").read_text() + "\nedit\n")

    with pytest.raises(ReleaseError, match=r"working tree has changes(.|\n)*README\.md"):
        release.release(repo, "0.2.0")
    assert tags(repo) == []


def test_an_untracked_file_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo / "notes.txt").write_text("x")

    with pytest.raises(ReleaseError, match=r"notes\.txt"):
        release.release(repo, "0.2.0")
    assert tags(repo) == []


def test_a_package_version_that_disagrees_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, version="0.1.0")

    with pytest.raises(ReleaseError, match=r"__init__.py: __version__ is '0.1.0', not '0.2.0'"):
        release.release(repo, "0.2.0")
    assert tags(repo) == []


def test_a_readme_pin_on_another_minor_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, pin="0.1")

    with pytest.raises(ReleaseError, match=r'README.md: the usage block pins version = "~> 0.1"'):
        release.release(repo, "0.2.0")
    assert tags(repo) == []


def test_a_pyproject_with_its_own_version_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    pyproject = repo / "lambda/pyproject.toml"
    pyproject.write_text('[project]\nname = "dynamodb-outbox"\nversion = "0.2.0"\n')
    git(repo, "commit", "-qam", "literal version")

    with pytest.raises(ReleaseError, match=r"pyproject\.toml: the version must be dynamic"):
        release.release(repo, "0.2.0")
    assert tags(repo) == []


def test_a_changelog_without_the_versions_section_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, changelog_version="0.1.0")

    with pytest.raises(ReleaseError, match=r"CHANGELOG.md: no section ## \[0.2.0\] - YYYY-MM-DD"):
        release.release(repo, "0.2.0")
    assert tags(repo) == []


def test_a_changelog_section_not_yet_dated_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, date="not yet tagged")

    with pytest.raises(ReleaseError, match=r"no section ## \[0.2.0\]"):
        release.release(repo, "0.2.0")


def test_a_deployment_zip_built_from_another_version_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, commit=False)
    (repo / "package").mkdir()
    for name, member, built in (
        ("dynamodb_outbox.zip", "dynamodb_outbox/__init__.py", "0.2.0"),
        ("dynamodb_outbox_layer.zip", "python/dynamodb_outbox/__init__.py", "0.1.0"),
    ):
        with zipfile.ZipFile(repo / "package" / name, "w") as archive:
            archive.writestr(member, INIT.format(version=built))
    commit(repo)

    with pytest.raises(
        ReleaseError, match=r"dynamodb_outbox_layer.zip was built from __version__ '0.1.0'"
    ):
        release.release(repo, "0.2.0")
    assert tags(repo) == []


def test_a_changelog_section_dated_in_the_future_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, date="2999-01-01")

    with pytest.raises(ReleaseError, match=r"dated 2999-01-01, after today"):
        release.release(repo, "0.2.0")
    assert tags(repo) == []


def test_an_existing_tag_is_never_moved(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    git(repo, "tag", "v0.2.0")

    with pytest.raises(ReleaseError, match=r"the tag v0\.2\.0 exists"):
        release.release(repo, "0.2.0")


@pytest.mark.parametrize("version", ["v0.2.0", "0.2", "0.2.0-rc1", "00.2.0", ""])
def test_a_version_that_is_not_major_minor_patch_is_refused(tmp_path: Path, version: str) -> None:
    with pytest.raises(ReleaseError, match=r"MAJOR\.MINOR\.PATCH"):
        release.release(tmp_path, version)


def test_main_reports_a_refusal_on_stderr_with_exit_code_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path, version="0.1.0")

    assert release.main(["0.2.0", "--repo", str(repo)]) == 1
    assert "make release: refused: 0.2.0 disagrees with:" in capsys.readouterr().err


def test_every_version_statement_of_this_repository_agrees() -> None:
    version = release.package_version(REPO_ROOT)

    assert release.disagreements(REPO_ROOT, version) == []


def test_the_newest_changelog_section_is_the_packages_version() -> None:
    changelog = (REPO_ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    newest = re.search(r"^## \[(\d+\.\d+\.\d+)\] - ", changelog, re.MULTILINE)

    assert newest is not None and newest.group(1) == release.package_version(REPO_ROOT)


def test_the_makefile_release_target_runs_the_script() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")

    assert "\nrelease: ##" in makefile
    assert 'scripts/release.py "$(VERSION)"' in makefile
