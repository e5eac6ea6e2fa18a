#!/usr/bin/env python3
"""Build the Lambda deployment package and layer as reproducible zips.

The same sources always give the same bytes: entries are sorted, every
timestamp is fixed, permissions are normalised and nothing from the build
machine (paths, mtimes, bytecode) leaks in. That is what lets the zip be
committed, lets Terraform's ``filebase64sha256`` stay stable across machines,
and lets ``--check`` prove the committed zip matches ``lambda/``.

What goes in: the ``dynamodb_outbox`` package without its ``local`` runtime
(test tooling, not shipped). It has no third-party imports of its own: boto3
comes from the Lambda runtime and Powertools from its public layer.

Two artifacts hold the same files:

* ``package/dynamodb_outbox.zip``, the function package (entries at the root,
  where Lambda imports handlers from);
* ``package/dynamodb_outbox_layer.zip``, the Lambda layer the module publishes
  so that functions outside the module can ``import dynamodb_outbox`` (entries
  under ``python/``, the folder Lambda adds to ``sys.path`` for Python layers).

Without ``--output``/``--layer-output`` both default artifacts are written (or,
with ``--check``, checked); with either, only the artifacts named.
"""

from __future__ import annotations

import argparse
import io
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = ROOT / "lambda" / "dynamodb_outbox"
DEFAULT_OUTPUT = ROOT / "package" / "dynamodb_outbox.zip"
DEFAULT_LAYER_OUTPUT = ROOT / "package" / "dynamodb_outbox_layer.zip"
LAYER_PREFIX = "python/"
EXCLUDED_SUBPACKAGES = {"local"}
FIXED_DATE_TIME = (1980, 1, 1, 0, 0, 0)


def _python_files(root: Path, arc_root: str, excluded: set[str]) -> Iterator[tuple[str, Path]]:
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if rel.parts and rel.parts[0] in excluded:
            continue
        if "__pycache__" in rel.parts or not path.is_file():
            continue
        if path.suffix in {".py", ".typed"} or path.name == "py.typed":
            yield f"{arc_root}/{rel.as_posix()}", path


def entries() -> list[tuple[str, Path]]:
    return sorted(_python_files(PACKAGE_DIR, "dynamodb_outbox", EXCLUDED_SUBPACKAGES))


def build(prefix: str = "") -> bytes:
    """The zip of :func:`entries`, each name prefixed with ``prefix``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for arcname, path in entries():
            info = zipfile.ZipInfo(prefix + arcname, date_time=FIXED_DATE_TIME)
            info.external_attr = 0o100644 << 16
            info.create_system = 3
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes(), compresslevel=9)
    return buffer.getvalue()


def build_layer() -> bytes:
    """The layer zip: the same files as :func:`build`, under ``python/``."""
    return build(LAYER_PREFIX)


def _shown(path: Path) -> str:
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


def _check(output: Path, fresh: bytes) -> bool:
    if not output.exists():
        print(f"package-check: {output} does not exist; run `make package`", file=sys.stderr)
        return False
    if output.read_bytes() != fresh:
        with zipfile.ZipFile(output) as committed:
            old = {i.filename: i.CRC for i in committed.infolist()}
        with zipfile.ZipFile(io.BytesIO(fresh)) as rebuilt:
            new = {i.filename: i.CRC for i in rebuilt.infolist()}
        changed = sorted(n for n in old.keys() | new.keys() if old.get(n) != new.get(n))
        print(
            f"package-check: {_shown(output)} is stale; differing entries: "
            f"{', '.join(changed) or '(metadata only)'}. Run `make package` and commit it.",
            file=sys.stderr,
        )
        return False
    print(f"package-check: {_shown(output)} matches lambda/ ({len(fresh)} bytes)")
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--output", type=Path, help=f"the function zip (default {_shown(DEFAULT_OUTPUT)})"
    )
    parser.add_argument(
        "--layer-output",
        type=Path,
        help=f"the layer zip (default {_shown(DEFAULT_LAYER_OUTPUT)})",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 when a file differs from a fresh build",
    )
    args = parser.parse_args()
    targets: list[tuple[Path, Callable[[], bytes]]] = []
    if args.output is None and args.layer_output is None:
        targets = [(DEFAULT_OUTPUT, build), (DEFAULT_LAYER_OUTPUT, build_layer)]
    if args.output is not None:
        targets.append((args.output, build))
    if args.layer_output is not None:
        targets.append((args.layer_output, build_layer))
    if args.check:
        # Check every target, so one run names every stale artifact.
        results = [_check(output, builder()) for output, builder in targets]
        return 0 if all(results) else 1
    for output, builder in targets:
        fresh = builder()
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_bytes(fresh)
        print(f"package: wrote {_shown(output)} ({len(fresh)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
