"""Must NOT type-check: a Table resource is not the low-level client the writer needs."""

from __future__ import annotations

import boto3

from dynamodb_outbox import OutboxWriter

table = boto3.resource("dynamodb").Table("orders")
writer = OutboxWriter("orders", table)  # expected: arg-type
