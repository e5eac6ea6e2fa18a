"""What the consumer relies on in Powertools' non-public ``IdempotencyHandler``.

``dynamodb_outbox.consumer`` runs each SQS record through
``aws_lambda_powertools.utilities.idempotency.base.IdempotencyHandler`` (why, in
docs/decisions.md: "The consumer drives Powertools' IdempotencyHandler itself").
That class is not part of Powertools' public API, so an upgrade may change it
without notice. These tests pin each thing the consumer uses; a failure names the
installed Powertools version and what changed, so the upgrade is reviewed
instead of silently turning duplicates into double effects.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.shared.version import VERSION as POWERTOOLS_VERSION
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
)
from aws_lambda_powertools.utilities.idempotency.base import IdempotencyHandler
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
)
from moto import mock_aws

from dynamodb_outbox.consumer._idempotency import IDEMPOTENCY_EVENT_KEY
from tests.functional.consumer_fixtures import idempotency_records
from tests.support.moto_tables import create_idempotency_table

# The consumer registers the Lambda context; these direct calls have none.
pytestmark = pytest.mark.filterwarnings("ignore:Couldn't determine the remaining time left")

REGION = "eu-west-1"
TABLE = "powertools-contract"
KEY_PREFIX = "idempotency#contract-test"

#: The keyword arguments dynamodb_outbox.consumer._idempotency.process_envelope passes.
CONSUMER_INIT_ARGUMENTS = (
    "function",
    "function_payload",
    "config",
    "persistence_store",
    "key_prefix",
    "function_args",
    "function_kwargs",
)


def _changed(what: str) -> str:
    return (
        f"aws-lambda-powertools {POWERTOOLS_VERSION} changed {what}, which "
        'dynamodb_outbox.consumer relies on (see docs/decisions.md, "The consumer drives '
        "Powertools' IdempotencyHandler itself\"): review the consumer before upgrading"
    )


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[DynamoDBPersistenceLayer]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        create_idempotency_table(client, TABLE)
        layer = DynamoDBPersistenceLayer(table_name=TABLE, boto3_client=client)
        layer.configure(
            config=IdempotencyConfig(event_key_jmespath=IDEMPOTENCY_EVENT_KEY),
            key_prefix=KEY_PREFIX,
        )
        yield layer


def _handle(store: DynamoDBPersistenceLayer, function: Callable[[], object]) -> object:
    """The call the consumer makes, argument for argument."""
    return IdempotencyHandler(
        function=function,
        function_payload={IDEMPOTENCY_EVENT_KEY: "01JABCDEFGHJKMNPQRSTVWXYZ0"},
        config=IdempotencyConfig(event_key_jmespath=IDEMPOTENCY_EVENT_KEY),
        persistence_store=store,
        key_prefix=KEY_PREFIX,
        function_args=(),
        function_kwargs={},
    ).handle()


def test_the_constructor_takes_the_keyword_arguments_the_consumer_passes() -> None:
    parameters = inspect.signature(IdempotencyHandler.__init__).parameters
    missing = [name for name in CONSUMER_INIT_ARGUMENTS if name not in parameters]
    assert missing == [], _changed(f"IdempotencyHandler.__init__ (no parameter {missing})")
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    not_keyword = [n for n in CONSUMER_INIT_ARGUMENTS if parameters[n].kind not in keyword]
    assert not_keyword == [], _changed(f"IdempotencyHandler.__init__ ({not_keyword} by keyword)")
    required = [
        name
        for name, parameter in parameters.items()
        if name != "self"
        and parameter.default is inspect.Parameter.empty
        and parameter.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        and name not in CONSUMER_INIT_ARGUMENTS
    ]
    assert required == [], _changed(f"IdempotencyHandler.__init__ (new required {required})")


def test_handle_needs_no_argument() -> None:
    parameters = list(inspect.signature(IdempotencyHandler.handle).parameters.values())[1:]
    required = [p.name for p in parameters if p.default is inspect.Parameter.empty]
    assert required == [], _changed(f"IdempotencyHandler.handle (now requires {required})")


def test_a_new_key_runs_the_function_and_a_completed_one_does_not(
    store: DynamoDBPersistenceLayer,
) -> None:
    runs: list[int] = []

    _handle(store, lambda: runs.append(1))
    _handle(store, lambda: runs.append(2))

    assert runs == [1], _changed("handle(): a completed key must skip the function")


def test_a_failing_function_raises_its_own_error_and_leaves_no_record(
    store: DynamoDBPersistenceLayer,
) -> None:
    class Boom(Exception):
        pass

    def fail() -> None:
        raise Boom("processing failed")

    with pytest.raises(Exception) as raised:
        _handle(store, fail)

    assert isinstance(raised.value, Boom), _changed(
        f"handle(): the function's exception must propagate as is, got {raised.value!r}"
    )
    client: Any = store.client
    assert idempotency_records(client, TABLE) == [], _changed(
        "handle(): the in-progress record must be deleted when the function raises "
        "(the redelivered message must run again)"
    )
    runs: list[int] = []
    _handle(store, lambda: runs.append(1))
    assert runs == [1], _changed("handle(): a key whose function failed must run again")


def test_a_key_in_progress_elsewhere_raises_already_in_progress(
    store: DynamoDBPersistenceLayer,
) -> None:
    seen: list[BaseException] = []

    def concurrent_duplicate() -> None:
        # While this run holds the key, a second delivery of the same event arrives.
        try:
            _handle(store, lambda: None)
        except BaseException as exc:  # any error is recorded and checked below
            seen.append(exc)

    _handle(store, concurrent_duplicate)

    assert len(seen) == 1 and isinstance(seen[0], IdempotencyAlreadyInProgressError), _changed(
        f"handle(): a key in progress must raise IdempotencyAlreadyInProgressError, got {seen!r}"
    )
