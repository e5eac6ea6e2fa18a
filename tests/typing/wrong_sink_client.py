"""Must NOT type-check: an SNS client is not the EventBridge client the sink needs."""

from __future__ import annotations

import boto3

from dynamodb_outbox.sinks import EventBridgeSink

sink = EventBridgeSink(boto3.client("sns"), "orders-bus")  # expected: arg-type
