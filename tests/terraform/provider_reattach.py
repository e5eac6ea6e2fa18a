"""One long-running hashicorp/aws provider process for ``terraform test`` and ``validate``.

Terraform starts the provider plugin anew for every plan of every ``run`` block
(twice per run), and the AWS provider, a 700 MB binary, takes about a second to
start: most of the time ``terraform test`` took. Started once in debug mode and
named in ``TF_REATTACH_PROVIDERS``, the same binary (the one ``terraform init``
installed) serves every command of a worker.

Only for commands that never configure the provider: ``terraform test`` with
``mock_provider`` (every file here) and ``terraform validate``. A configured
provider (an apply) would carry one command's endpoints into the next.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
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
_REATTACH = re.compile(r"TF_REATTACH_PROVIDERS='(?P<value>[^']+)'")


def installed_aws_provider(data_dir: Path) -> Path:
    """The provider binary ``terraform init`` installed into ``data_dir`` (a TF_DATA_DIR)."""
    found = sorted(
        data_dir.glob("providers/registry.terraform.io/hashicorp/aws/*/*/terraform-provider-aws*")
    )
    if not found:
        raise FileNotFoundError(f"no hashicorp/aws provider under {data_dir}: run terraform init")
    return found[-1]


@contextmanager
def reattached_aws_provider(data_dir: Path, log_path: Path) -> Iterator[dict[str, str]]:
    """Start the installed provider in debug mode; yield the env that makes terraform use it."""
    binary = installed_aws_provider(data_dir)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(binary), "-debug"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **QUIET_PROVIDER_LOGS},
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
