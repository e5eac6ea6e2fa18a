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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from py.path import local as py_path_local
from pytest_terraform import tf as pytest_terraform_tf
from pytest_terraform import xdist as pytest_terraform_xdist

from tests.terraform.provider_reattach import shared_aws_provider
from tests.terraform.tfhelpers import (
    EXAMPLES_DIR,
    REPO_ROOT,
    describe,
    lock_for_init_in,
    run_terraform,
)

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
    # Set in os.environ while examples/local lives (local_stack_env): its provider only.
    env.pop("TF_REATTACH_PROVIDERS", None)
    env.update(
        {
            "TF_CLI_CONFIG_FILE": str(tf_cli_config),
            "TF_IN_AUTOMATION": "1",
            "TF_INPUT": "0",
            "CHECKPOINT_DISABLE": "1",
        }
    )
    return env


@pytest.fixture(scope="session")
def terraform_test_env(
    tf_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """The module initialised for ``terraform test``, and one provider process serving it.

    Without a shared provider (a ``ProviderNotShared`` warning says why), every
    terraform command starts its own.
    """
    work = tmp_path_factory.mktemp("terraform-test")
    env = {**tf_env, "TF_DATA_DIR": str(work / ".terraform")}
    with lock_for_init_in(REPO_ROOT):
        init = run_terraform(
            [
                "init",
                "-backend=false",
                "-input=false",
                "-no-color",
                "-test-directory=tests/terraform",
            ],
            cwd=REPO_ROOT,
            env=env,
        )
    assert init.returncode == 0, describe(init)
    with shared_aws_provider(
        work / ".terraform", work / "provider.log", cwd=REPO_ROOT, env=env
    ) as reattach:
        yield {**env, **reattach}


@pytest.fixture(scope="session")
def aws_provider_env(terraform_test_env: dict[str, str]) -> dict[str, str]:
    """Just the variable that points terraform at the running provider (for validate).

    Only for commands that never configure the provider (validate, terraform
    test with mocks); empty when the provider is not shared.
    """
    return {
        name: value for name, value in terraform_test_env.items() if name == "TF_REATTACH_PROVIDERS"
    }


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


################################################################################
# examples/local applied to the moto server, once per session: shared by
# test_apply_local.py and test_iam_least_privilege.py.
################################################################################


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Turns pytest-terraform's xdist mode off; ``local_stack`` applies the stack itself.

    pytest-terraform's xdist mode (on whenever xdist is installed) shares a
    session stack between workers through lock files, and fails when a worker
    finds the stack made (it calls a ``TerraformTestApi.load`` that does not
    exist). ``tests/conftest.py`` keeps every test of this stack on one worker
    instead, so the plain session fixture is used, with its own teardown.
    """
    for plugin in list(config.pluginmanager.get_plugins()):
        if isinstance(plugin, pytest_terraform_xdist.XDistTerraform):
            config.pluginmanager.unregister(plugin)


_STACK_ENV = (
    "TF_CLI_CONFIG_FILE",
    "TF_VAR_endpoint_url",
    "TF_INPUT",
    "CHECKPOINT_DISABLE",
    "TF_REATTACH_PROVIDERS",
)


@pytest.fixture(scope="session")
def local_stack_env(
    terraform_bin: str,
    tf_cli_config: Path,
    moto_server: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """What pytest-terraform's terraform runs need, for as long as the stack lives.

    pytest-terraform runs terraform with ``os.environ``; it destroys the stack in
    its own finalizer, which runs before this fixture's teardown. One provider
    process (provider_reattach.py), started in examples/local where the
    commands run, serves the stack's init, apply, the tests' plans and the
    destroy; the init then installs no provider, which the examples/local
    validate (test_terraform_static.py) checks instead.
    """
    saved_env = {key: os.environ.get(key) for key in _STACK_ENV}
    saved_module_dir = pytest_terraform_tf.LazyModuleDir.value
    os.environ.update(
        {
            "TF_CLI_CONFIG_FILE": str(tf_cli_config),
            "TF_VAR_endpoint_url": moto_server,
            "TF_INPUT": "0",
            "CHECKPOINT_DISABLE": "1",
        }
    )
    if not saved_module_dir:
        pytest_terraform_tf.LazyModuleDir.value = str(EXAMPLES_DIR)
    try:
        with shared_aws_provider(
            None,
            tmp_path_factory.mktemp("local-stack-provider") / "provider.log",
            cwd=EXAMPLES_DIR / "local",
            env=os.environ,
            cli_config=tf_cli_config,
        ) as reattach:
            os.environ.update(reattach)
            yield
    finally:
        pytest_terraform_tf.LazyModuleDir.value = saved_module_dir
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="session")
def local_stack(
    local_stack_env: None,
    request: pytest.FixtureRequest,
    tmpdir_factory: pytest.TempdirFactory,
    worker_id: str,
) -> Any:
    """examples/local applied to the session's moto server (pytest-terraform state API).

    The fixture pytest-terraform's ``terraform("local", scope="session")`` would
    register, called directly: that decorator writes the fixture into its
    caller's module namespace, which a conftest can only reach after
    pytest-terraform's own configuration has run. It destroys the stack when
    the session ends.
    """
    apply_once = pytest_terraform_tf.TerraformFixture(
        pytest_terraform_tf.LazyTfBin,
        pytest_terraform_tf.LazyPluginCacheDir,
        "session",
        "local",
        py_path_local(Path(__file__).parent),
        pytest_terraform_tf.LazyReplay.resolve(),
        pytest_terraform_tf.td.DEFAULT,
        request.config,
    )
    stack = apply_once(request, tmpdir_factory, worker_id)
    # pytest-terraform records the resources next to the module; this repo keeps
    # no recordings (replay mode is not used), so do not leave one in examples/.
    (EXAMPLES_DIR / "local" / "tf_resources.json").unlink(missing_ok=True)
    return stack


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Destroys examples/local once the last test that uses it has run.

    pytest tears a session fixture down when the session ends: under
    ``make test`` that destroy (about 20 s) was the last thing the whole run
    waited for, long after the stack's tests had finished. They run together,
    in collection order (tests/xdist_groups.py keeps them on one worker), so
    the last one in collection order is the last to run.
    """
    result = yield
    if item.nodeid == _last_test_using_local_stack(item.session):
        for definition in item._fixtureinfo.name2fixturedefs.get("local_stack", ()):
            definition.finish(item._request)  # type: ignore[arg-type]
    return result


_LAST_LOCAL_STACK_TEST: dict[int, str | None] = {}


def _last_test_using_local_stack(session: pytest.Session) -> str | None:
    if id(session) not in _LAST_LOCAL_STACK_TEST:
        users = [item.nodeid for item in session.items if "local_stack" in item.fixturenames]
        _LAST_LOCAL_STACK_TEST[id(session)] = users[-1] if users else None
    return _LAST_LOCAL_STACK_TEST[id(session)]


@pytest.fixture(scope="session")
def outputs(local_stack: Any) -> dict[str, Any]:
    return {name: output["value"] for name, output in local_stack.outputs.items()}


@pytest.fixture(scope="session")
def aws_client(moto_server: str, outputs: dict[str, Any]) -> Callable[[str], Any]:
    def client(service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=moto_server,
            region_name=outputs["region"],
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )

    return client
