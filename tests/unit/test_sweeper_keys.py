"""Sweeper rules that need no AWS: the ULID age boundary, shard keys, settings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from ulid import ULID

from dynamodb_outbox.outbox_item import DEFAULT_PENDING_SHARDS, pending_shard
from dynamodb_outbox.pending_index import (
    DEFAULT_PENDING_INDEX,
    pending_boundary_sk,
    shard_keys,
    ulid_time,
)
from dynamodb_outbox.publishing import PublishDependencies
from dynamodb_outbox.settings import ConfigurationError
from dynamodb_outbox.sinks import EventBridgeSink, SnsSink
from dynamodb_outbox.sweeper import (
    DEFAULT_MAX_ITEMS,
    DEFAULT_MIN_AGE_SECONDS,
    runtime_from_environment,
    sweep,
)
from dynamodb_outbox.table_keys import DEFAULT_TABLE_KEYS

MOMENT = datetime(2026, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)


def test_boundary_is_the_lowest_ulid_of_its_millisecond() -> None:
    boundary = pending_boundary_sk(MOMENT)

    assert boundary.startswith("OUTBOX#")
    ulid = ULID.from_str(boundary.removeprefix("OUTBOX#"))
    assert ulid.datetime == MOMENT
    assert ulid.bytes[6:] == bytes(10)


def test_every_ulid_made_before_the_boundary_sorts_below_it_and_none_after() -> None:
    boundary = pending_boundary_sk(MOMENT)
    just_before = MOMENT - timedelta(milliseconds=1)
    highest_before = ULID.from_bytes(
        int(just_before.timestamp() * 1000).to_bytes(6, "big") + b"\xff" * 10
    )

    for _ in range(200):
        assert "OUTBOX#" + str(ULID.from_datetime(just_before)) < boundary
        assert "OUTBOX#" + str(ULID.from_datetime(MOMENT)) >= boundary
    assert "OUTBOX#" + str(highest_before) < boundary


def test_ulid_time_reads_the_items_creation_time_and_rejects_other_keys() -> None:
    sk = "OUTBOX#" + str(ULID.from_datetime(MOMENT))

    assert ulid_time(sk) == MOMENT
    assert ulid_time("OUTBOX#not-a-ulid") is None
    assert ulid_time("ORDER") is None


@pytest.mark.parametrize("shards", [1, DEFAULT_PENDING_SHARDS, 100])
def test_shard_keys_are_exactly_the_values_writers_put_in_the_index(shards: int) -> None:
    written = {pending_shard(str(ULID()), shards) for _ in range(3000)}

    assert written == set(shard_keys(shards))


@pytest.mark.parametrize("shards", [0, 101])
def test_shard_count_out_of_range_is_refused(shards: int) -> None:
    with pytest.raises(ValueError, match="pending shards"):
        shard_keys(shards)


@pytest.mark.parametrize(
    ("argument", "value"), [("min_age_seconds", -1), ("max_items", 0)], ids=["min-age", "max-items"]
)
def test_sweep_refuses_nonsense_bounds_before_reading_anything(argument: str, value: int) -> None:
    kwargs: dict[str, Any] = {argument: value}
    with pytest.raises(ValueError, match=argument):
        sweep(
            PublishDependencies(None, "t", None, table_keys=DEFAULT_TABLE_KEYS),  # type: ignore[arg-type]
            now=MOMENT,
            **kwargs,
        )


# ----------------------------------------------------------------------- settings


def _clients(service: str) -> Any:
    return object()


def test_settings_default_to_the_module_defaults() -> None:
    runtime = runtime_from_environment(
        {"OUTBOX_TABLE_NAME": "t", "OUTBOX_EVENT_BUS_NAME": "bus"}, _clients
    )

    assert isinstance(runtime.sink, EventBridgeSink)
    assert (runtime.table_name, runtime.index_name) == ("t", DEFAULT_PENDING_INDEX)
    assert (runtime.shards, runtime.min_age_seconds, runtime.max_items) == (
        DEFAULT_PENDING_SHARDS,
        DEFAULT_MIN_AGE_SECONDS,
        DEFAULT_MAX_ITEMS,
    )
    assert (DEFAULT_PENDING_INDEX, DEFAULT_MIN_AGE_SECONDS) == ("outbox-pending", 300)


def test_settings_are_read_from_the_environment() -> None:
    runtime = runtime_from_environment(
        {
            "OUTBOX_TABLE_NAME": "t",
            "OUTBOX_PUBLISH_TO": "sns",
            "OUTBOX_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:outbox",
            "OUTBOX_PENDING_INDEX": "pending",
            "OUTBOX_PENDING_SHARDS": "8",
            "OUTBOX_SWEEPER_MIN_AGE_SECONDS": "600",
            "OUTBOX_SWEEPER_MAX_ITEMS": "50",
        },
        _clients,
    )

    assert isinstance(runtime.sink, SnsSink)
    assert (runtime.index_name, runtime.shards, runtime.min_age_seconds, runtime.max_items) == (
        "pending",
        8,
        600,
        50,
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("OUTBOX_PENDING_SHARDS", "0"),
        ("OUTBOX_PENDING_SHARDS", "16"),
        ("OUTBOX_PENDING_SHARDS", "101"),
        ("OUTBOX_PENDING_SHARDS", "eight"),
        ("OUTBOX_SWEEPER_MIN_AGE_SECONDS", "-5"),
        ("OUTBOX_SWEEPER_MIN_AGE_SECONDS", "5m"),
        ("OUTBOX_SWEEPER_MAX_ITEMS", "0"),
        ("OUTBOX_TABLE_NAME", ""),
    ],
)
def test_an_invalid_setting_is_an_error_naming_the_variable(name: str, value: str) -> None:
    environ = {"OUTBOX_TABLE_NAME": "t", "OUTBOX_EVENT_BUS_NAME": "bus", name: value}

    with pytest.raises(ConfigurationError, match=name):
        runtime_from_environment(environ, _clients)
