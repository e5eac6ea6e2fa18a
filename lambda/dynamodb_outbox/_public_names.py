"""Public names say where to import them from, as httpx's do.

A class or function documented in ``dynamodb_outbox.writer`` but defined in
``dynamodb_outbox.writer._errors`` gets ``__module__ = "dynamodb_outbox.writer"``:
tracebacks, reprs, pickles and the consumer's logged ``exception_type`` name
the documented module, never the private one (docs/decisions.md says what that
costs: ``inspect.getsource`` no longer finds such a class).

``typing.get_type_hints()`` reads a class's string annotations (``from
__future__ import annotations``) in the namespace of its ``__module__``, where
the defining module's names are missing. So before a class is renamed, its own
annotations are resolved, once, in the module that defined them.

Standard library only.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["present_as"]


def present_as(module_name: str, *values: Any) -> None:
    """Give each class or function ``__module__ = module_name``, annotations kept resolvable.

    Other values (constants, type aliases) are left alone: they have no module of their own.
    """
    for value in values:
        if not isinstance(value, type) and not hasattr(value, "__code__"):
            continue
        if isinstance(value, type):
            _resolve_own_annotations(value)
        value.__module__ = module_name


def _resolve_own_annotations(cls: type) -> None:
    own = vars(cls).get("__annotations__")
    if not own or not any(isinstance(hint, str) for hint in own.values()):
        return  # none, or already objects (TypedDict keeps its defining module in each ForwardRef)
    namespace = vars(sys.modules[cls.__module__])
    local = dict(vars(cls))
    cls.__annotations__ = {
        name: eval(hint, namespace, local) if isinstance(hint, str) else hint
        for name, hint in own.items()
    }
