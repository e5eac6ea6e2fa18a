"""The service's deployment on moto: the kit's stack, with the service's table keys."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from dynamodb_outbox.table_keys import TableKeys
from dynamodb_outbox.testing import OutboxStack


@pytest.fixture
def stack(outbox_aws: None) -> Iterator[OutboxStack]:
    with OutboxStack("shop", table_keys=TableKeys("pk", "sk")) as stack:
        os.environ["ORDERS_TABLE"] = stack.names.table  # outbox_aws restores the environment
        yield stack
