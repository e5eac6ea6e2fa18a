"""Structure figures of the Python package, as the README's Layout section states them.

    python scripts/structure_figures.py [PACKAGE_DIR]   # default: lambda/dynamodb_outbox

Prints one JSON object:

- ``modules``: ``.py`` files in the package;
- ``public_names``: names a reader may take for public API, summed over the public
  modules (no path part starts with ``_``, except ``__init__``): a module's
  ``__all__`` when it has one, else every top-level name it defines (assigns,
  ``def``, ``class``) without a leading ``_``; imported names are not counted;
- ``longest_module``: lines of the longest file, and which;
- ``import_arrows``: distinct "unit A imports unit B" pairs, where a unit is a
  top-level module or a subpackage as a whole (``writer/`` is one unit), counting
  every import of the package's own code (lazy and ``TYPE_CHECKING`` ones too);
- ``cycles``: groups of units that import each other, directly or not.

Standard library only, and static (``ast``): nothing is imported or run.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PACKAGE = REPO / "lambda" / "dynamodb_outbox"


def module_name(package: Path, path: Path) -> str:
    parts = [package.name, *path.relative_to(package).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_public_module(package: Path, path: Path) -> bool:
    parts = path.relative_to(package).with_suffix("").parts
    return not any(part.startswith("_") and part != "__init__" for part in parts)


def public_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id == "__all__":
                    value = node.value
                    if isinstance(value, ast.List | ast.Tuple):
                        return {ast.literal_eval(element) for element in value.elts}
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
    return {name for name in names if not name.startswith("_")}


def imported_modules(tree: ast.Module, current: str, is_package: bool) -> set[str]:
    """Absolute names of every module ``tree`` imports (relative ones resolved)."""
    found: set[str] = set()
    base = current.split(".") if is_package else current.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = base[: len(base) - node.level + 1]
                stem = ".".join([*parent, *([node.module] if node.module else [])])
            else:
                stem = node.module or ""
            found.add(stem)
            found.update(f"{stem}.{alias.name}" for alias in node.names)
    return found


def unit_of(name: str, package: str, units: set[str]) -> str | None:
    parts = name.split(".")
    if parts[0] != package or len(parts) < 2:
        return None
    unit = f"{package}.{parts[1]}"
    return unit if unit in units else None


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm; returns the components with more than one unit."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def figures(package: Path = DEFAULT_PACKAGE) -> dict[str, Any]:
    files = sorted(package.rglob("*.py"))
    units = {
        f"{package.name}.{path.relative_to(package).parts[0].removesuffix('.py')}"
        for path in files
        if path.relative_to(package).parts[0] != "__init__.py"
    }
    names = 0
    longest = (0, "")
    graph: dict[str, set[str]] = {unit: set() for unit in units}
    for path in files:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
        lines = len(text.splitlines())
        relative = str(path.relative_to(package.parent))
        longest = max(longest, (lines, relative))
        if is_public_module(package, path):
            names += len(public_names(tree))
        current = module_name(package, path)
        source_unit = unit_of(current, package.name, units)
        if source_unit is None:
            continue
        for imported in imported_modules(tree, current, path.name == "__init__.py"):
            target = unit_of(imported, package.name, units)
            if target is not None and target != source_unit:
                graph[source_unit].add(target)
    return {
        "modules": len(files),
        "public_names": names,
        "longest_module": {"lines": longest[0], "path": longest[1]},
        "import_arrows": sum(len(targets) for targets in graph.values()),
        "cycles": strongly_connected(graph),
    }


def main(argv: list[str]) -> int:
    package = Path(argv[1]) if len(argv) > 1 else DEFAULT_PACKAGE
    print(json.dumps(figures(package), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
