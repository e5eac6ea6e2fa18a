"""Bad inputs are refused with the module's own words, naming what is wrong.

The `*.tftest.hcl` runs pin WHICH input fails (`expect_failures`), but cannot
read the message. Here one root module calls the module once per case, with
one bad input beside a good consumer, and a single terraform run reports every
case; each case's diagnostics must be the module's own validation errors,
containing the expected text and naming the offending consumer key but not the
good one.

Checks of one input fail `terraform validate` (no provider, no AWS). Checks
that compare two inputs (consumers with name or publish_to) are variable
validations too, but Terraform treats every other input as unknown while it
validates (hashicorp/terraform#35537), so they fail the first `terraform plan`
instead, with the same kind of error: that root module gets a provider pointed
at the session's moto server, for the data sources the module reads.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.terraform.provider_reattach import shared_aws_provider
from tests.terraform.tfhelpers import REPO_ROOT, describe, run_terraform

pytestmark = pytest.mark.terraform

GOOD_CONSUMER = 'good = { event_pattern = jsonencode({ source = ["orders"] }) }'
LONG_NAME = "a234567890123456789012345678901234567890"  # 40, the longest name allowed


@dataclass(frozen=True)
class Case:
    arguments: str
    expected: tuple[str, ...]
    name_consumers: bool = True  # the good consumer must not be named
    compares_inputs: bool = False  # refused by plan, not by validate


def consumers(bad: str) -> str:
    return f"consumers = {{\n    {GOOD_CONSUMER}\n    {bad}\n  }}"


PATTERN = 'event_pattern = jsonencode({ source = ["orders"] })'

CASES: dict[str, Case] = {
    "name_and_key_too_long": Case(
        f'name = "{LONG_NAME}"\n  '
        + consumers(f"a23456789012345 = {{ {PATTERN} }}").replace("good =", "g =", 1),
        (
            "at most 64 characters",
            f'Too long for: a23456789012345 ("{LONG_NAME}-a23456789012345-consumer", '
            "65 characters)",
        ),
        compares_inputs=True,
    ),
    "filter_policy_with_eventbridge": Case(
        consumers('billing = { filter_policy = jsonencode({ event_type = ["OrderCreated"] }) }'),
        (
            'With publish_to = "eventbridge" every consumer needs an event_pattern',
            "Invalid for: billing.",
        ),
        compares_inputs=True,
    ),
    "event_pattern_with_sns": Case(
        'publish_to = "sns"\n  consumers = {\n'
        '    good = { filter_policy = jsonencode({ source = ["orders"] }) }\n'
        f"    billing = {{ {PATTERN} }}\n  }}",
        ('With publish_to = "sns" every consumer needs a filter_policy', "Invalid for: billing."),
        compares_inputs=True,
    ),
    "fifo_batch_size_above_10": Case(
        'publish_to = "sns_fifo"\n  consumers = {\n'
        '    good = { filter_policy = jsonencode({ source = ["orders"] }) }\n'
        '    billing = { filter_policy = jsonencode({ source = ["orders"] }), batch_size = 11,'
        " maximum_batching_window_in_seconds = 1 }\n  }",
        ("take a batch_size of at most 10", "Invalid for: billing (11)."),
        compares_inputs=True,
    ),
    "fifo_batching_window": Case(
        'publish_to = "sns_fifo"\n  consumers = {\n'
        '    good = { filter_policy = jsonencode({ source = ["orders"] }) }\n'
        '    billing = { filter_policy = jsonencode({ source = ["orders"] }),'
        " maximum_batching_window_in_seconds = 5 }\n  }",
        ("Lambda supports no batching window", "Invalid for: billing (5)."),
        compares_inputs=True,
    ),
    "fifo_parallelization_factor": Case(
        'publish_to = "sns_fifo"\n  stream_mapping = { parallelization_factor = 2 }',
        (
            'With publish_to = "sns_fifo" the stream_mapping.parallelization_factor must be 1 '
            "(got 2)",
            "keeps the order of each item only",
        ),
        name_consumers=False,
        compares_inputs=True,
    ),
    "pattern_value_not_an_array": Case(
        consumers(
            'billing = { event_pattern = jsonencode({ source = "orders", detail = '
            '{ data = { total = 42, status = ["NEW"] } } }) }'
        ),
        (
            "every field's value must be an array",
            "Invalid for: billing (source), billing (detail.data.total).",
        ),
    ),
    "function_arn": Case(
        consumers(f'billing = {{ {PATTERN}, function = {{ arn = "billing" }} }}'),
        ("function.arn must be a Lambda function ARN", 'Invalid for: billing ("billing").'),
    ),
    "function_role_name": Case(
        consumers(
            f"billing = {{ {PATTERN}, function = {{ "
            'arn = "arn:aws:lambda:eu-west-1:111122223333:function:billing", '
            'role_name = "arn:aws:iam::111122223333:role/billing" } }'
        ),
        ("function.role_name must be null or an IAM role NAME", "Invalid for: billing ("),
    ),
    "function_timeout": Case(
        consumers(f"billing = {{ {PATTERN}, function_timeout_seconds = 901 }}"),
        ("function_timeout_seconds must be", "Invalid for: billing (901)."),
    ),
    "function_memory": Case(
        consumers(f"billing = {{ {PATTERN}, function_memory_size_mb = 127 }}"),
        ("function_memory_size_mb must be", "Invalid for: billing (127)."),
    ),
    "visibility_timeout_above_sqs_maximum": Case(
        consumers(f"billing = {{ {PATTERN}, visibility_timeout_seconds = 43201 }}"),
        ("up to 43200", "Invalid for: billing (43201)."),
    ),
    "message_retention": Case(
        consumers(f"billing = {{ {PATTERN}, message_retention_seconds = 59 }}"),
        ("message_retention_seconds must be", "Invalid for: billing (59)."),
    ),
    "max_receive_count": Case(
        consumers(f"billing = {{ {PATTERN}, max_receive_count = 0 }}"),
        ("max_receive_count must be", "Invalid for: billing (0)."),
    ),
    "batch_size": Case(
        consumers(f"billing = {{ {PATTERN}, batch_size = 0 }}"),
        ("batch_size must be", "Invalid for: billing (0)."),
    ),
    "batching_window": Case(
        consumers(f"billing = {{ {PATTERN}, maximum_batching_window_in_seconds = 301 }}"),
        ("maximum_batching_window_in_seconds must be", "Invalid for: billing (301)."),
    ),
    "maximum_concurrency": Case(
        consumers(f"billing = {{ {PATTERN}, maximum_concurrency = 1 }}"),
        ("maximum_concurrency must be", "Invalid for: billing (1)."),
    ),
    "event_age": Case(
        consumers(f"billing = {{ {PATTERN}, maximum_event_age_in_seconds = 59 }}"),
        ("maximum_event_age_in_seconds must be", "Invalid for: billing (59)."),
    ),
    "retry_attempts": Case(
        consumers(f"billing = {{ {PATTERN}, maximum_retry_attempts = 186 }}"),
        ("maximum_retry_attempts must be", "Invalid for: billing (186)."),
    ),
    "table_keys_alike": Case(
        'table = { partition_key = "id", sort_key = "id" }',
        ("The table.partition_key and table.sort_key must differ",),
        name_consumers=False,
    ),
    "sort_key_named_like_an_outbox_attribute": Case(
        'table = { sort_key = "outbox_status" }',
        ("The table.sort_key must not be named like an attribute of every outbox item",),
        name_consumers=False,
    ),
    "partition_key_empty": Case(
        'table = { partition_key = "" }',
        ("The table.partition_key must be an attribute name of 1 to 255 characters",),
        name_consumers=False,
    ),
    "iam_role_path_without_slashes": Case(
        'iam_role_path = "app/outbox"',
        ('The iam_role_path must be "/" or start and end with "/"', 'got "app/outbox"'),
        name_consumers=False,
    ),
    "iam_role_name_prefix_with_a_slash": Case(
        'iam_role_name_prefix = "acme/"',
        ("The iam_role_name_prefix must be at most 32 characters", 'got "acme/"'),
        name_consumers=False,
    ),
    "vpc_subnet_not_an_id": Case(
        'vpc_config = { subnet_ids = ["subnet-0123456789abcdef0", "private-a"], '
        'security_group_ids = ["sg-0123456789abcdef0"] }',
        ("The vpc_config.subnet_ids must hold 1 to 16 subnet IDs", 'malformed: "private-a".'),
        name_consumers=False,
    ),
    # Terraform's object conversion would drop these attributes without a word.
    "misspelt_consumer_attribute": Case(
        consumers(f"billing = {{ {PATTERN}, batch_sise = 5 }}"),
        ('Unknown consumer attribute: consumers["billing"].batch_sise.', "batch_size"),
    ),
    "misspelt_consumer_function_attribute": Case(
        consumers(
            f"billing = {{ {PATTERN}, function = {{ "
            'arn = "arn:aws:lambda:eu-west-1:111122223333:function:billing", '
            'rol_name = "billing" } }'
        ),
        (
            'Unknown consumer attribute: consumers["billing"].function.rol_name.',
            "its function takes arn, role_name, uses_toolkit.",
        ),
    ),
    "misspelt_stream_mapping_attribute": Case(
        "stream_mapping = { batch_sise = 5 }",
        ("Unknown attribute stream_mapping.batch_sise: the stream_mapping takes", "batch_size"),
        name_consumers=False,
    ),
    "misspelt_alarms_attribute": Case(
        'alarms = { action = ["arn:aws:sns:eu-west-1:111122223333:oncall"] }',
        ("Unknown attribute alarms.action: the alarms takes", "actions"),
        name_consumers=False,
    ),
    "misspelt_table_attribute": Case(
        'table = { partition_kye = "id" }',
        ("Unknown attribute table.partition_kye: the table takes", "partition_key"),
        name_consumers=False,
    ),
    "misspelt_sweeper_attribute": Case(
        "sweeper = { max_item = 10 }",
        ("Unknown attribute sweeper.max_item: the sweeper takes", "max_items"),
        name_consumers=False,
    ),
    "misspelt_idempotency_table_attribute": Case(
        "idempotency_table = { deletion_protection = true }",
        (
            "Unknown attribute idempotency_table.deletion_protection: the idempotency_table "
            "takes deletion_protection_enabled.",
        ),
        name_consumers=False,
    ),
    "misspelt_event_archive_attribute": Case(
        "event_archive = { retention_day = 30 }",
        (
            "Unknown attribute event_archive.retention_day: the event_archive takes",
            "retention_days",
        ),
        name_consumers=False,
    ),
    "alarm_action_not_an_arn": Case(
        'alarms = { actions = ["arn:aws:sns:eu-west-1:111122223333:ok", "oncall"] }',
        ('Malformed ARN in alarms.actions or alarms.ok_actions: "oncall".',),
        name_consumers=False,
    ),
}


def root_module(cases: dict[str, Case], provider: str = "") -> str:
    blocks = [provider]
    for name, case in cases.items():
        arguments = (
            case.arguments
            if case.arguments.startswith("name =")
            else f'name = "orders"\n  {case.arguments}'
        )
        blocks.append(
            f'module "{name}" {{\n  source = "{REPO_ROOT}"\n\n'
            f'  powertools_layer_arn = ""\n  {arguments}\n}}\n'
        )
    return "\n".join(blocks)


def emulator_provider(endpoint_url: str) -> str:
    endpoints = "\n".join(f'    {service} = "{endpoint_url}"' for service in ("iam", "sts"))
    return f"""\
