"""The application team's testing kit: the module's deployment on moto, in one fixture.

``pip install dynamodb-outbox[testing]`` installs moto and registers a pytest
plugin (:mod:`dynamodb_outbox.testing.plugin`) with two fixtures:

* ``outbox_aws``: moto in-process for every service, fake credentials, the
  developer's ``AWS_*`` / ``OUTBOX_*`` / ``POWERTOOLS_*`` variables and ``LOG_LEVEL`` removed and
  restored afterwards, the moto quirks handled
  (``AWS_ACCOUNT_ID_ENDPOINT_MODE=disabled``), the package's cached handlers
  reset before and after the test;
* ``outbox_stack``: an :class:`OutboxStack` named ``orders`` on it: the tables,
  the bus, the publisher's stream mapping, ready for :meth:`OutboxStack.add_consumer`.

Test tooling: it is not in the Lambda zip or the layer, like
:mod:`dynamodb_outbox.local`, which it drives.
"""

from __future__ import annotations

from dynamodb_outbox.testing.aws import ACCOUNT_ID, REGION, isolated_aws, reset_caches
from dynamodb_outbox.testing.failures import ConsumerFailure
from dynamodb_outbox.testing.module_settings import (
    ConsumerSettings,
    ModuleNames,
    PublisherSettings,
)
from dynamodb_outbox.testing.stack import ConsumerFailed, ConsumerQueue, OutboxStack

__all__ = [
    "ACCOUNT_ID",
    "REGION",
    "ConsumerFailed",
    "ConsumerFailure",
    "ConsumerQueue",
    "ConsumerSettings",
    "ModuleNames",
    "OutboxStack",
    "PublisherSettings",
    "isolated_aws",
    "reset_caches",
]
