"""``outbox-ops``: operator commands for an outbox table (one module per command).

Imports nothing heavier than boto3 until a command publishes; see :mod:`.cli`.
"""

from __future__ import annotations

from dynamodb_outbox.ops.cli import console_main, main

__all__ = ["console_main", "main"]
