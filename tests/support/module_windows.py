"""The windows modules/windows derives, evaluated by Terraform itself.

modules/windows holds no provider and no resource, so a root module calling it
initialises and applies in a few seconds, offline: tests that cross a window
(days of virtual time) use the module's own figure, never a copy of its formula.
"""

from __future__ import annotations

import functools
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tests.terraform.tfhelpers import REPO_ROOT, describe, run_terraform

#: The module's defaults for one EventBridge consumer (variables.tf); the
#: terraform test tests/terraform/windows.tftest.hcl pins that the root module
#: passes these to modules/windows and derives 20 days from them.
DEFAULT_SETTINGS: dict[str, Any] = {
    "publish_to": "eventbridge",
    "consumers": {
        "consumer": {"message_retention_seconds": 345600, "maximum_event_age_in_seconds": 86400}
    },
    "archive_retention_days": 7,
    # sweeper.min_age_seconds + the rate(5 minutes) interval.
    "sweeper_republish_seconds": 600,
    # No customer key on the bus: its DLQ receives nothing.
    "bus_dlq_retention_seconds": 0,
    # alarms.period_seconds' default.
    "alarm_period_seconds": 300,
}


def derived_window(settings: dict[str, Any], work: Path) -> int:
    """The idempotency window modules/windows derives for the one consumer of ``settings``."""
    (consumer,) = settings["consumers"]
    config = {
        "module": {"windows": {"source": str(REPO_ROOT / "modules" / "windows"), **settings}},
        "output": {
            "window": {
                "value": f'${{module.windows.idempotency_expires_after_seconds["{consumer}"]}}'
            }
        },
    }
    (work / "main.tf.json").write_text(json.dumps(config))
    terraform = shutil.which("terraform")
    if terraform is None:
        raise RuntimeError("terraform is not on PATH: the window is Terraform's to derive")
    env = {
        "PATH": str(Path(terraform).parent),
        "HOME": str(work),
        "TF_DATA_DIR": str(work / ".terraform"),
    }
    for args in (
        ["init", "-backend=false", "-input=false", "-no-color"],
        ["apply", "-auto-approve", "-input=false", "-no-color"],
    ):
        result = run_terraform(args, cwd=work, env=env)
        assert result.returncode == 0, describe(result)
    output = run_terraform(["output", "-json", "window"], cwd=work, env=env)
    assert output.returncode == 0, describe(output)
    return int(json.loads(output.stdout))


@functools.cache
def default_window() -> int:
    """The window for the module's defaults, derived once per process."""
    with tempfile.TemporaryDirectory(prefix="windows-") as work:
        return derived_window(DEFAULT_SETTINGS, Path(work))


__all__ = ["DEFAULT_SETTINGS", "default_window", "derived_window"]