provider "aws" {{
  region                      = "eu-west-1"
  access_key                  = "test"
  secret_key                  = "test"
  skip_credentials_validation = true
  skip_metadata_api_check     = true
  skip_region_validation      = true

  endpoints {{
{endpoints}
  }}
}}
"""


def by_case(cases: dict[str, Case], diagnostics: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Each diagnostic under the case whose module block it points at."""
    result: dict[str, list[dict[str, Any]]] = {name: [] for name in cases}
    for diagnostic in diagnostics:
        context = diagnostic.get("snippet", {}).get("context") or ""
        case = context.removeprefix('module "').removesuffix('"')
        # A check block's warning points into the module's own files.
        in_module = re.search(
            r"/\.terraform/modules/([^/]+)/", diagnostic.get("range", {}).get("filename", "")
        )
        if in_module:
            case = in_module.group(1)
        assert case in result, f"a diagnostic outside the cases: {json.dumps(diagnostic, indent=2)}"
        result[case].append(diagnostic)
    return result


def init(workdir: Path, text: str, tf_env: dict[str, str]) -> dict[str, str]:
    (workdir / "main.tf").write_text(text)
    env = {**tf_env, "TF_DATA_DIR": str(workdir / ".terraform")}
    result = run_terraform(
        ["init", "-backend=false", "-input=false", "-no-color"], cwd=workdir, env=env
    )
    assert result.returncode == 0, describe(result)
    return env


