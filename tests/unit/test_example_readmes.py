"""Each example's README shows its Python files in full, as they are."""

from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
PYTHON_FILES = sorted(EXAMPLES_DIR.glob("*/*.py"))


@pytest.mark.parametrize("path", PYTHON_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_example_readme_shows_the_file(path: Path) -> None:
    readme = (path.parent / "README.md").read_text(encoding="utf-8")
    block = f"```python\n{path.read_text(encoding='utf-8')}```"

    assert block in readme, (
        f"examples/{path.parent.name}/README.md does not show {path.name} as it is: "
        "paste the file's current text into its ```python block"
    )
