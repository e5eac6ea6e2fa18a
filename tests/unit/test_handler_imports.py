"""A handler's cold start imports only what every invocation needs.

The ordered path (SNS FIFO) reads the table before sending and needs the
pending index and the subject sequences; an event with a trace needs the trace
context; ``LambdaContext`` is a type; SNS's rules and sink (``sinks._sns``) only
a stack that publishes to SNS. Each is loaded the first time it is
needed, so a cold start that never needs it does not pay for it
(docs/decisions.md, "Bytecode in the zip"). Each handler is imported in a fresh
interpreter, as Lambda does. (The ordered path's tests, tests/functional/
test_publisher_ordered.py and test_sweeper_ordered.py, run the deferred imports.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

LAMBDA_DIR = Path(__file__).resolve().parents[2] / "lambda"

_PROBE = (
    "import importlib, json, sys\n"
    "importlib.import_module(sys.argv[1])\n"
    "print(json.dumps(sorted(sys.modules)))\n"
)

#: Loaded at first use, never by importing the handler.
NOT_AT_IMPORT = {
    "dynamodb_outbox.publisher": {
        "dynamodb_outbox.pending_index",
        "dynamodb_outbox.subject_sequences",
        "dynamodb_outbox.trace_context",
        "dynamodb_outbox.sinks._sns",
        "aws_lambda_powertools.utilities.typing",
    },
    "dynamodb_outbox.sweeper": {
        "dynamodb_outbox.trace_context",
        "dynamodb_outbox.sinks._sns",
        "aws_lambda_powertools.utilities.typing",
    },
    # The writer checks events against its sink's rules: EventBridge's by default.
    "dynamodb_outbox.writer": {"dynamodb_outbox.sinks._sns"},
}


def _modules_after_import(module: str) -> set[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(LAMBDA_DIR), os.environ.get("PYTHONPATH", "")]),
        "AWS_DEFAULT_REGION": "eu-west-1",
    }
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, module],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return set(json.loads(done.stdout))


@pytest.mark.parametrize("handler", sorted(NOT_AT_IMPORT))
def test_a_handler_import_leaves_out_what_only_some_invocations_need(handler: str) -> None:
    # WHEN the handler's module is imported in a fresh interpreter
    loaded = _modules_after_import(handler)

    # THEN it is loaded, and none of what only some invocations need is
    assert handler in loaded
    assert "dynamodb_outbox.sinks" in loaded  # the probe sees the package's modules
    assert NOT_AT_IMPORT[handler] & loaded == set()


def test_the_sns_names_of_the_sinks_package_are_the_sns_modules_own() -> None:
    # dynamodb_outbox.sinks loads them at first use: the list it loads them by
    # is the module's __all__, and each name is the very object.
    import dynamodb_outbox.sinks as sinks
    from dynamodb_outbox.sinks import _sns

    assert set(_sns.__all__) == sinks._SNS_NAMES
    assert set(_sns.__all__) <= set(sinks.__all__)
    for name in _sns.__all__:
        assert getattr(sinks, name) is getattr(_sns, name)
    with pytest.raises(AttributeError, match="no attribute 'SnsSinkk'"):
        sinks.SnsSinkk  # type: ignore[attr-defined]  # noqa: B018


def test_dir_of_the_sinks_package_lists_the_sns_names_before_their_first_use() -> None:
    # A fresh interpreter: in this one another test may have loaded them already.
    probe = (
        "import json, sys\n"
        "import dynamodb_outbox.sinks as sinks\n"
        "print(json.dumps([sorted(dir(sinks)), 'dynamodb_outbox.sinks._sns' in sys.modules]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(LAMBDA_DIR)}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    listed, sns_loaded = json.loads(out.stdout)

    assert not sns_loaded  # dir() lists them without loading them
    from dynamodb_outbox.sinks import _sns

    assert set(_sns.__all__) <= set(listed)
