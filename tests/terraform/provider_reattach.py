"""Long-running hashicorp/aws provider processes, shared by the terraform commands of a test.

Terraform starts the provider plugin anew for every walk of every command
(three times for a plan: schema, validate, plan; more for an apply), and the
AWS provider, a 700 MB binary, takes about a second of CPU to start. Started
once in debug mode and named in ``TF_REATTACH_PROVIDERS``, the same binary
(the one ``terraform init`` installed) serves every command given that
variable.

Two kinds of sharing:

- ``terraform test`` with ``mock_provider`` (every file here) and ``terraform
  validate`` never configure the provider: one process per worker serves them
  all (``aws_provider_env`` in conftest.py).
- A stack that plans or applies configures the provider on every command (its
  endpoints, region, keys: each command sends its own), and the provider reads
  what it uploads (the Lambda zips, ``path.module``-relative) from its own
  working directory: each stack gets a process of its own, started in the
  directory terraform runs in, used by one command at a time. Environment
  variables the provider reads itself (``AWS_*``) are the ones it was started
  with, so it is started with the environment the commands run with.

When the provider cannot be started that way, :func:`shared_aws_provider` says
so with a :class:`ProviderNotShared` warning and yields no variable: every
command then starts its own provider, as without this module. Nothing is
skipped, the run is only slower.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT_SECONDS = 60.0
#: In debug mode the provider logs at TRACE (its SDKs' every request: ~0.8 MB
#: per run block), about 8% of the CPU of the `terraform test` files
#: (consumers and sweeper_alarms: 40.2 s with the logs, 36.9 s without).
QUIET_PROVIDER_LOGS = {
    name: "OFF"
    for name in (
        "TF_LOG_PROVIDER",
        "TF_LOG_SDK",
        "TF_LOG_SDK_PROTO",
        "TF_LOG_SDK_MUX",
        "TF_LOG_SDK_FRAMEWORK",
    )
}
#: Not handed to a shared provider. With AWS_CA_BUNDLE set, hashicorp/aws
#: 5.100.0 configures once and then refuses every later configure of the same
#: process ("unable to add custom RootCAs HTTPClient, has no
#: WithTransportOptions"): the first configure wrapped its HTTP client. The
#: stacks that share a provider talk plain HTTP to the loopback emulator, where
#: a CA bundle plays no part.
NOT_HANDED_TO_A_SHARED_PROVIDER = ("AWS_CA_BUNDLE",)
_REATTACH = re.compile(r"TF_REATTACH_PROVIDERS='(?P<value>[^']+)'")


_AWS_PROVIDER = "registry.terraform.io/hashicorp/aws/*/*/terraform-provider-aws*"
_MIRROR_PATH = re.compile(r'^\s*path\s*=\s*"(?P<path>[^"]+)"', re.MULTILINE)


def installed_aws_provider(data_dir: Path) -> Path:
    """The provider binary ``terraform init`` installed into ``data_dir`` (a TF_DATA_DIR)."""
    found = sorted(data_dir.glob(f"providers/{_AWS_PROVIDER}"))
    if not found:
        raise FileNotFoundError(f"no hashicorp/aws provider under {data_dir}: run terraform init")
    return found[-1]


def mirrored_aws_provider(cli_config: Path) -> Path:
    """The provider binary in the filesystem mirror a CLI config (scripts/tf_cli_config.py) names.

    What ``terraform init`` would install from there, for a stack whose init
    runs with the provider already started. Only when the mirror holds one
    release: with several, which one init picks depends on the stack.
    """
    mirrors = _MIRROR_PATH.findall(cli_config.read_text())
    found = sorted(binary for mirror in mirrors for binary in Path(mirror).glob(_AWS_PROVIDER))
    if len(found) != 1:
        raise FileNotFoundError(
            f"not exactly one hashicorp/aws provider in the mirror of {cli_config}: {found}"
        )
    return found[0]


class ProviderNotShared(UserWarning):
    """The provider could not be started for reattaching: each command starts its own."""


@contextmanager
def reattached_aws_provider(
    data_dir: Path | None,
    log_path: Path,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    cli_config: Path | None = None,
) -> Iterator[dict[str, str]]:
    """Start the provider in debug mode; yield the env that makes terraform use it.

    The one installed in ``data_dir``, or without one, the mirror's of ``cli_config``.
    Raises when the provider does not start in debug mode.
    """
    if data_dir is not None:
        binary = installed_aws_provider(data_dir)
    elif cli_config is not None:
        binary = mirrored_aws_provider(cli_config)
    else:
        raise ValueError("reattached_aws_provider needs a data_dir or a cli_config")
    environment = {**(os.environ if env is None else env), **QUIET_PROVIDER_LOGS}
    for name in ("TF_REATTACH_PROVIDERS", *NOT_HANDED_TO_A_SHARED_PROVIDER):
        environment.pop(name, None)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(binary), "-debug"],
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            match = _REATTACH.search(log_path.read_text(errors="replace"))
            if match:
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"{binary} -debug did not print TF_REATTACH_PROVIDERS "
                    f"(exit code {process.poll()}):\n{log_path.read_text(errors='replace')}"
                )
            time.sleep(0.05)
        yield {"TF_REATTACH_PROVIDERS": match.group("value")}
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextmanager
def shared_aws_provider(
    data_dir: Path | None,
    log_path: Path,
    *,
    cwd: Path,
    env: Mapping[str, str],
    cli_config: Path | None = None,
) -> Iterator[dict[str, str]]:
    """One provider process for a stack's commands, or (with a warning) none.

    ``data_dir`` is the stack's initialised TF_DATA_DIR (or None before its
    init: the binary is then the mirror's of ``cli_config``), ``cwd`` the
    directory its commands run in, ``env`` their environment.
    """
    try:
        started = reattached_aws_provider(
            data_dir, log_path, cwd=cwd, env=env, cli_config=cli_config
        )
        reattach = started.__enter__()
    except (OSError, RuntimeError) as error:
        warnings.warn(
            ProviderNotShared(
                f"the hashicorp/aws provider could not be shared by this stack's commands, "
                f"each starts its own (slower, same checks): {error}"
            ),
            stacklevel=3,
        )
        yield {}
        return
    try:
        yield reattach
    finally:
        started.__exit__(None, None, None)
