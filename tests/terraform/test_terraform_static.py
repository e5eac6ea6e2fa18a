"""Terraform checks that need no AWS: fmt, init + validate, and `terraform test` with mocks.

`pytest tests/terraform` runs them with the apply test; each can also be run
by hand (see the commands in the assertion messages).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.terraform.tfhelpers import (
    EXAMPLES_DIR,
    REPO_ROOT,
    describe,
    lock_for_init_in,
    run_terraform,
)

pytestmark = pytest.mark.terraform

# The module and every example: a new folder under examples/ holding *.tf files
# is validated without being listed here.
ROOT_MODULES = [
    ".",
    *sorted(
        f"examples/{path.name}"
        for path in EXAMPLES_DIR.iterdir()
        if path.is_dir() and any(path.glob("*.tf"))
    ),
    "tests/e2e/stack",
]


def test_every_example_is_validated() -> None:
    """Guards the enumeration above against silently finding nothing."""
    assert {"examples/complete", "examples/local"} <= set(ROOT_MODULES), ROOT_MODULES


def test_terraform_files_are_formatted(tf_env: dict[str, str]) -> None:
    result = run_terraform(["fmt", "-check", "-recursive", "-diff"], cwd=REPO_ROOT, env=tf_env)

    assert result.returncode == 0, "run `terraform fmt -recursive`:\n" + describe(result)


@pytest.mark.parametrize("module_dir", ROOT_MODULES)
def test_module_initialises_offline_and_validates(
    module_dir: str, tf_env: dict[str, str], aws_provider_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**tf_env, "TF_DATA_DIR": str(tmp_path / ".terraform")}
    cwd = REPO_ROOT / module_dir

    with lock_for_init_in(cwd):
        init = run_terraform(
            ["init", "-backend=false", "-input=false", "-no-color"], cwd=cwd, env=env
        )
    assert init.returncode == 0, describe(init)

    validate = run_terraform(["validate", "-no-color"], cwd=cwd, env={**env, **aws_provider_env})
    assert validate.returncode == 0, describe(validate)


def test_a_stream_view_type_change_is_documented_as_two_applies() -> None:
    """hashicorp/aws 5.x plans the old stream ARN when stream_view_type changes
    (terraform-provider-aws#42560), so the mapping moves only at the next apply: the
    docs say apply twice, and the mapping is not re-created by a trigger, which would
    hand the new mapping the planned, old ARN."""
    publisher = (REPO_ROOT / "publisher.tf").read_text()
    mapping = publisher[publisher.index('resource "aws_lambda_event_source_mapping" "publisher"') :]
    mapping = mapping[: mapping.index("\n}\n")]
    assert "event_source_arn = local.table_stream_arn" in mapping
    assert "replace_triggered_by" not in mapping
    row = next(
        line
        for line in (REPO_ROOT / "docs" / "live-changes.md").read_text().splitlines()
        if line.startswith("| `table.stream_view_type`")
    )
    assert "42560" in row and "apply a second time" in row, row


TEST_DIRECTORY = "tests/terraform"
TEST_FILES = sorted(path.name for path in (REPO_ROOT / TEST_DIRECTORY).glob("*.tftest.hcl"))
_RUN_BLOCK = re.compile(r'^run\s+"', re.MULTILINE)

#: The tests/terraform/*.tftest.hcl files, in three ``terraform test`` processes.
#: Every process spends about a second of CPU before its first run (loading the
#: module, the mocks and the provider schema): one process per file cost 23 of
#: those. Three keep the files in parallel under pytest-xdist; the groups are
#: balanced on each file's CPU time (consumers ~19 s, sweeper_alarms ~11 s,
#: live_changes_root ~9 s, the rest 0.4 to 6 s). A new file must be added to
#: one of them: ``test_every_terraform_test_file_is_in_exactly_one_process``.
TERRAFORM_TEST_PROCESSES: dict[str, tuple[str, ...]] = {
    "process-1": (
        "consumers.tftest.hcl",
        "event_bus_dlq.tftest.hcl",
        "existing.tftest.hcl",
        "live_changes.tftest.hcl",
        "multi_region.tftest.hcl",
    ),
    "process-2": (
        "defaults.tftest.hcl",
        "example_key_policy.tftest.hcl",
        "kms.tftest.hcl",
        "numbers_as_strings.tftest.hcl",
        "options.tftest.hcl",
        "sweeper_alarms.tftest.hcl",
        "trust_boundaries.tftest.hcl",
        "windows.tftest.hcl",
    ),
    "process-3": (
        "known_after_apply.tftest.hcl",
        "live_changes_existing.tftest.hcl",
        "live_changes_root.tftest.hcl",
        "multi_region_edge_cases.tftest.hcl",
        "organisation.tftest.hcl",
        "powertools_layer.tftest.hcl",
        "provider_compat.tftest.hcl",
        "set_inputs.tftest.hcl",
        "unknown_attributes.tftest.hcl",
        "validation.tftest.hcl",
    ),
}


def test_every_terraform_test_file_is_found() -> None:
    """Guards the enumeration below against silently finding nothing."""
    assert {"validation.tftest.hcl", "consumers.tftest.hcl"} <= set(TEST_FILES), TEST_FILES


def test_every_terraform_test_file_is_in_exactly_one_process() -> None:
    """A new *.tftest.hcl not listed in TERRAFORM_TEST_PROCESSES would never run."""
    listed = [name for files in TERRAFORM_TEST_PROCESSES.values() for name in files]
    twice = sorted({name for name in listed if listed.count(name) > 1})
    assert not twice, f"in more than one process of TERRAFORM_TEST_PROCESSES: {twice}"
    missing = sorted(set(TEST_FILES) - set(listed))
    assert not missing, f"add to a process of TERRAFORM_TEST_PROCESSES: {missing}"
    gone = sorted(set(listed) - set(TEST_FILES))
    assert not gone, f"listed in TERRAFORM_TEST_PROCESSES but not in {TEST_DIRECTORY}: {gone}"


_FILE_STATUS = re.compile(r"^(?P<path>\S+\.tftest\.hcl)\.\.\. (?P<status>pass|fail|skip)$")
_RUN_STATUS = re.compile(r'^  run "(?P<run>[^"]+)"\.\.\. (?P<status>\w+)$')


def terraform_test_outcomes(output: str) -> dict[str, tuple[str | None, list[tuple[str, str]]]]:
    """Per test file in ``terraform test -no-color`` output: its status and its runs' statuses.

    Terraform prints a file's runs between its ``in progress`` and final lines,
    one file at a time.
    """
    outcomes: dict[str, tuple[str | None, list[tuple[str, str]]]] = {}
    current: list[tuple[str, str]] = []
    for line in output.splitlines():
        if line.endswith(".tftest.hcl... in progress"):
            current = []
            outcomes[line.removesuffix("... in progress")] = (None, current)
        elif match := _RUN_STATUS.match(line):
            current.append((match["run"], match["status"]))
        elif match := _FILE_STATUS.match(line):
            runs = outcomes.get(match["path"], (None, current))[1]
            outcomes[match["path"]] = (match["status"], runs)
    return outcomes


def terraform_test_failures(output: str, expected_runs: dict[str, int]) -> list[str]:
    """What did not pass, naming the file and the run block; empty when every run passed."""
    outcomes = terraform_test_outcomes(output)
    failures = []
    for path, runs_expected in expected_runs.items():
        status, runs = outcomes.get(path, (None, []))
        failures.extend(f'{path}: run "{run}" {result}' for run, result in runs if result != "pass")
        if status != "pass":
            failures.append(f"{path}: {status or 'did not finish'}")
        passed = sum(result == "pass" for _, result in runs)
        if passed != runs_expected:
            failures.append(f"{path}: {passed} of its {runs_expected} run blocks passed")
    return failures


# What terraform 1.11 printed for a process whose kms.tftest.hcl had a failing
# assert (stderr merged into stdout), cut short.
_ONE_RUN_FAILED = """\
tests/terraform/defaults.tftest.hcl... in progress
  run "defaults_are_safe"... pass
tests/terraform/defaults.tftest.hcl... tearing down
tests/terraform/defaults.tftest.hcl... pass
tests/terraform/kms.tftest.hcl... in progress
  run "eventbridge_every_resource_gets_the_key"... fail

Error: Test assertion failed

  on tests/terraform/kms.tftest.hcl line 72, in run "eventbridge_every_resource_gets_the_key":

  run "sns_every_resource_gets_the_key"... pass
tests/terraform/kms.tftest.hcl... tearing down
tests/terraform/kms.tftest.hcl... fail

Failure! 2 passed, 1 failed.
"""


def test_a_failing_run_is_named_with_its_file() -> None:
    failures = terraform_test_failures(
        _ONE_RUN_FAILED,
        {"tests/terraform/defaults.tftest.hcl": 1, "tests/terraform/kms.tftest.hcl": 2},
    )

    assert failures == [
        'tests/terraform/kms.tftest.hcl: run "eventbridge_every_resource_gets_the_key" fail',
        "tests/terraform/kms.tftest.hcl: fail",
        "tests/terraform/kms.tftest.hcl: 1 of its 2 run blocks passed",
    ]


def test_a_file_missing_from_the_output_or_short_of_runs_fails() -> None:
    failures = terraform_test_failures(
        _ONE_RUN_FAILED.replace("kms", "other"),
        {"tests/terraform/defaults.tftest.hcl": 2, "tests/terraform/kms.tftest.hcl": 2},
    )

    assert failures == [
        "tests/terraform/defaults.tftest.hcl: 1 of its 2 run blocks passed",
        "tests/terraform/kms.tftest.hcl: did not finish",
        "tests/terraform/kms.tftest.hcl: 0 of its 2 run blocks passed",
    ]


@pytest.mark.parametrize("process", sorted(TERRAFORM_TEST_PROCESSES))
def test_terraform_test_files_pass(process: str, terraform_test_env: dict[str, str]) -> None:
    """Some tests/terraform/*.tftest.hcl (mock provider) in one `terraform test`; all runs pass.

    The processes run in parallel under pytest-xdist. A failure names the file
    and the run block; the output below it has terraform's diagnostics.
    """
    files = TERRAFORM_TEST_PROCESSES[process]
    expected_runs = {
        f"{TEST_DIRECTORY}/{name}": len(
            _RUN_BLOCK.findall((REPO_ROOT / TEST_DIRECTORY / name).read_text())
        )
        for name in files
    }
    result = run_terraform(
        [
            "test",
            "-no-color",
            f"-test-directory={TEST_DIRECTORY}",
            *(f"-filter={path}" for path in expected_runs),
        ],
        cwd=REPO_ROOT,
        env=terraform_test_env,
        stderr_to_stdout=True,
    )

    failures = terraform_test_failures(result.stdout, expected_runs)
    assert result.returncode == 0 and not failures, "\n".join(
        ["not passed:", *failures, "", describe(result)]
    )
    total = sum(expected_runs.values())
    assert f"{total} passed, 0 failed" in result.stdout, describe(result)


# ------------------------------------------------------------------------- sizes

_QUEUE_MAX_MESSAGE_BYTES_LOCAL = re.compile(r"^\s*queue_max_message_bytes\s*=\s*(\d+)\s*$", re.M)
_SQS_QUEUE = re.compile(r'^resource "aws_sqs_queue" "(\w+)" \{\n(.*?)^\}', re.M | re.S)
#: The queues an event (the message, not metadata about it) can end in.
_EVENT_QUEUES = {"consumer", "consumer_dlq", "event_bus_dlq"}


def _module_tf() -> str:
    return "\n".join(path.read_text() for path in sorted(REPO_ROOT.glob("*.tf")))


def test_module_queue_size_is_the_one_the_writer_budgets_for() -> None:
    """Terraform cannot import dynamodb_outbox.sizes: the one figure both use is pinned here."""
    from dynamodb_outbox.sizes import QUEUE_MAX_MESSAGE_BYTES

    assert [int(v) for v in _QUEUE_MAX_MESSAGE_BYTES_LOCAL.findall(_module_tf())] == [
        QUEUE_MAX_MESSAGE_BYTES
    ]


def test_every_queue_an_event_can_end_in_uses_the_module_queue_size() -> None:
    queues = dict(_SQS_QUEUE.findall(_module_tf()))
    assert set(queues) >= _EVENT_QUEUES, sorted(queues)
    for name in _EVENT_QUEUES:
        assert "max_message_size" in queues[name], f"aws_sqs_queue.{name} keeps the default"
        assert re.search(r"max_message_size\s*=\s*local\.queue_max_message_bytes\n", queues[name])


def test_no_size_limit_is_written_out_twice() -> None:
    """262,144 (256 KiB) appears once in the module, as the local the queues use."""
    text = _module_tf()
    assert len(re.findall(r"\b262144\b|\b262_144\b|256\s*\*\s*1024", text)) == 1


_ONE_BYTE_OVER_QUEUE = """
terraform {
  required_providers {
    aws = { source = "hashicorp/aws" }
  }
}

resource "aws_sqs_queue" "one_byte_over" {
  name             = "one-byte-over"
  max_message_size = %d
}
"""


def test_provider_refuses_a_queue_size_above_the_modules(
    tf_env: dict[str, str], aws_provider_env: dict[str, str], tmp_path: Path
) -> None:
    """Why the queues stay at 256 KiB although SQS takes 1 MiB: the pinned provider refuses more.

    If a provider upgrade accepts it, this fails: raise the module's queue size
    (and so the writer's budget, dynamodb_outbox.sizes) to what SQS takes.
    """
    from dynamodb_outbox.sizes import QUEUE_MAX_MESSAGE_BYTES

    (tmp_path / "main.tf").write_text(_ONE_BYTE_OVER_QUEUE % (QUEUE_MAX_MESSAGE_BYTES + 1))
    env = {**tf_env, "TF_DATA_DIR": str(tmp_path / ".terraform")}
    init = run_terraform(
        ["init", "-backend=false", "-input=false", "-no-color"], cwd=tmp_path, env=env
    )
    assert init.returncode == 0, describe(init)

    validate = run_terraform(
        ["validate", "-no-color"], cwd=tmp_path, env={**env, **aws_provider_env}
    )

    assert validate.returncode != 0, describe(validate)
    assert f"expected max_message_size to be in the range (1024 - {QUEUE_MAX_MESSAGE_BYTES})" in (
        validate.stdout + validate.stderr
    ), describe(validate)
