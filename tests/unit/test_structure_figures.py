"""scripts/structure_figures.py counts what the README's Layout section says it counts."""

from __future__ import annotations

import io
import re
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from scripts.structure_figures import figures


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_a_small_package_gives_the_figures_counted_by_hand(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    write(package, "__init__.py", "from pkg.alpha import A\n__all__ = ['A']\n")
    # No __all__: defined public names count (A, B, f), imports and _private do not.
    write(
        package,
        "alpha.py",
        "import json\nfrom pkg import beta\nA = 1\nB = 2\n_c = 3\ndef f(): ...\n",
    )
    write(package, "beta.py", "__all__ = ['X']\nX = 1\nY = 2\n")
    # A private module's names are not public, however they are spelt.
    write(package, "_gamma.py", "from pkg.beta import X\nPUBLIC_LOOKING = 1\n\n\n\n")
    # A subpackage is one unit: its inner arrow (sub.one -> sub._two) is not counted.
    write(package, "sub/__init__.py", "from ._two import T\n__all__ = ['T']\n")
    write(package, "sub/_two.py", "T = 1\n")
    write(package, "sub/one.py", "from pkg.sub._two import T\nfrom pkg import alpha\n")

    found = figures(package)

    assert found["modules"] == 7
    assert found["public_names"] == 1 + 3 + 1 + 1 + 0  # __init__, alpha, beta, sub, sub.one
    assert found["longest_module"] == {"lines": 6, "path": "pkg/alpha.py"}
    # alpha->beta, _gamma->beta, sub->alpha
    assert found["import_arrows"] == 3
    assert found["cycles"] == []


def test_units_that_import_each_other_through_a_third_are_a_cycle(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    write(package, "__init__.py", "")
    write(package, "a.py", "from pkg import b\n")
    write(package, "b.py", "def f():\n    from pkg.c import g\n")  # lazy imports count
    write(package, "c.py", "from . import a\n")  # relative imports are resolved
    write(package, "d.py", "from pkg import a\n")

    found = figures(package)

    assert found["cycles"] == [["pkg.a", "pkg.b", "pkg.c"]]
    assert found["import_arrows"] == 4


def test_the_package_has_no_import_cycle_between_its_units() -> None:
    # The README's Layout section states 0: a unit importing one that imports it
    # back (lazily or not) would make the two one concern in two files.
    assert figures()["cycles"] == []


ROOT = Path(__file__).resolve().parents[2]
BEFORE_COMMIT = "610c01b"  # main before issue 28's restructure


def readme_figures() -> dict[str, tuple[str, str]]:
    """``row: (before, after)`` from the figures table of the README's Layout section."""
    layout = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## Layout\n", 1)[1]
    layout = layout.split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([a-z][^|]*?) \| ([^|]+?) \| ([^|]+?) \|$", layout, re.M)
    return {row: (before, after) for row, before, after in rows if row != "path"}


def as_readme_cells(counted: dict[str, Any]) -> dict[str, str]:
    """The figures as the README's table writes them."""
    path = counted["longest_module"]["path"].removeprefix("dynamodb_outbox/")
    return {
        "modules": f"{counted['modules']:,}",
        "public names": f"{counted['public_names']:,}",
        "longest module (lines)": f"{counted['longest_module']['lines']:,} (`{path}`)",
        "import arrows between units": f"{counted['import_arrows']:,}",
        "import cycles": f"{len(counted['cycles']):,}",
    }


def test_the_readme_gives_the_figures_of_the_current_tree() -> None:
    # A change that moves the figures fails here with the cells to paste into
    # the README's "after" column.
    in_readme = {row: after for row, (_, after) in readme_figures().items()}
    assert in_readme == as_readme_cells(figures())


def test_the_readme_gives_the_figures_measured_before_the_restructure(tmp_path: Path) -> None:
    # The "before" column is main at 610c01b, measured the same way.
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", BEFORE_COMMIT, "lambda/dynamodb_outbox"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"commit {BEFORE_COMMIT} is not in this checkout: {exc}")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tmp_path, filter="data")
    before = as_readme_cells(figures(tmp_path / "lambda" / "dynamodb_outbox"))
    assert {row: cells[0] for row, cells in readme_figures().items()} == before
