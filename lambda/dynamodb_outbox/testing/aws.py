"""moto in-process with the environment a test needs, and nothing of the developer's.

:func:`isolated_aws` is what the kit's ``outbox_aws`` fixture runs around a
test; usable without pytest too::

    with isolated_aws():
        ...  # boto3 clients talk to moto; os.environ is restored afterwards
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Final

__all__ = ["ACCOUNT_ID", "REGION", "isolated_aws", "reset_caches"]

REGION: Final = "us-east-1"
ACCOUNT_ID: Final = "123456789012"

#: Variables a developer's shell may hold that would reach a real account, a
#: profile's settings or an emulator, or configure the outbox's functions.
_CLEARED_PREFIXES: Final = ("AWS_", "OUTBOX_", "POWERTOOLS_", "MOTO_")
#: And the log level Powertools' Logger reads (``LOG_LEVEL``; ``POWERTOOLS_LOG_LEVEL``
#: and ``AWS_LAMBDA_LOG_LEVEL`` go with their prefixes): a shell's
#: ``LOG_LEVEL=CRITICAL`` would hide the consumers' ERROR lines.
_CLEARED_NAMES: Final = ("LOG_LEVEL",)

_FAKE_ENVIRONMENT: Final = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    # No ~/.aws/config or credentials file: a profile's region, endpoint or
    # retry mode would change what the test sees.
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    # botocore >= 1.35 builds account-based DynamoDB endpoints from the
    # credentials' account id; moto's DynamoDB Streams then answers
    # "DescribeStream ... Not yet implemented (404)".
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    "MOTO_ACCOUNT_ID": ACCOUNT_ID,
    # No EMF metrics on stdout from the publisher and consumers under test.
    "POWERTOOLS_METRICS_DISABLED": "true",
}


def reset_caches() -> None:
    """Forget what the package's handlers built from the environment and clients.

    The publisher and sweeper build their sink and clients once per execution
    environment, the reference consumer its handler; boto3 keeps a default
    session. A test that starts a new moto mock or changes the environment
    needs all of them rebuilt.
    """
    import boto3

    from dynamodb_outbox import publisher, reference_consumer, sweeper

    publisher.default_runtime.cache_clear()
    sweeper.default_runtime.cache_clear()
    reference_consumer._handler_for.cache_clear()
    boto3.DEFAULT_SESSION = None


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    try:
        cleared = [n for n in os.environ if n.startswith(_CLEARED_PREFIXES) or n in _CLEARED_NAMES]
        for name in cleared:
            del os.environ[name]
        os.environ.update(values)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def isolated_aws(extra_environment: Mapping[str, str] | None = None) -> Iterator[None]:
    """moto for every AWS service, fake credentials, the quirks handled, caches reset.

    Every ``AWS_*``, ``OUTBOX_*``, ``POWERTOOLS_*`` and ``MOTO_*`` variable, and
    ``LOG_LEVEL``, is removed for the block (so no profile, endpoint or real credentials apply),
    then the fakes are set; the whole environment is restored after it.
    """
    from moto import mock_aws

    from dynamodb_outbox.local.moto_events import deliver_event_account, forward_events_as_aws

    deliver_event_account()  # EventBridge events reach SQS with their account, as on AWS
    forward_events_as_aws()  # and keep their origin when forwarded to another region's bus
    with _environment({**_FAKE_ENVIRONMENT, **(extra_environment or {})}):
        reset_caches()
        try:
            with mock_aws():
                yield
        finally:
            reset_caches()
