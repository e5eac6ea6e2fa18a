"""Fixtures for the Terraform tests: the terraform binary, the provider mirror, a moto server.

Every test here needs the ``terraform`` binary and a filesystem mirror of the
``hashicorp/aws`` provider (no registry is reachable). When either is truly
absent the tests are skipped with a message saying which, and ``-ra`` (see
pytest.ini) lists it in the summary. Anything else that goes wrong fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.terraform.tfhelpers import REPO_ROOT

TF_CLI_CONFIG_SCRIPT = REPO_ROOT / "scripts" / "tf_cli_config.py"
# moto's server, taught to return SQS RedriveAllowPolicy (see the script).
MOTO_SERVER_SCRIPT = REPO_ROOT / "scripts" / "moto_server.py"
EXIT_NO_MIRROR = 3  # scripts/tf_cli_config.py
MOTO_START_TIMEOUT_SECONDS = 30.0


@pytest.fixture(scope="session")
def terraform_bin() -> str:
    path = shutil.which("terraform")
    if path is None:
        pytest.skip(
            "SKIPPED LOUDLY: no `terraform` binary on PATH, so the Terraform tests "
            "(fmt, validate, terraform test, apply of examples/local on moto) did not run"
        )
    return path


@pytest.fixture(scope="session")
def tf_cli_config(terraform_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CLI config installing hashicorp/* from the local provider mirror."""
    target = tmp_path_factory.mktemp("tfcli") / "terraformrc"
    result = subprocess.run(
        [sys.executable, str(TF_CLI_CONFIG_SCRIPT), str(target)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode == EXIT_NO_MIRROR:
        pytest.skip(
            "SKIPPED LOUDLY: no hashicorp/aws provider mirror on this machine, so the "
            f"Terraform tests did not run ({result.stderr.strip()})"
        )
    assert result.returncode == 0, f"scripts/tf_cli_config.py failed:\n{result.stderr}"
    return Path(result.stdout.strip())


@pytest.fixture(scope="session")
def tf_env(tf_cli_config: Path) -> dict[str, str]:
    """Environment for terraform subprocesses: the mirror config, no prompts, no telemetry."""
    env = dict(os.environ)
    env.pop("TF_DATA_DIR", None)
    env.update(
        {
            "TF_CLI_CONFIG_FILE": str(tf_cli_config),
            "TF_IN_AUTOMATION": "1",
            "TF_INPUT": "0",
            "CHECKPOINT_DISABLE": "1",
        }
    )
    return env


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """scripts/moto_server.py on a free loopback port for the session; yields its URL."""
    port = _free_loopback_port()
    url = f"http://127.0.0.1:{port}"
    log_path = tmp_path_factory.mktemp("moto") / "moto_server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, str(MOTO_SERVER_SCRIPT), "-H", "127.0.0.1", "-p", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + MOTO_START_TIMEOUT_SECONDS
        while not _answers(f"{url}/moto-api/"):
            if process.poll() is not None:
                pytest.fail(
                    f"moto server exited with {process.returncode}:\n{log_path.read_text()}"
                )
            if time.monotonic() > deadline:
                pytest.fail(
                    f"moto server did not answer on {url} within "
                    f"{MOTO_START_TIMEOUT_SECONDS:.0f} s:\n{log_path.read_text()}"
                )
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
