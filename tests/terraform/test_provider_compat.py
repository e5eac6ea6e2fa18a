"""python3.14 on a hashicorp/aws 5.x provider: the plan fails with the module's message.

5.x's runtime list ends at python3.13 and its refusal is three dumps of that
list; the module's precondition says which provider the runtime needs. The
plan runs for real (the mirror's 5.x provider) against the session's moto
server, since the mock provider of ``terraform test`` cannot plan past the
provider's own runtime validation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.terraform.provider_reattach import shared_aws_provider
from tests.terraform.tfhelpers import REPO_ROOT, describe, run_terraform

pytestmark = pytest.mark.terraform

SERVICES = ("cloudwatch", "dynamodb", "events", "iam", "lambda", "logs", "scheduler", "sns")
SERVICES += ("sqs", "sts")


def _root_module(moto_server: str, runtime: str) -> str:
    endpoints = "\n".join(f'    {service} = "{moto_server}"' for service in SERVICES)
    return f"""
provider "aws" {{
  region                      = "eu-west-1"
  access_key                  = "test"
  secret_key                  = "test"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  skip_region_validation      = true

  endpoints {{
{endpoints}
  }}
}}

module "outbox" {{
  source               = "{REPO_ROOT}"
  name                 = "runtime-check"
  powertools_layer_arn = ""
  lambda_runtime       = "{runtime}"
}}
"""


def test_python3_14_on_provider_5x_names_the_provider_it_needs(
    tf_env: dict[str, str], moto_server: str, tmp_path: Path
) -> None:
    (tmp_path / "main.tf").write_text(_root_module(moto_server, "python3.14"))
    env = {**tf_env, "TF_DATA_DIR": str(tmp_path / ".terraform")}
    init = run_terraform(["init", "-input=false", "-no-color"], cwd=tmp_path, env=env)
    assert init.returncode == 0, describe(init)

    with shared_aws_provider(
        tmp_path / ".terraform", tmp_path / "provider.log", cwd=tmp_path, env=env
    ) as reattach:
        plan = run_terraform(
            ["plan", "-input=false", "-no-color"], cwd=tmp_path, env={**env, **reattach}
        )

    assert plan.returncode != 0, describe(plan)
    message = " ".join(plan.stderr.split())
    assert 'lambda_runtime = "python3.14" needs hashicorp/aws 6.20 or newer' in message, describe(
        plan
    )
