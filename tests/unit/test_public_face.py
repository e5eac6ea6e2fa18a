"""The package's public face is what docs/python.md lists and the README promises.

docs/python.md, "The public API", lists each documented module's names; the
README's Versioning section names the same modules. Each module's ``__all__`` is
exactly its list, and every name the docs and examples import comes from a
listed module or one of the wings (``local``, ``testing``). Everything else is
internal: a new public name needs a line in the docs, and with it a promise.
"""

from __future__ import annotations

import ast
import importlib
import pickle
import re
import sys
import typing
from pathlib import Path

import pytest

import dynamodb_outbox

ROOT = Path(__file__).resolve().parents[2]
PYTHON_DOC = ROOT / "docs" / "python.md"
README = ROOT / "README.md"
PACKAGE = Path(dynamodb_outbox.__file__).parent
WINGS = ("dynamodb_outbox.local", "dynamodb_outbox.testing")


def documented_faces() -> dict[str, set[str]]:
    """``module: names`` from the "The public API" section of docs/python.md."""
    text = PYTHON_DOC.read_text(encoding="utf-8")
    section = text.split("\n## The public API\n", 1)[1].split("\n## ", 1)[0]
    faces: dict[str, set[str]] = {}
    for module, names in re.findall(r"^- `(dynamodb_outbox[\w.]*)`: (.+)$", section, re.M):
        faces[module] = set(re.findall(r"`([\w]+)`", names))
    return faces


def test_the_doc_lists_the_package_and_the_modules_the_readme_versions() -> None:
    versioning = README.read_text(encoding="utf-8").split("\n## Versioning\n", 1)[1]
    bullet = versioning.split("- the public Python API", 1)[1]
    promise = re.split(r"\n(?:- |\n)", bullet, maxsplit=1)[0]
    in_readme = {"dynamodb_outbox"} | {
        f"dynamodb_outbox.{name.removeprefix('dynamodb_outbox.')}"
        for name in re.findall(r"`([\w.]+)`", promise)
        if name not in ("__all__", "dynamodb_outbox", "outbox-ops")
    }
    assert set(documented_faces()) == in_readme


