"""A value of the wrong kind inside an object input is refused naming it.

With the typed inputs Terraform refused `event_pattern = { source = [...] }`
(an object where the module takes a JSON string) with one error naming the
consumer and the attribute (`element "billing": attribute "event_pattern":
string required`). With `type = any` the value reaches the module's
`try(x[k] == null, true) ? default : x[k]`, whose two branches Terraform cannot
unify: every validation and local reading the input fails with "Inconsistent
conditional result types", pointing into variables.tf and naming neither the
consumer nor the attribute (49 errors for one consumer's event_pattern).
docs/decisions.md accepts Terraform's words for a wrong kind, but these words
do not say which attribute is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.terraform.tfhelpers import REPO_ROOT, describe, run_terraform

pytestmark = pytest.mark.terraform

GOOD_CONSUMER = 'good = { event_pattern = jsonencode({ source = ["orders"] }) }'

# case -> (arguments, words the refusal must contain)
CASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "event_pattern_as_an_object": (
        f"consumers = {{\n    {GOOD_CONSUMER}\n"
        '    billing = { event_pattern = { source = ["orders"] } }\n  }',
        ("billing", "event_pattern"),
    ),
    "alarm_actions_as_a_string": (
        'alarms = { actions = "arn:aws:sns:eu-west-1:111122223333:oncall" }',
        ("actions",),
    ),
    "alarms_disabled_as_a_string": (
        'alarms = { disabled = "consumer_errors" }',
        ("disabled",),
    ),
}
MAX_ERRORS = 2


@pytest.fixture(scope="module")
def diagnostics(
    tf_env: dict[str, str],
    aws_provider_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, list[dict[str, Any]]]:
    workdir: Path = tmp_path_factory.mktemp("wrong-kind-messages")
    (workdir / "main.tf").write_text(
        "\n".join(
            f'module "{case}" {{\n  source = "{REPO_ROOT}"\n\n  name = "orders"\n'
            f'  powertools_layer_arn = ""\n  {arguments}\n}}\n'
            for case, (arguments, _) in CASES.items()
        )
    )
    env = {**tf_env, "TF_DATA_DIR": str(workdir / ".terraform")}
    init = run_terraform(
        ["init", "-backend=false", "-input=false", "-no-color"], cwd=workdir, env=env
    )
    assert init.returncode == 0, describe(init)

    validate = run_terraform(
        ["validate", "-json", "-no-color"], cwd=workdir, env={**env, **aws_provider_env}
    )

    result: dict[str, list[dict[str, Any]]] = {case: [] for case in CASES}
    for diagnostic in json.loads(validate.stdout)["diagnostics"]:
        if diagnostic["severity"] != "error":
            continue
        context = (diagnostic.get("snippet") or {}).get("context") or ""
        filename = diagnostic.get("range", {}).get("filename", "")
        case = (
            context.removeprefix('module "').removesuffix('"')
            if context.startswith('module "')
            else filename.split("/.terraform/modules/")[-1].split("/")[0]
        )
        assert case in result, json.dumps(diagnostic, indent=2)
        result[case].append(diagnostic)
    return result


@pytest.mark.xfail(
    strict=True,
    reason=(
        "not fixed: object inputs are typed `any` (unknown attributes are refused), so a "
        "value of the wrong kind fails in Terraform's words, which do not name the "
        "attribute; naming it needs a per-attribute type check (docs/decisions.md)"
    ),
)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_value_of_the_wrong_kind_is_refused_naming_it(
    case: str, diagnostics: dict[str, list[dict[str, Any]]]
) -> None:
    errors = diagnostics[case]
    details = "\n".join(f"{d['summary']}: {d['detail']}" for d in errors)

    assert errors, f"the {case} case was accepted"
    assert len(errors) <= MAX_ERRORS, f"{len(errors)} errors for one wrong value:\n{details}"
    for word in CASES[case][1]:
        assert word in details, details