VALIDATE_CASES = {name: case for name, case in CASES.items() if not case.compares_inputs}
PLAN_CASES = {name: case for name, case in CASES.items() if case.compares_inputs}


@pytest.fixture(scope="module")
def validate_diagnostics(
    tf_env: dict[str, str],
    aws_provider_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, list[dict[str, Any]]]:
    workdir = tmp_path_factory.mktemp("validate-messages")
    env = init(workdir, root_module(VALIDATE_CASES), tf_env)

    validate = run_terraform(
        ["validate", "-json", "-no-color"], cwd=workdir, env={**env, **aws_provider_env}
    )

    return by_case(VALIDATE_CASES, json.loads(validate.stdout)["diagnostics"])


@pytest.fixture(scope="module")
def plan_diagnostics(
    tf_env: dict[str, str], moto_server: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, list[dict[str, Any]]]:
    workdir = tmp_path_factory.mktemp("plan-messages")
    cases = PLAN_CASES | ALARM_CASES
    env = init(workdir, root_module(cases, emulator_provider(moto_server)), tf_env)

    with shared_aws_provider(
        workdir / ".terraform", workdir / "provider.log", cwd=workdir, env=env
    ) as reattach:
        plan = run_terraform(
            ["plan", "-json", "-input=false", "-no-color"], cwd=workdir, env={**env, **reattach}
        )

    lines = [json.loads(line) for line in plan.stdout.splitlines() if line.startswith("{")]
    assert plan.returncode == 1, describe(plan)
    return by_case(cases, [line["diagnostic"] for line in lines if line["type"] == "diagnostic"])


