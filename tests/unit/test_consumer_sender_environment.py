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

REPO_ROOT = Path(__file__).resolve().parents[2]


def _names_in(file: str, local: str) -> set[str]:
    text = (REPO_ROOT / file).read_text(encoding="utf-8")
    start = text.index(f"{local} = ")
    end = text.index("\n  )\n" if file == "sns.tf" else "\n  } : {}\n", start)
    return set(re.findall(r"^\s+(OUTBOX_[A-Z_]+)\s*=", text[start:end], re.MULTILINE))


def _terraform_names() -> set[str]:
    # sns.tf's local merges in the forwarding regions' (multi-region) from their file.
    return _names_in("sns.tf", "consumer_sender_environment") | _names_in(
        "multi_region_forwarding.tf", "consumer_forwarding_environment"
    )


def test_terraform_sets_every_sender_variable_the_toolkit_reads_and_no_other() -> None:
    assert _terraform_names() == set(CONSUMER_SENDER_ENVIRONMENT)
