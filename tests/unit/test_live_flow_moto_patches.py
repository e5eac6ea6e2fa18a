"""tests/terraform/live_flow.py's moto patches are installed only on the checked moto release.

The project's rule (tests/dependency_shortcuts.py): a patch into a dependency's
private code is installed only on the release it was checked against
(``CHECKED_AGAINST``), and otherwise says so. live_flow.py, run by the two
live-change emulator tests, installs three patches into moto 5.2.5 internals
(``LambdaBackend.create_event_source_mapping`` and the queues' and tables'
``lambda_event_source_mappings``; ``LambdaFunction.update_configuration``;
``ssm_backends[...]._parameters`` with ``Parameter(...)``'s keyword arguments)
and, through ``demo.emulator.Emulator.start``, the speed shortcut
``speed_up_sqs_receive`` (the same one tests/faster_moto.py gates), on any
release. On another moto they patch whatever the names then mean.

Each check runs in a subprocess that pretends another moto release
(``OUTBOX_TEST_PRETEND_VERSIONS``, the guard's own switch): the patches must not
leak into a pytest worker, as live_flow.py's docstring says.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
from moto.awslambda.models import LambdaBackend, LambdaFunction
from moto.sqs.models import SQSBackend
before = {
    "create_event_source_mapping": LambdaBackend.create_event_source_mapping,
    "update_configuration": LambdaFunction.update_configuration,
    "retention": SQSBackend.is_message_valid_based_on_retention_period,
}
name = sys.argv[1]
try:
    if name == "keep_moto_pollers_off":
        from tests.terraform.live_flow import keep_moto_pollers_off as patch
    elif name == "moto_updates_functions_as_aws":
        from tests.terraform.live_flow import moto_updates_functions_as_aws as patch
    else:
        from demo.emulator import speed_up_sqs_receive as patch
    patch()
except Exception as exc:  # refusing on an unchecked release is a guard too
    print("REFUSED", type(exc).__name__, exc)
    sys.exit(0)
after = {
    "create_event_source_mapping": LambdaBackend.create_event_source_mapping,
    "update_configuration": LambdaFunction.update_configuration,
    "retention": SQSBackend.is_message_valid_based_on_retention_period,
}
changed = sorted(k for k in before if before[k] is not after[k])
print("PATCHED" if changed else "UNTOUCHED", changed)
"""


@pytest.mark.parametrize(
    "patch", ["keep_moto_pollers_off", "moto_updates_functions_as_aws", "speed_up_sqs_receive"]
)
def test_a_moto_patch_of_the_live_flow_is_not_installed_on_an_unchecked_release(
    patch: str,
) -> None:
    env = {
        **os.environ,
        "OUTBOX_TEST_PRETEND_VERSIONS": "moto=9.9.9",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "lambda"), str(ROOT)]),
    }
    env.pop("OUTBOX_TEST_SHORTCUTS", None)
    result = subprocess.run(
        [sys.executable, "-c", PROBE, patch],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert not result.stdout.startswith("PATCHED"), (
        f"{patch} patched moto internals checked against 5.2.5 on moto 9.9.9: {result.stdout}"
    )