# Valid inputs planned beside the cases: the only diagnostic either may get is
# the warning of the alarms' check block, when no one is notified.
ALARM_CASES = {
    "alarms_without_actions": Case("", ()),
    "alarms_with_actions": Case(
        'alarms = { actions = ["arn:aws:sns:eu-west-1:123456789012:oncall"] }', ()
    ),
}


def test_the_cases_root_module_has_one_block_per_case() -> None:
    """Guards the fixtures' mapping: every case becomes one module block."""
    text = root_module(CASES)

    assert text.count("module ") == len(CASES) and all(f'module "{c}"' in text for c in CASES)


def assert_refused_with(case: str, diagnostics: list[dict[str, Any]]) -> None:
    diagnostics = [d for d in diagnostics if d["severity"] == "error"]
    details = "\n".join(d["detail"] for d in diagnostics)

    assert diagnostics, f"the {case} case was accepted"
    assert {d["summary"] for d in diagnostics} == {"Invalid value for variable"}, details
    for expected in CASES[case].expected:
        assert expected in details, details
    if CASES[case].name_consumers:
        assert "good" not in details, "the message names a consumer that is fine"


@pytest.mark.parametrize("case", sorted(VALIDATE_CASES))
def test_validate_refuses_the_input_with_the_modules_message(
    case: str, validate_diagnostics: dict[str, list[dict[str, Any]]]
) -> None:
    assert_refused_with(case, validate_diagnostics[case])


@pytest.mark.parametrize("case", sorted(PLAN_CASES))
def test_plan_refuses_inputs_that_disagree_with_the_modules_message(
    case: str, plan_diagnostics: dict[str, list[dict[str, Any]]]
) -> None:
    assert_refused_with(case, plan_diagnostics[case])


def test_plan_warns_when_no_one_is_notified_of_the_alarms(
    plan_diagnostics: dict[str, list[dict[str, Any]]],
) -> None:
    (warning,) = plan_diagnostics["alarms_without_actions"]

    assert (warning["severity"], warning["summary"]) == ("warning", "Check block assertion failed")
    assert warning["detail"].startswith("alarms.actions is empty:"), warning["detail"]


def test_plan_of_alarms_with_actions_says_nothing(
    plan_diagnostics: dict[str, list[dict[str, Any]]],
) -> None:
    assert plan_diagnostics["alarms_with_actions"] == []
