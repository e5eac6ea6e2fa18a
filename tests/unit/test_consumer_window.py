"""The toolkit keeps event ids for the window the module derived, never less.

``OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS`` (the module's consumer_environment
or consumers output) is the floor: an explicit shorter window is refused, both
in OutboxConsumer and in process_sqs_batch; a function on Lambda without the
variable is told, once, that it runs on the 7-day default.
"""

from __future__ import annotations

from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency.persistence.base import (
    BasePersistenceLayer,
    DataRecord,
)

from dynamodb_outbox import consumer as toolkit
from dynamodb_outbox.consumer import _idempotency, _processing
from dynamodb_outbox.settings import ConfigurationError

DAY = 86400
WINDOW = "OUTBOX_IDEMPOTENCY_EXPIRES_AFTER_SECONDS"


class _Store(BasePersistenceLayer):
    def _get_record(self, idempotency_key: str) -> DataRecord:
        raise NotImplementedError

    def _put_record(self, data_record: DataRecord) -> None:
        raise NotImplementedError

    def _update_record(self, data_record: DataRecord) -> None:
        raise NotImplementedError

    def _delete_record(self, data_record: DataRecord) -> None:
        raise NotImplementedError


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (WINDOW, "AWS_LAMBDA_FUNCTION_NAME", "OUTBOX_PUBLISH_TO"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_idempotency, "_warned_without_window", False, raising=False)


class _Recorder:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warning(self, message: str, *args: Any, **kwargs: Any) -> None:
        self.warnings.append(message)


def test_an_explicit_window_shorter_than_the_module_derived_one_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(WINDOW, str(20 * DAY))
    monkeypatch.setenv("OUTBOX_CONSUMER_NAME", "billing")

    with pytest.raises(ConfigurationError, match=rf"expires_after_seconds=3600 .*{WINDOW}=1728000"):
        toolkit.OutboxConsumer(persistence_store=_Store(), expires_after_seconds=3600)


def test_an_explicit_window_longer_than_the_module_derived_one_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(WINDOW, str(20 * DAY))
    monkeypatch.setenv("OUTBOX_CONSUMER_NAME", "billing")

    consumer = toolkit.OutboxConsumer(persistence_store=_Store(), expires_after_seconds=30 * DAY)

    assert consumer.expires_after_seconds == 30 * DAY


def test_process_sqs_batch_refuses_a_window_shorter_than_the_environment_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(WINDOW, str(42 * DAY))

    with pytest.raises(ConfigurationError, match=WINDOW):
        toolkit.process_sqs_batch(
            {"Records": []},
            lambda envelope: None,
            persistence_store=_Store(),
            consumer_name="billing",
            expires_after_seconds=7 * DAY,
        )


def test_process_sqs_batch_keeps_records_for_the_environment_s_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(WINDOW, str(42 * DAY))
    seen: list[int] = []
    real = _processing.IdempotencyConfig

    def config(**kwargs: Any) -> Any:
        seen.append(kwargs["expires_after_seconds"])
        return real(**kwargs)

    monkeypatch.setattr(_processing, "IdempotencyConfig", config)

    toolkit.process_sqs_batch(
        {"Records": []}, lambda envelope: None, persistence_store=_Store(), consumer_name="billing"
    )

    assert seen == [42 * DAY]


def test_on_lambda_without_the_variable_the_default_is_warned_about_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "billing")
    log = _Recorder()

    first = _idempotency.resolve_expires_after_seconds(None, logger=log)  # type: ignore[arg-type]
    second = _idempotency.resolve_expires_after_seconds(None, logger=log)  # type: ignore[arg-type]

    assert first == second == _idempotency.DEFAULT_EXPIRES_AFTER_SECONDS
    assert len(log.warnings) == 1
    assert WINDOW in log.warnings[0] and "consumer_environment" in log.warnings[0]


def test_off_lambda_without_the_variable_the_default_is_used_quietly() -> None:
    log = _Recorder()

    assert _idempotency.resolve_expires_after_seconds(None, logger=log) == 7 * DAY  # type: ignore[arg-type]
    assert log.warnings == []
