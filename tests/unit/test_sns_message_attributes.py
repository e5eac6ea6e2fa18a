"""The SNS message attributes: the publisher's names and the module's list agree.

A consumer's ``filter_policy`` is refused at plan when it names an attribute
that is not in sns.tf's ``sns_message_attributes``; that list must be exactly
what the publisher sets, or plan would refuse a policy that works (or accept one
that matches nothing).
"""

from __future__ import annotations

import re
from pathlib import Path

from dynamodb_outbox.sinks import SNS_MESSAGE_ATTRIBUTES, OutboundEvent, SnsSink
from tests.factories import make_envelope

SNS_TF = Path(__file__).resolve().parents[2] / "sns.tf"


def module_attribute_names() -> list[str]:
    match = re.search(r"^\s*sns_message_attributes\s*=\s*\[([^\]]*)\]", SNS_TF.read_text(), re.M)
    assert match, "sns.tf no longer defines local.sns_message_attributes"
    return re.findall(r'"([^"]+)"', match.group(1))


def test_the_publisher_sets_exactly_the_declared_attributes() -> None:
    event = OutboundEvent.of(make_envelope())

    assert sorted(SnsSink.message_attributes(event)) == sorted(SNS_MESSAGE_ATTRIBUTES)


def test_the_module_checks_filter_policies_against_the_publishers_attributes() -> None:
    assert sorted(module_attribute_names()) == sorted(SNS_MESSAGE_ATTRIBUTES)
