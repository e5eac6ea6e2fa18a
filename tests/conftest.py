"""Session-wide hooks shared by every test folder."""

from __future__ import annotations

import shutil

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Keep pytest-terraform from aborting the whole session when terraform is absent.

    The plugin raises in its own ``pytest_configure`` when no terraform binary is
    on PATH, unless replay mode is on. Turning replay on in that case lets the
    session start; the fixtures in ``tests/terraform`` then skip every Terraform
    test with a message saying so, and the Python suites still run.
    """
    if shutil.which("terraform") is None and shutil.which("tofu") is None:
        config.option.dest_tf_replay = True
