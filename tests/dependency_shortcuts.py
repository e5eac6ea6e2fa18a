"""The exact versions the suite's shortcuts into dependencies were checked against.

``tests/faster_moto.py``, ``tests/shared_parsers.py`` and ``tests/xdist_groups.py``
replace or override private parts of moto, botocore, jsonpath-ng and
pytest-xdist to keep the suite within its time budget. Each shortcut was
checked against one release (and ``tests/unit/test_faster_moto.py``,
``test_shared_parsers.py`` and ``test_xdist_scheduling.py`` compare it with the
original there). Another release may have changed what the patched code means,
so a shortcut is installed only when the installed release is the one it was
checked against. Otherwise it stays off, the suite runs on the dependency's own
code (slower: without the scheduler, on one process), and the session says so
in its header and its summary.

To take an upgrade: bump requirements-dev.txt, run the comparison tests with
the shortcut forced on (``OUTBOX_TEST_SHORTCUTS=force``), then update
``CHECKED_AGAINST``; ``tests/unit/test_dependency_shortcuts.py`` fails while the
two files disagree.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib import metadata
from typing import Final

#: Distribution name -> the release each shortcut into it was checked against.
CHECKED_AGAINST: Final[dict[str, str]] = {
    "moto": "5.2.5",
    "botocore": "1.44.8",
    "jsonpath-ng": "1.16.0",
    "pytest-xdist": "3.8.0",
}

#: Why each shortcut is off in this process, in the order found.
OFF: list[str] = []


def installed_version(distribution: str) -> str | None:
    pretended = dict(
        pair.split("=", 1)
        for pair in os.environ.get("OUTBOX_TEST_PRETEND_VERSIONS", "").split(",")
        if pair
    )
    if distribution in pretended:  # the guard's own tests: a release that is not installed
        return pretended[distribution]
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def allowed(
    distribution: str,
    shortcut: str,
    version_of: Callable[[str], str | None] | None = None,
) -> bool:
    """Whether ``shortcut`` into ``distribution`` may be installed; if not, say why in OFF."""
    checked = CHECKED_AGAINST[distribution]
    installed = (version_of or installed_version)(distribution)
    if installed == checked or os.environ.get("OUTBOX_TEST_SHORTCUTS") == "force":
        return True
    message = (
        f"{shortcut} is OFF: it patches {distribution} internals checked against "
        f"{checked}, but {installed or 'no release'} is installed "
        "(tests/dependency_shortcuts.py says how to re-check it)"
    )
    if message not in OFF:
        OFF.append(message)
    return False
