"""Parse botocore's data files and moto's JSONPath templates once per test process.

moto's ``mock_aws`` sets ``boto3.DEFAULT_SESSION`` aside on every start, so
each test, and each handler it drives, builds its clients in a new botocore
session, and every new session re-reads and re-parses the service models and
``endpoints.json`` (about 0.7 s of CPU per first client of a service). A
long-lived Lambda process parses them once; so does the suite with one loader
shared by every session of the process. Loaders cache what they load and
nothing else, so sharing one changes no behaviour.

moto's EventBridge parses its eight JSONPath input paths again for every event
it delivers to a target (about 3 ms each); the parsed expressions are not
modified by ``find``, so they are parsed once per distinct path.

moto converts the same attribute names from CamelCase with regular expressions
on every request (an SQS queue's attributes on every message sent); the
conversion is a pure function of the name, so each name is converted once.

Each is installed only on the release it was checked against
(tests/dependency_shortcuts.py).
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import botocore.loaders
import botocore.session

from tests.dependency_shortcuts import allowed


def share_botocore_loader() -> None:
    if not allowed("botocore", "shared_parsers.share_botocore_loader"):
        return
    create_loader = botocore.loaders.create_loader
    loaders: dict[Any, botocore.loaders.Loader] = {}

    def shared_loader(search_path_string: Any = None) -> botocore.loaders.Loader:
        if search_path_string not in loaders:
            loaders[search_path_string] = create_loader(search_path_string)
        return loaders[search_path_string]

    botocore.session.create_loader = shared_loader  # type: ignore[attr-defined]


def cache_jsonpath_parse() -> None:
    if not allowed("jsonpath-ng", "shared_parsers.cache_jsonpath_parse"):
        return
    import jsonpath_ng.ext

    jsonpath_ng.ext.parse = functools.lru_cache(maxsize=256)(jsonpath_ng.ext.parse)


def cache_camelcase_conversion() -> None:
    if not allowed("moto", "shared_parsers.cache_camelcase_conversion"):
        return
    import moto.core.utils

    original = moto.core.utils.camelcase_to_underscores
    cached = functools.lru_cache(maxsize=4096)(original)
    moto.core.utils.camelcase_to_underscores = cached
    # Modules that imported the function by name hold their own reference.
    for name, module in list(sys.modules.items()):
        if (
            name.startswith("moto.")
            and getattr(module, "camelcase_to_underscores", None) is original
        ):
            module.camelcase_to_underscores = cached  # type: ignore[attr-defined]
