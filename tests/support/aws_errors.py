"""The errors botocore raises, built for fault injection."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError


def client_error(
    code: str, operation: str, message: str | None = None, **response: Any
) -> ClientError:
    """The ``ClientError`` AWS's answer ``code`` to ``operation`` raises.

    ``response`` adds fields beside ``Error`` (``CancellationReasons``...).
    """
    error = {"Code": code, "Message": f"injected {code}" if message is None else message}
    return ClientError({"Error": error, **response}, operation)  # type: ignore[arg-type]
