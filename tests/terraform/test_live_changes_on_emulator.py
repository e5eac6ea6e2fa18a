"""Changes to a running stack, planned with the real provider against examples/local applied.

Two plans (each ~30 s on the emulator's worker): the refusal, and what an
acknowledged switch to ``sns_fifo`` replaces and deletes. The switch to ``sns``
(queues kept) and the runbooks are planned and applied on the mock provider
(live_changes_root.tftest.hcl).

The session's stack (``local_stack``, eventbridge, one consumer ``audit``) is the
"running stack". Each test plans a change against its state, without applying
it: what the provider replaces or deletes is what the hashicorp/aws schema says,
not the mock provider's guess (which knows no attribute that forces a new
resource), and the module's refusal (``terraform_data.live_changes``) is seen
stopping a real plan. docs/live-changes.md states the classes these pin.
``-refresh=false``: the state was just applied, and the plans stay cheap.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.terraform.tfhelpers import describe, run_terraform

pytestmark = [pytest.mark.terraform, pytest.mark.apply]

QUEUES = (
    'module.outbox.aws_sqs_queue.consumer["audit"]',
    'module.outbox.aws_sqs_queue.consumer_dlq["audit"]',
)
BUS_PATH = (
    "module.outbox.aws_cloudwatch_event_bus.this[0]",
    'module.outbox.aws_cloudwatch_event_rule.consumer["audit"]',
    'module.outbox.aws_cloudwatch_event_target.consumer["audit"]',
    "module.outbox.aws_cloudwatch_event_archive.this[0]",
    "module.outbox.aws_sqs_queue.event_bus_dlq[0]",
)
REPLACE = ["delete", "create"]


def _plan(
    local_stack: Any, tf_cli_config: Path, tmp_path: Path, variables: dict[str, Any]
) -> tuple[Any, dict[str, list[str]]]:
    """Plans examples/local with ``variables`` against the session's state.

    Returns the finished process and, when the plan succeeded, each resource's
    planned actions.
    """
    runner = local_stack.terraform
    env = {
        **os.environ,
        "TF_DATA_DIR": str(runner.work_dir),
        "TF_CLI_CONFIG_FILE": str(tf_cli_config),
    }
    plan_file = tmp_path / "change.tfplan"
    var_flags = [
        f"-var={name}={value if isinstance(value, str) else json.dumps(value)}"
        for name, value in variables.items()
    ]
    result = run_terraform(
        [
            "plan",
            "-input=false",
            "-no-color",
            "-lock=false",
            "-refresh=false",
            f"-state={runner.state_path}",
            f"-out={plan_file}",
            *var_flags,
        ],
        cwd=Path(runner.module_dir),
        env=env,
    )
    if result.returncode != 0:
        return result, {}
    shown = run_terraform(
        ["show", "-json", "-no-color", str(plan_file)], cwd=Path(runner.module_dir), env=env
    )
    assert shown.returncode == 0, describe(shown)
    actions = {
        change["address"]: change["change"]["actions"]
        for change in json.loads(shown.stdout)["resource_changes"]
    }
    return result, actions


def test_switching_to_sns_fifo_and_removing_a_consumer_are_refused_naming_both(
    local_stack: Any, tf_cli_config: Path, tmp_path: Path
) -> None:
    result, _ = _plan(
        local_stack,
        tf_cli_config,
        tmp_path,
        {"publish_to": "sns_fifo", "consumer_keys": ["billing"]},
    )

    assert result.returncode == 1, describe(result)
    assert 'resource "terraform_data" "live_changes"' in result.stderr, describe(result)
    assert '["consumers.audit=removed","publish_to=sns_fifo"]' in " ".join(result.stderr.split()), (
        describe(result)
    )


def test_acknowledged_switch_to_sns_fifo_replaces_the_queues_and_deletes_the_bus_path(
    local_stack: Any, tf_cli_config: Path, tmp_path: Path
) -> None:
    """What the acknowledgement accepts (docs/live-changes.md, publish_to); a consumer
    added in the same plan needs none."""
    result, actions = _plan(
        local_stack,
        tf_cli_config,
        tmp_path,
        {
            "publish_to": "sns_fifo",
            "consumer_keys": ["audit", "billing"],
            "acknowledged_changes": {"serial": 1, "changes": ["publish_to=sns_fifo"]},
        },
    )

    assert result.returncode == 0, describe(result)
    assert {address: actions[address] for address in QUEUES} == {
        address: REPLACE for address in QUEUES
    }
    assert {address: actions[address] for address in BUS_PATH} == {
        address: ["delete"] for address in BUS_PATH
    }
    assert actions['module.outbox.aws_sqs_queue.consumer["billing"]'] == ["create"]
    assert actions["module.outbox.aws_dynamodb_table.this[0]"] == ["no-op"]