@pytest.mark.parametrize("module_name", sorted(documented_faces()))
def test_each_documented_module_exports_exactly_its_documented_names(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert set(module.__all__) == documented_faces()[module_name]
    assert len(module.__all__) == len(set(module.__all__))


def test_the_package_re_exports_the_very_objects_of_the_modules() -> None:
    faces = documented_faces()
    for module_name, names in faces.items():
        if module_name == "dynamodb_outbox":
            continue
        module = importlib.import_module(module_name)
        for name in names & faces["dynamodb_outbox"]:
            assert getattr(dynamodb_outbox, name) is getattr(module, name), name


def documented_home(name: str) -> str:
    """The module a public name is documented in: its own module, else the package."""
    homes = [module for module, names in documented_faces().items() if name in names]
    return next((module for module in homes if module != "dynamodb_outbox"), "dynamodb_outbox")


def _public_classes_and_functions() -> list[tuple[str, typing.Any]]:
    found = []
    for module_name, names in documented_faces().items():
        module = importlib.import_module(module_name)
        for name in sorted(names):
            value = getattr(module, name)
            if isinstance(value, type) or hasattr(value, "__code__"):
                found.append((name, value))
    return found


def test_public_classes_and_functions_name_the_module_to_import_them_from() -> None:
    # Tracebacks, reprs, pickles and logged exception types say
    # dynamodb_outbox.writer.InvalidWrite, not the module the class is defined in
    # (as httpx does), whether or not the class carries annotations.
    elsewhere = {
        f"{name}: {value.__module__}"
        for name, value in _public_classes_and_functions()
        if value.__module__ != documented_home(name)
    }
    assert sorted(elsewhere) == []


def test_the_annotations_of_every_public_class_resolve() -> None:
    # typing.get_type_hints() reads a class's annotations in its __module__'s
    # namespace: the renaming above must not break it.
    classes = [value for _, value in _public_classes_and_functions() if isinstance(value, type)]
    assert len(classes) > 30
    for value in classes:
        typing.get_type_hints(value)  # raises NameError when they do not


def _public_instances() -> list[object]:
    """One instance of each public exception and dataclass."""
    from dynamodb_outbox import ConfigurationError, PayloadNotEncodable, UnroutedEvent
    from dynamodb_outbox.consumer import ExpectedSender, MalformedBatch
    from dynamodb_outbox.envelope import InvalidEnvelope
    from dynamodb_outbox.table_keys import InvalidTableKeys
    from dynamodb_outbox.writer import (
        CancellationReason,
        Condition,
        TransactionCancelled,
        WriteResult,
    )

    instances: list[object] = [
        ConfigurationError("OUTBOX_TABLE must be set"),
        PayloadNotEncodable("no"),
        UnroutedEvent("no"),
        MalformedBatch("no"),
        InvalidEnvelope("no"),
        InvalidTableKeys("no"),
        ExpectedSender.eventbridge("arn:aws:events:eu-west-1:123456789012:event-bus/orders"),
        Condition.item_absent(),
        WriteResult(
            "order#1", ("01J0000000000000000000000A",), ("OUTBOX#01J0000000000000000000000A",), 2
        ),
        TransactionCancelled(
            "cancelled",
            [
                CancellationReason(
                    0, "entity", "entity", "ConditionalCheckFailed", "no", {"pk": "order#1"}
                )
            ],
        ),
    ]
    import dynamodb_outbox.writer as writer

    special: dict[type, object] = {
        TransactionCancelled: None,
        writer.DuplicateItemInTransaction: writer.DuplicateItemInTransaction("same item", 0, 2),
        writer.UnpublishableEvent: writer.UnpublishableEvent("refused", index=1),
    }
    for name in writer.__all__:
        value = getattr(writer, name)
        if isinstance(value, type) and issubclass(value, Exception):
            if value in special:
                instances.append(special[value])
            elif issubclass(value, writer.LimitExceeded):
                instances.append(value("too many", limit=100, actual=101, index=3))
            else:
                instances.append(value("no"))
    instances = [instance for instance in instances if instance is not None]
    return instances


@pytest.mark.parametrize("instance", _public_instances(), ids=lambda value: type(value).__name__)
def test_public_exceptions_and_dataclasses_pickle_through_their_public_path(
    instance: object,
) -> None:
    data = pickle.dumps(instance)
    home = documented_home(type(instance).__name__)
    assert type(instance).__module__ == home
    assert home.encode() in data
    assert not re.search(rb"dynamodb_outbox(\.\w+)*\._", data), data  # no private module
    copy = pickle.loads(data)
    assert type(copy) is type(instance)
    assert repr(copy) == repr(instance)
    assert vars(copy) == vars(instance)  # the figures an exception carries beyond its message


def _user_facing_markdown() -> list[Path]:
    """Every Markdown page a user reads: README, docs, examples, the local runtime's."""
    return sorted(
        path
        for path in ROOT.rglob("*.md")
        if not any(
            part.startswith(".") or part == "node_modules" for part in path.relative_to(ROOT).parts
        )
        and path.name != "CHANGELOG.md"  # history: it names the old homes on purpose
    )


def _imports_in_docs_and_examples() -> list[tuple[str, str, str]]:
    """``(where, module, name)`` for every use of the package in docs and examples.

    ``from dynamodb_outbox.x import y`` gives ``(x, y)``; ``import
    dynamodb_outbox.x`` gives ``(x, "")``; ``dynamodb_outbox.x.y`` in code gives
    the module part and the name after it.
    """
    found: list[tuple[str, str, str]] = []
    for path in _user_facing_markdown():
        for block in re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
            found += _imports(str(path.relative_to(ROOT)), block)
    for path in sorted((ROOT / "examples").rglob("*.py")):
        found += _imports(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"))
    return found


def _known_modules() -> set[str]:
    return set(documented_faces()) | set(WINGS)


def _imports(where: str, code: str) -> list[tuple[str, str, str]]:
    found = []
    tree = ast.parse(code)
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dynamodb_outbox"):
            found += [(where, node.module or "", alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [
                (where, alias.name, "")
                for alias in node.names
                if alias.name.startswith("dynamodb_outbox")
            ]
        elif isinstance(node, ast.Attribute) and id(node) not in inner:
            dotted = ast.unparse(node)
            if not re.fullmatch(r"dynamodb_outbox(\.\w+)+", dotted):
                continue
            # The longest documented module (or wing) the chain starts with, and
            # the name used from it: the chain's outermost node covers the rest.
            parts = dotted.split(".")
            module = next(
                (
                    ".".join(parts[:n])
                    for n in range(len(parts) - 1, 0, -1)
                    if ".".join(parts[:n]) in _known_modules()
                ),
                ".".join(parts[:-1]),
            )
            found.append((where, module, parts[len(module.split("."))]))
    return found


def test_docs_and_examples_import_only_promised_names_or_the_wings() -> None:
    faces = documented_faces()
    uses = _imports_in_docs_and_examples()
    assert len(uses) > 20, "few imports found: the scan is broken"
    outside = [
        f"{where}: {module} {name}".strip()
        for where, module, name in uses
        if not module.startswith(WINGS)
        and not (module in faces and (not name or name in faces[module]))
    ]
    assert outside == []


def test_the_docs_scan_sees_each_way_code_reaches_a_module() -> None:
    code = (
        "import dynamodb_outbox.publisher\n"
        "from dynamodb_outbox.writer import OutboxWriter\n"
        "dynamodb_outbox.publisher.default_runtime.cache_clear()\n"
        "dynamodb_outbox.testing.reset_caches()\n"
        "x = dynamodb_outbox.Envelope\n"
    )
    assert sorted(_imports("here", code)) == [
        ("here", "dynamodb_outbox", "Envelope"),
        ("here", "dynamodb_outbox", "publisher"),  # not a documented module: a name of the package
        ("here", "dynamodb_outbox.publisher", ""),
        ("here", "dynamodb_outbox.testing", "reset_caches"),
        ("here", "dynamodb_outbox.writer", "OutboxWriter"),
    ]


def _imported_modules(path: Path) -> list[str]:
    return _imported_modules_of(path, path.read_text(encoding="utf-8"))


def _imported_modules_of(path: Path, code: str) -> list[str]:
    """Every module a file imports: absolute, relative, or by name through importlib."""
    package = ".".join(("dynamodb_outbox", *path.relative_to(PACKAGE).parent.parts))
    names = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            names += [
                f"{base}.{node.module}" if node.module else f"{base}.{alias.name}"
                for alias in node.names
            ]
        elif isinstance(node, ast.ImportFrom):
            names.append(node.module or "")
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in (
            "import_module",
            "__import__",
        ):
            names += [
                arg.value
                for arg in node.args
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            ]
    return names


def test_the_wing_scan_sees_relative_and_importlib_imports() -> None:
    piece = PACKAGE / "writer" / "_piece_for_the_scan.py"
    code = (
        "import importlib\nfrom ..local import runtime\nfrom . import _errors\n"
        "importlib.import_module('dynamodb_outbox.testing')\n"
    )
    seen = _imported_modules_of(piece, code)
    assert "dynamodb_outbox.local.runtime" in seen or "dynamodb_outbox.local" in seen
    assert "dynamodb_outbox.writer._errors" in seen
    assert "dynamodb_outbox.testing" in seen


def test_the_core_never_imports_a_wing() -> None:
    # The local runtime and the test kit import moto and pytest; the functions'
    # code must run without them (scripts/build_package.py leaves them out).
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in ("local", "testing"):
            continue
        offenders += [
            f"{relative}: {name}" for name in _imported_modules(path) if name.startswith(WINGS)
        ]
    assert offenders == []


def test_the_documented_packages_keep_their_pieces_in_private_modules() -> None:
    # writer/ and consumer/: one face (__init__), every piece behind a leading "_".
    public_pieces = []
    for module_name in documented_faces():
        module = importlib.import_module(module_name)
        if module_name == "dynamodb_outbox" or not hasattr(module, "__path__"):
            continue
        for path in sorted(Path(module.__path__[0]).glob("*.py")):
            if path.name != "__init__.py" and not path.name.startswith("_"):
                public_pieces.append(f"{module_name}.{path.stem}")
    assert public_pieces == []


# Where a type may come from when a public signature names it: the documented
# faces, the standard library, and the packages whose types users already hold.
_FOREIGN_PACKAGES = ("boto3", "botocore", "mypy_boto3_", "aws_lambda_powertools", "ulid")


def _public_objects() -> dict[int, str]:
    """``id(object): where it is documented`` for every documented name."""
    found: dict[int, str] = {}
    for module_name, names in documented_faces().items():
        module = importlib.import_module(module_name)
        for name in names:
            found.setdefault(id(getattr(module, name)), f"{module_name}.{name}")
    return found


def _types_named_by(hint: object) -> typing.Iterator[object]:
    """Every class a type hint names, through unions, generics and Callable."""
    if isinstance(hint, typing.TypeVar):
        for bound in (hint.__bound__, *hint.__constraints__):
            if bound is not None:
                yield from _types_named_by(bound)
        return
    if typing.get_origin(hint) is typing.Literal:
        return
    origin = typing.get_origin(hint)
    if origin is not None:
        yield from _types_named_by(origin)
        for arg in typing.get_args(hint):
            yield from _types_named_by(arg)
        return
    if isinstance(hint, list | tuple):  # Callable's parameter list
        for arg in hint:
            yield from _types_named_by(arg)
        return
    if isinstance(hint, type):
        yield hint


def _type_checking_names(function: object) -> dict[str, object]:
    """The names a module imports under ``if TYPE_CHECKING:`` (boto3-stubs, ulid)."""
    module = sys.modules[getattr(function, "__globals__", {}).get("__name__", "")]
    names: dict[str, object] = {}
    for node in ast.walk(ast.parse(Path(module.__file__ or "").read_text(encoding="utf-8"))):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    imported = importlib.import_module(statement.module)
                    for alias in statement.names:
                        names[alias.asname or alias.name] = getattr(imported, alias.name)
    return names


def _signatures_of_the_public_face() -> list[tuple[str, object]]:
    """``(where, hint)`` for every annotation of a documented function or class."""
    found: list[tuple[str, object]] = []
    for module_name, names in documented_faces().items():
        module = importlib.import_module(module_name)
        for name in sorted(names):
            value = getattr(module, name)
            where = f"{module_name}.{name}"
            callables: list[tuple[str, object]] = []
            if isinstance(value, type):
                found += [
                    (f"{where}.{field}", hint)
                    for field, hint in typing.get_type_hints(value).items()
                ]
                for attribute, member in vars(value).items():
                    if attribute.startswith("_") and attribute not in ("__init__", "__call__"):
                        continue
                    function = getattr(member, "__func__", member)
                    if isinstance(member, property):
                        function = member.fget
                    if callable(function) and hasattr(function, "__code__"):
                        callables.append((f"{where}.{attribute}", function))
            elif callable(value) and hasattr(value, "__code__"):
                callables.append((where, value))
            for place, function in callables:
                hints = typing.get_type_hints(function, localns=_type_checking_names(function))
                found += [(f"{place}({parameter})", hint) for parameter, hint in hints.items()]
    return found


def test_public_signatures_name_only_public_types() -> None:
    # A user who reads `def read_ledger(client: X, ...)` must be able to import X
    # from a promised module (or it is the standard library's, boto's or
    # Powertools'): a type they cannot name is a type they cannot annotate with.
    public = _public_objects()
    signatures = _signatures_of_the_public_face()
    assert len(signatures) > 50, "too few annotations found: the scan is broken"
    unnamed = set()
    for where, hint in signatures:
        for named in _types_named_by(hint):
            module = getattr(named, "__module__", "")
            top = module.split(".")[0]
            if id(named) in public or top in sys.stdlib_module_names or top == "builtins":
                continue
            if module.startswith(_FOREIGN_PACKAGES):
                continue
            unnamed.add(f"{where}: {module}.{getattr(named, '__qualname__', named)}")
    assert sorted(unnamed) == []
