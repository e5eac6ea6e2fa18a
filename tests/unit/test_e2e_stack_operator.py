"""The e2e stack admits the test runner as an operator.

tests/e2e/test_e2e_aws.py sends a poison message to the audit consumer's queue
with the ambient credentials; the queue's policy denies sqs:SendMessage to
every IAM principal outside operator_principal_arns (consumers.tf). The stack
must therefore list the runner's own role (or user), as the session's issuer:
an assumed role's aws:PrincipalArn is its role ARN, not the session ARN
data.aws_caller_identity returns. tests/e2e runs only on real AWS; this pins
the wiring offline (test_terraform_static.py validates the stack).
"""

from __future__ import annotations

import re
from pathlib import Path

MAIN_TF = Path(__file__).resolve().parents[1] / "e2e" / "stack" / "main.tf"


def _block(text: str, header: str) -> str:
    start = text.index(header)
    return text[start : text.index("\n}\n", start)]


def test_the_e2e_stack_lists_the_runners_role_in_operator_principal_arns() -> None:
    text = MAIN_TF.read_text(encoding="utf-8")
    module = _block(text, 'module "outbox" {')
    operators = re.search(r"^  operator_principal_arns\s*=\s*\[(.*)\]", module, re.MULTILINE)
    assert operators is not None, "module.outbox sets no operator_principal_arns"
    assert re.fullmatch(
        r"\s*data\.aws_iam_session_context\.(\w+)\.issuer_arn\s*", operators.group(1)
    ), operators.group(1)
    session = _block(text, 'data "aws_iam_session_context" ')
    assert re.search(r"^  arn\s*=\s*data\.aws_caller_identity\.\w+\.arn\s*$", session, re.MULTILINE)
