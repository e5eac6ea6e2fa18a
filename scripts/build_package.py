#!/usr/bin/env python3
"""Build the Lambda deployment package and layer as reproducible zips.

The same sources always give the same bytes: entries are sorted, every
timestamp is fixed, permissions are normalised and nothing from the build
machine (paths, mtimes, bytecode) leaks in. That is what lets the zip be
committed, lets Terraform's ``filebase64sha256`` stay stable across machines,
and lets ``--check`` prove the committed zip matches ``lambda/``.

What goes in: the ``dynamodb_outbox`` package without its ``local`` runtime
and ``testing`` kit (test tooling, not shipped) and its ``ops`` CLI (``outbox-ops`` runs on an
operator's machine from a pip install; no handler imports it), and
python-ulid, which makes the event ids (the package's one third-party
dependency Lambda does not provide): its ``ulid``
package and the ``METADATA`` and license of its dist-info (python-ulid reads its
own version from it at import). The python-ulid shipped is the one installed,
which must be the version requirements-dev.txt pins. boto3 comes from the
Lambda runtime and Powertools (with typing-extensions, which python-ulid needs
before Python 3.12) from its public layer.

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
import importlib.metadata
import io
import re
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = ROOT / "lambda" / "dynamodb_outbox"
DEFAULT_OUTPUT = ROOT / "package" / "dynamodb_outbox.zip"
DEFAULT_LAYER_OUTPUT = ROOT / "package" / "dynamodb_outbox_layer.zip"
LAYER_PREFIX = "python/"
EXCLUDED_SUBPACKAGES = {"local", "ops", "testing"}
FIXED_DATE_TIME = (1980, 1, 1, 0, 0, 0)
REQUIREMENTS = ROOT / "requirements-dev.txt"
VENDORED_DISTRIBUTION = "python-ulid"
VENDORED_PACKAGE = "ulid"
# Of the dist-info, what importlib.metadata needs and what the license asks for;
# not RECORD, INSTALLER or REQUESTED, which depend on how it was installed.
VENDORED_METADATA = ("METADATA", "licenses/LICENSE")


class BuildError(Exception):
    """The package cannot be built as pinned; the message says what to do."""


def _python_files(root: Path, arc_root: str, excluded: set[str]) -> Iterator[tuple[str, Path]]:
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if rel.parts and rel.parts[0] in excluded:
            continue
        if "__pycache__" in rel.parts or not path.is_file():
            continue
        # shared_with_terraform.json: names the module reads too (regions.py).
        if path.suffix in {".py", ".typed", ".json"} or path.name == "py.typed":
            yield f"{arc_root}/{rel.as_posix()}", path


def pinned_version(distribution: str, requirements: Path | None = None) -> str:
    """The ``==`` version of ``distribution`` in the requirements file."""
    requirements = requirements or REQUIREMENTS
    pattern = re.compile(rf"^{re.escape(distribution)}==([^\s#;]+)", re.IGNORECASE | re.MULTILINE)
    match = pattern.search(requirements.read_text())
    if match is None:
        raise BuildError(f"{requirements.name} does not pin {distribution}==<version>")
    return match.group(1)


def _vendored_files() -> Iterator[tuple[str, Path]]:
    pinned = pinned_version(VENDORED_DISTRIBUTION)
    try:
        distribution = importlib.metadata.distribution(VENDORED_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise BuildError(
            f"{VENDORED_DISTRIBUTION} is not installed; run `make venv` (it ships in the zip)"
        ) from None
    if distribution.version != pinned:
        raise BuildError(
            f"{VENDORED_DISTRIBUTION} {distribution.version} is installed but "
            f"{REQUIREMENTS.name} pins {pinned}; run `make venv`"
        )
    root = Path(str(distribution.locate_file(VENDORED_PACKAGE)))
    yield from _python_files(root, VENDORED_PACKAGE, set())
    info = f"{VENDORED_DISTRIBUTION.replace('-', '_')}-{distribution.version}.dist-info"
    for name in VENDORED_METADATA:
        path = Path(str(distribution.locate_file(f"{info}/{name}")))
        if not path.is_file():
            raise BuildError(f"{path} is missing from the installed {VENDORED_DISTRIBUTION}")
        yield f"{info}/{name}", path


def entries() -> list[tuple[str, Path]]:
    package = _python_files(PACKAGE_DIR, "dynamodb_outbox", EXCLUDED_SUBPACKAGES)
    return sorted([*package, *_vendored_files()])


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
    try:
        return _run(args)
    except BuildError as exc:
        print(f"package: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
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
