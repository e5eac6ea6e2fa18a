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
"""

from __future__ import annotations

import functools
from typing import Any

import botocore.loaders
import botocore.session


def share_botocore_loader() -> None:
    create_loader = botocore.loaders.create_loader
    loaders: dict[Any, botocore.loaders.Loader] = {}

    def shared_loader(search_path_string: Any = None) -> botocore.loaders.Loader:
        if search_path_string not in loaders:
            loaders[search_path_string] = create_loader(search_path_string)
        return loaders[search_path_string]

    botocore.session.create_loader = shared_loader  # type: ignore[attr-defined]


def cache_jsonpath_parse() -> None:
    import jsonpath_ng.ext

    jsonpath_ng.ext.parse = functools.lru_cache(maxsize=256)(jsonpath_ng.ext.parse)
