"""``dynamodb_outbox.local`` runs on moto, an optional dependency: ``dynamodb-outbox[local]``."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import dynamodb_outbox

PACKAGE_ROOT = Path(dynamodb_outbox.__file__).resolve().parents[1]

# Run in a fresh interpreter: moto is made unimportable there (a None entry in
# sys.modules makes ``import moto`` raise ImportError), as in an install without the extra.
_IMPORT_WITHOUT_MOTO = """
import sys
for name in [n for n in sys.modules if n == "moto" or n.startswith("moto.")]:
    del sys.modules[name]
sys.modules["moto"] = None
try:
    import dynamodb_outbox.local
except ImportError as exc:
    print(type(exc).__name__, exc.name, exc, sep="|")
else:
    print("imported")
"""


def test_importing_local_without_moto_says_which_extra_to_install() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_WITHOUT_MOTO],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)},
    )

    kind, name, message = done.stdout.strip().split("|", 2)
    assert kind == "ImportError" and name == "moto"
    assert "pip install dynamodb-outbox[local]" in message


def test_the_local_extra_declares_moto_with_the_services_the_runtime_drives() -> None:
    project = tomllib.loads((PACKAGE_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (requirement,) = project["project"]["optional-dependencies"]["local"]

    assert requirement.startswith("moto[")
    extras = set(requirement.split("[", 1)[1].split("]", 1)[0].split(","))
    assert {"dynamodb", "dynamodbstreams", "events", "sns", "sqs"} <= extras
    assert "moto" not in " ".join(project["project"]["dependencies"]), "never a hard dependency"
