#!/usr/bin/env python3
"""Build the Lambda deployment package and layer as reproducible zips.

The same sources always give the same bytes: entries are sorted, every
timestamp is fixed, permissions are normalised and nothing from the build
machine (paths, mtimes, cached bytecode) leaks in. That is what lets the zip be
committed, lets Terraform's ``filebase64sha256`` stay stable across machines,
and lets ``--check`` prove the committed zip matches ``lambda/``. (Bytecode is
shipped, but built here from the sources, not picked up from the machine.)

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

Bytecode: Lambda's task directory is read-only, so a function compiles every
module it imports from source at every cold start (about two thirds of what
the package adds to ``import boto3``). Each module therefore also ships
compiled, as ``__pycache__/<module>.cpython-3XY.pyc`` next to its source, for
every runtime the module accepts that Lambda has and this build can compile
(:data:`BYTECODE_VERSIONS`: python3.11, 3.12 and 3.13, the default). The files
are PEP 552 checked-hash pycs: no timestamp inside (reproducible); the import
system hashes the source (fast, no compile) and uses the pyc when it matches,
so a source edited after deployment (the console's editor, a patched layer)
is compiled and runs, never shadowed by stale bytecode. A runtime without
its tag (python3.14, with hashicorp/aws 6.20 or newer) finds no ``.pyc`` of
its own and compiles the sources as before: slower at start, never wrong. Each
version is compiled by that CPython (found on PATH as ``python3.X``, under
pyenv, or named by ``BYTECODE_PYTHON_3_X``) with ``PYTHONHASHSEED=0``; the
same patch release gives the same bytes (``--check`` names a ``.pyc`` that
differs). No ``-O``: docstrings and asserts stay, behaviour is the source's.

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
import functools
import hashlib
import importlib.metadata
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
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


#: The CPython minor versions whose bytecode ships: the Lambda runtimes the module
#: accepts (variables.tf: python3.11 on; default python3.13) that this build can
#: compile. The function's runtime loads its own; others compile the sources.
BYTECODE_VERSIONS: tuple[str, ...] = ("3.11", "3.12", "3.13")

# -s: no user site; no debug ranges: PEP 657's column tables left out (a quarter of
# the size; tracebacks then print no ^^^ carets). Not -I or -E: they would ignore
# the PYTHONHASHSEED the compile step is given.
_COMPILE_FLAGS: tuple[str, ...] = ("-s", "-X", "no_debug_ranges")
BYTECODE_CACHE = ROOT / ".cache" / "bytecode"

# Run by each interpreter: compile the sources given on stdin, answer where each
# .pyc goes (its cache tag) and its bytes, hex-encoded, as JSON on stdout.
_COMPILE = """
import importlib.util, json, py_compile, sys, tempfile, os
out = {}
with tempfile.TemporaryDirectory() as scratch:
    for arcname, source in json.load(sys.stdin):
        cfile = os.path.join(scratch, "out.pyc")
        py_compile.compile(source, cfile=cfile, dfile=arcname, doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
        with open(cfile, "rb") as handle:
            out[importlib.util.cache_from_source(arcname)] = handle.read().hex()
json.dump({"version": sys.version.split()[0], "files": out}, sys.stdout)
"""


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
    """The source files shipped (and their metadata), by name in the zip."""
    package = _python_files(PACKAGE_DIR, "dynamodb_outbox", EXCLUDED_SUBPACKAGES)
    return sorted([*package, *_vendored_files()])


def bytecode_python(version: str) -> Path:
    """The CPython ``version`` (``3.13``) that compiles that version's bytecode."""
    variable = "BYTECODE_PYTHON_" + version.replace(".", "_")
    named = os.environ.get(variable)
    if named:  # named on purpose: that one or none, never a silent stand-in
        found = _python_version(named)
        if not found.startswith(version + "."):
            what = f"CPython {found}" if found else "not a runnable Python"
            raise BuildError(f"{variable}={named} is {what}, not a CPython {version}")
        return Path(named)
    if sys.version.startswith(version + "."):
        return Path(sys.executable)  # the running interpreter: nothing to look up
    # pyenv's own interpreters before PATH, where pyenv puts slow shell shims.
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [
        *(str(p) for p in sorted(pyenv.glob(f"{version}.*/bin/python"), reverse=True)),
        shutil.which(f"python{version}"),
    ]
    for candidate in candidates:
        if candidate and _python_version(candidate).startswith(version + "."):
            return Path(candidate)
    raise BuildError(
        f"no CPython {version} found to compile the package's bytecode for python{version}: "
        f"put python{version} on PATH, install it with pyenv, or set {variable}"
    )


@functools.cache
def _python_version(python: str) -> str:
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print(sys.version.split()[0])"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return ""
    return done.stdout.strip()


def bytecode() -> list[tuple[str, bytes]]:
    """The ``.pyc`` of every shipped module for each of :data:`BYTECODE_VERSIONS`."""
    sources = tuple(
        (arcname, path.read_bytes()) for arcname, path in entries() if arcname.endswith(".py")
    )
    pythons = [str(bytecode_python(version)) for version in BYTECODE_VERSIONS]
    # One interpreter per version, run side by side (each is a subprocess).
    with ThreadPoolExecutor(max_workers=len(pythons)) as pool:
        results = list(pool.map(lambda python: _compiled(python, sources), pythons))
    return [entry for result in results for entry in result]


@functools.cache
def _compiled(python: str, sources: tuple[tuple[str, bytes], ...]) -> list[tuple[str, bytes]]:
    """The bytecode of ``sources`` by ``python``, from the cache when it has it.

    Cached per process and in ``.cache/bytecode/`` (git-ignored), keyed by the
    interpreter's path and exact version, the compile step and every source
    byte: the output is deterministic, so a hit is what a compile would give.
    The tests and ``--check`` build the zip many times from the same sources;
    delete ``.cache/bytecode`` to compile everything afresh.
    """
    key = hashlib.sha256(
        repr((python, _python_version(python), _COMPILE, _COMPILE_FLAGS, sources)).encode()
    ).hexdigest()
    cached = BYTECODE_CACHE / f"{key}.json"
    try:
        files = json.loads(cached.read_text())
    except (OSError, ValueError):
        files = _compile_with(python, sources)
        BYTECODE_CACHE.mkdir(parents=True, exist_ok=True)
        scratch = cached.with_suffix(f".{os.getpid()}.tmp")
        scratch.write_text(json.dumps(files))
        os.replace(scratch, cached)  # atomic: parallel builds never read half a file
    return [(name, bytes.fromhex(data)) for name, data in files.items()]


def _compile_with(python: str, sources: tuple[tuple[str, bytes], ...]) -> dict[str, str]:
    digest = hashlib.sha256(repr(sources).encode()).hexdigest()[:12]
    with tempfile.TemporaryDirectory(prefix=f"outbox-pyc-{digest}-") as scratch:
        listed = []
        for arcname, data in sources:
            path = Path(scratch, "src", arcname)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            listed.append((arcname, str(path)))
        done = subprocess.run(
            # A clean environment (no PYTHONPATH, no user site: -s), with a fixed
            # hash seed so that set and frozenset constants marshal in one order
            # (-I or -E would ignore PYTHONHASHSEED).
            [python, *_COMPILE_FLAGS, "-c", _COMPILE],
            input=json.dumps(listed),
            cwd=scratch,  # -c puts the working directory first on sys.path
            capture_output=True,
            text=True,
            env={
                "PYTHONHASHSEED": "0",
                "PYTHONNODEBUGRANGES": "1",
                "PATH": os.environ.get("PATH", ""),
            },
            check=False,
        )
    if done.returncode != 0:
        raise BuildError(f"{python} could not compile the package:\n{done.stderr.strip()}")
    files: dict[str, str] = json.loads(done.stdout)["files"]
    return files


def files() -> list[tuple[str, bytes]]:
    """Every file of the zip, sources and bytecode, by name in the zip, sorted."""
    sources = [(arcname, path.read_bytes()) for arcname, path in entries()]
    return sorted([*sources, *bytecode()])


def build(prefix: str = "", *, with_bytecode: bool = True) -> bytes:
    """The zip of :func:`files`, each name prefixed with ``prefix``.

    ``with_bytecode=False`` leaves the ``.pyc`` files out (the bench reports that size too).
    """
    chosen = files() if with_bytecode else [(a, p.read_bytes()) for a, p in entries()]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for arcname, data in chosen:
            info = zipfile.ZipInfo(prefix + arcname, date_time=FIXED_DATE_TIME)
            info.external_attr = 0o100644 << 16
            info.create_system = 3
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data, compresslevel=9)
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
