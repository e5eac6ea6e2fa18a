"""The testing kit's copy of the module's defaults is the module's (variables.tf)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from dynamodb_outbox.testing.module_settings import (
    ARCHIVE_RETENTION_DAYS,
    SWEEPER_REPUBLISH_SECONDS,
    UNMODELLED_CONSUMER_INPUTS,
    ConsumerSettings,
    ModuleNames,
    PublisherSettings,
    idempotency_window,
)

REPO = Path(__file__).resolve().parents[2]
VARIABLES = REPO / "variables.tf"


def variable_block(name: str) -> str:
    text = VARIABLES.read_text(encoding="utf-8")
    start = text.index(f'variable "{name}" {{')
    return text[start : text.index("\nvariable ", start + 1)]


def local_defaults(block: str) -> dict[str, str | None]:
    """The ``<input>_defaults = { attribute = default }`` local after an object input
    (consumers, stream_mapping, publisher, ...): the default's text, None for a (typed) null."""
    local = re.search(r"^  (\w+)_defaults = \{\n(.*?)^  \}", block, re.MULTILINE | re.DOTALL)
    assert local is not None, "no <input>_defaults local after the variable"
    found: dict[str, str | None] = {}
    for name, value in re.findall(r"^ {4}(\w+)\s*=\s*(.+?)\s*$", local.group(2), re.MULTILINE):
        found[name] = None if value in ("null", "tonumber(null)", "tostring(null)") else value
    return found


def kit_defaults(settings: object) -> dict[str, object]:
    return {
        field.name: field.default
        for field in dataclasses.fields(settings)  # type: ignore[arg-type]
        if field.name not in ("event_pattern", "filter_policy")
    }


@pytest.mark.parametrize(
    ("settings", "variable"),
    [(ConsumerSettings, "consumers"), (PublisherSettings, "stream_mapping")],
    ids=["consumers", "stream_mapping"],
)
def test_the_kits_defaults_are_the_modules(settings: type, variable: str) -> None:
    module = local_defaults(variable_block(variable))
    if variable == "stream_mapping":
        module["timeout_seconds"] = local_defaults(variable_block("publisher"))["timeout_seconds"]
    for name, default in kit_defaults(settings).items():
        assert name in module, f"{name} is not an input of var.{variable}"
        expected = None if module[name] is None else int(str(module[name]))
        assert default == expected, f"var.{variable}.{name}: module {expected}, kit {default}"


def test_every_consumer_input_of_the_module_is_modelled_by_the_kit_or_listed_with_why() -> None:
    module = set(local_defaults(variable_block("consumers")))
    assert {"function", "batch_size", "retired"} <= module, module
    kit = {field.name for field in dataclasses.fields(ConsumerSettings)}

    assert module - kit == set(UNMODELLED_CONSUMER_INPUTS), (
        "var.consumers inputs neither in ConsumerSettings nor in UNMODELLED_CONSUMER_INPUTS: "
        f"{sorted(module - kit - set(UNMODELLED_CONSUMER_INPUTS))}"
    )
    assert kit - module == set(), f"kit fields the module has no input for: {kit - module}"


def test_the_kits_names_are_the_modules() -> None:
    main = (REPO / "main.tf").read_text(encoding="utf-8")

    def local(name: str) -> str:
        value = re.search(rf'^\s*{name}\s*=\s*"([^"]*)"', main, re.MULTILINE)
        assert value, f"main.tf has no local {name}"
        return value.group(1).replace("${var.name}", "orders").replace("${key}", "billing")

    names = ModuleNames("orders")
    assert names.idempotency_table == local("idempotency_table_name")
    assert names.publisher == local("publisher_name")
    assert names.on_failure_queue == local("on_failure_queue_name")
    assert names.pending_index == local("pending_index_name")
    consumer = re.search(
        r'consumer_names = \{ for key in keys\(local.consumers\) : key => "([^"]*)"', main
    )
    assert consumer
    assert names.consumer("billing") == consumer.group(1).replace("${var.name}", "orders").replace(
        "${key}", "billing"
    )


@pytest.mark.parametrize(
    ("publish_to", "settings"),
    [
        ("eventbridge", ConsumerSettings()),
        ("sns", ConsumerSettings()),
        ("eventbridge", ConsumerSettings(message_retention_seconds=1_209_600)),
        ("eventbridge", ConsumerSettings(maximum_event_age_in_seconds=3_600)),
    ],
    ids=["eventbridge", "sns", "two-week-queue", "short-target-retry"],
)
def test_the_kits_idempotency_window_is_the_one_modules_windows_derives(
    publish_to: str, settings: ConsumerSettings, tmp_path: Path
) -> None:
    from tests.support.module_windows import derived_window

    derived = derived_window(
        {
            "publish_to": publish_to,
            "consumers": {
                "consumer": {
                    "message_retention_seconds": settings.message_retention_seconds,
                    "maximum_event_age_in_seconds": settings.maximum_event_age_in_seconds,
                }
            },
            "archive_retention_days": ARCHIVE_RETENTION_DAYS if publish_to == "eventbridge" else 0,
            "sweeper_republish_seconds": SWEEPER_REPUBLISH_SECONDS,
            # The kit's bus has no customer key (its DLQ is no term); default period.
            "bus_dlq_retention_seconds": 0,
            "alarm_period_seconds": 300,
        },
        tmp_path,
    )

    assert idempotency_window(publish_to, settings) == derived


def test_the_kits_default_windows_are_twenty_and_forty_two_days() -> None:
    assert idempotency_window("eventbridge", ConsumerSettings()) == 20 * 86_400
    assert idempotency_window("sns", ConsumerSettings()) == 42 * 86_400
    assert idempotency_window("sns", ConsumerSettings(idempotency_expires_after_seconds=5)) == 5
