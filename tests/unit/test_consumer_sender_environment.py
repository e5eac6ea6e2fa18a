"""The consumer environment Terraform sets is the one the toolkit reads.

settings.py holds the names (CONSUMER_SENDER_ENVIRONMENT); sns.tf builds
``consumer_sender_environment`` for the reference consumers and the
``consumer_environment`` output. A name renamed on one side only would leave
consumers checking no sender, silently.
"""

from __future__ import annotations

import re
from pathlib import Path

from dynamodb_outbox.settings import CONSUMER_SENDER_ENVIRONMENT

SNS_TF = Path(__file__).resolve().parents[2] / "sns.tf"


def _terraform_names() -> set[str]:
    text = SNS_TF.read_text(encoding="utf-8")
    start = text.index("consumer_sender_environment = ")
    end = text.index("\n  }\n", start)  # the local's second map closes the expression
    return set(re.findall(r"^\s+(OUTBOX_[A-Z_]+)\s*=", text[start:end], re.MULTILINE))


def test_terraform_sets_every_sender_variable_the_toolkit_reads_and_no_other() -> None:
    assert _terraform_names() == set(CONSUMER_SENDER_ENVIRONMENT)
