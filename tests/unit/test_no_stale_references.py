"""Comments and docs name the package's pieces where they live now.

A restructure moves names (issue 28: ``envelope.DEFAULT_PENDING_SHARDS`` became
``outbox_item.DEFAULT_PENDING_SHARDS``, ``writer.item_size`` became
``writer._attribute_values.item_size``); the code follows because it must
import, the comments and docs that say ``module.name`` do not. This test finds
each ``module.name`` in the repository's text whose module is one of the
package's and lacks the name while another of the package's modules defines
it: a name that moved, and a reader sent to the wrong file.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
from pathlib import Path

import pytest

import dynamodb_outbox

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(dynamodb_outbox.__file__).parent
TEXT_SUFFIXES = (".md", ".py", ".tf", ".hcl", ".toml", ".cfg", ".txt", ".yml", ".yaml")
# History, and this test's own examples, name the old homes on purpose.
HISTORY = {"CHANGELOG.md", Path(__file__).name}
# Variables that share a module's name, not modules: ``@consumer.handler`` and
# ``consumer.logger`` on an OutboxConsumer, ``table_keys.key_of`` on a TableKeys.
NOT_MODULES = {"consumer.handler", "consumer.logger", "table_keys.key_of"}


@functools.cache
def module_names() -> dict[str, set[str]]:
    """``dotted module path below the package: the names it defines or imports``."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not parts:
            continue
        names: set[str] = set()
        body = ast.parse(path.read_text(encoding="utf-8")).body
        # What a module loads at first use (sinks' SNS names) it imports for type
        # checkers: ``if TYPE_CHECKING:`` at the top level.
        body += [
            inner
            for node in body
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
            for inner in node.body
        ]
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, ast.ImportFrom | ast.Import):
                names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        # A package's submodules are its names too.
        if path.name == "__init__.py":
            names |= {child.stem for child in path.parent.glob("*.py")} | {
                child.name for child in path.parent.iterdir() if (child / "__init__.py").exists()
            }
        found[".".join(parts)] = names
    return found


@functools.cache
def defined_somewhere() -> dict[str, list[str]]:
    """``name: the modules that define it`` for the package's module-level definitions."""
    homes: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = []
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [target.id for target in node.targets if isinstance(target, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            for name in names:
                homes.setdefault(name, []).append(module)
    return homes


def stale_references(text: str) -> list[str]:
    modules = module_names()
    homes = defined_somewhere()
    stale = []
    pattern = r"(?<![\w.])(?:dynamodb_outbox\.)?((?:[a-z_]\w*\.)*?[a-z_]\w*)\.([A-Za-z_]\w*)"
    for module, name in re.findall(pattern, text):
        if module not in modules or name in modules[module] or name not in homes:
            continue
        if f"{module}.{name}" in NOT_MODULES or module == "local":
            continue  # local.<name> is Terraform's, in .tf files and the tests that read them
        if module in homes[name]:
            continue
        stale.append(f"{module}.{name} (defined in {', '.join(sorted(set(homes[name])))})")
    return stale


def repository_text_files() -> list[Path]:
    try:
        listed = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout: {exc}")
    return [
        ROOT / name
        for name in listed
        if name.endswith(TEXT_SUFFIXES)
        and Path(name).name not in HISTORY
        and (ROOT / name).is_file()
    ]


def test_a_moved_name_is_found() -> None:
    assert stale_references("The count is the package's (envelope.DEFAULT_PENDING_SHARDS),") == [
        "envelope.DEFAULT_PENDING_SHARDS (defined in outbox_item)"
    ]
    assert stale_references("computed from the item sizes (writer.item_size)") != []
    assert (
        stale_references(
            "(outbox_item.DEFAULT_PENDING_SHARDS) and writer._attribute_values.item_size"
        )
        == []
    )


def test_comments_and_docs_name_each_piece_where_it_lives() -> None:
    files = repository_text_files()
    assert len(files) > 100
    stale = [
        f"{path.relative_to(ROOT)}: {reference}"
        for path in files
        for reference in stale_references(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert stale == []
