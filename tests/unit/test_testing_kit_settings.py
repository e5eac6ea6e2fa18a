"""The testing kit's copy of the module's defaults is the module's (variables.tf)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from dynamodb_outbox.testing.module_settings import (
    ConsumerSettings,
    ModuleNames,
    PublisherSettings,
)

REPO = Path(__file__).resolve().parents[2]
VARIABLES = REPO / "variables.tf"


def variable_block(name: str) -> str:
    text = VARIABLES.read_text(encoding="utf-8")
    start = text.index(f'variable "{name}" {{')
    return text[start : text.index("\nvariable ", start + 1)]


def optional_defaults(block: str) -> dict[str, str | None]:
    """``attribute = optional(type[, default])`` lines: the default's text, None without one."""
    found: dict[str, str | None] = {}
    for name, rest in re.findall(r"^\s*(\w+)\s*=\s*optional\((.*)\)\s*$", block, re.MULTILINE):
        parts = rest.split(",", 1)
        found[name] = parts[1].strip() if len(parts) == 2 else None
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
    module = optional_defaults(variable_block(variable))
    if variable == "stream_mapping":
        module["timeout_seconds"] = optional_defaults(variable_block("publisher"))[
            "timeout_seconds"
        ]
    for name, default in kit_defaults(settings).items():
        assert name in module, f"{name} is not an input of var.{variable}"
        expected = None if module[name] is None else int(str(module[name]))
        assert default == expected, f"var.{variable}.{name}: module {expected}, kit {default}"


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
        r'consumer_names = \{ for key in keys\(var.consumers\) : key => "([^"]*)"', main
    )
    assert consumer
    assert names.consumer("billing") == consumer.group(1).replace("${var.name}", "orders").replace(
        "${key}", "billing"
    )
