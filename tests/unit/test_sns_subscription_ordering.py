"""A new consumer's subscription is created after the topic policy that admits it.

The topic policy's SubscribeOnlyOutboxQueues Deny lists the consumer queues as
the only endpoints (sns.tf). Adding a consumer to a running SNS stack changes
the policy and creates the subscription in the same apply; without an explicit
dependency Terraform may Subscribe first, while the old policy still denies the
new queue. Nothing references the policy from the subscription, so the order
rests on ``depends_on`` alone: this pins it.
"""

from __future__ import annotations

import re
from pathlib import Path

SNS_TF = Path(__file__).resolve().parents[2] / "sns.tf"


def _resource_block(text: str, resource_type: str, name: str) -> str:
    start = text.index(f'resource "{resource_type}" "{name}" {{')
    end = text.index("\n}\n", start)  # a top-level block closes at column 0
    return text[start:end]


def _depends_on(block: str) -> set[str]:
    match = re.search(r"^  depends_on\s*=\s*\[([^\]]*)\]", block, re.MULTILINE)
    if match is None:
        return set()
    return {item.strip() for item in match.group(1).split(",") if item.strip()}


def test_the_consumer_subscription_depends_on_the_topic_policy() -> None:
    block = _resource_block(
        SNS_TF.read_text(encoding="utf-8"), "aws_sns_topic_subscription", "consumer"
    )
    assert "aws_sns_topic_policy.this" in _depends_on(block)
