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


def test_every_terraform_test_file_is_found() -> None:
    """Guards the enumeration below against silently finding nothing."""
    assert {"validation.tftest.hcl", "consumers.tftest.hcl"} <= set(TEST_FILES), TEST_FILES


@pytest.mark.parametrize("test_file", TEST_FILES)
def test_terraform_test_file_passes(test_file: str, terraform_test_env: dict[str, str]) -> None:
    """One tests/terraform/*.tftest.hcl (mock provider, plan only); every run in it passes.

    One file per test, so that the files run in parallel under pytest-xdist.
    """
    runs = len(_RUN_BLOCK.findall((REPO_ROOT / TEST_DIRECTORY / test_file).read_text()))
    result = run_terraform(
        [
            "test",
            "-no-color",
            f"-test-directory={TEST_DIRECTORY}",
            f"-filter={TEST_DIRECTORY}/{test_file}",
        ],
        cwd=REPO_ROOT,
        env=terraform_test_env,
    )

    assert result.returncode == 0, describe(result)
    assert f"{runs} passed, 0 failed" in result.stdout, describe(result)


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
