"""Errors as publishing tells them apart: never sendable, refused as malformed, or retried.

And how an error or a reason is written down (:func:`describe_error`, :data:`MAX_REASON_CHARS`).
"""

from __future__ import annotations

from typing import Final

from botocore.exceptions import (
    ClientError,
    ParamValidationError,
)
from botocore.exceptions import (
    ValidationError as BotocoreValidationError,
)

__all__ = ["MAX_REASON_CHARS", "describe_error"]

# Raised by botocore while it builds a request from our parameters, before
# anything is sent: the entries are at fault, not AWS.
_REQUEST_BUILD_ERRORS: Final = (ParamValidationError, BotocoreValidationError)
# What botocore's serializer raises, with validation off, on a request no model
# shape fits (a key member no attribute type has: KeyError).
_SERIALIZER_ERRORS: Final = (KeyError, TypeError, ValueError, AttributeError)
# The codes with which AWS refuses a whole sink call as malformed (the service
# models: PutEvents' ValidationException; PublishBatch's InvalidParameter,
# ParameterValueInvalid and ValidationException, with InvalidParameterValue as
# SNS's documentation spells it). The handlers' sink clients skip botocore's
# validation, so an entry a sink rule lets through by mistake is refused here
# rather than by ParamValidationError: both are isolated alike, the call split
# until the entry AWS refuses is alone and quarantined, its neighbours published.
_REFUSED_CALL_CODES: Final = frozenset(
    {"ValidationException", "InvalidParameter", "ParameterValueInvalid", "InvalidParameterValue"}
)


MAX_REASON_CHARS: Final = 500


def describe_error(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _never_sendable(exc: Exception) -> bool:
    """Whether a request failed in a way no retry of it can change.

    Not built (botocore's validation, or with it off the serializer's KeyError,
    TypeError, ValueError or AttributeError on a member no type has), or refused
    by AWS as malformed. Any other exception is not the request's fault (a
    process dying mid-call, a bug): it propagates and fails the invocation, so
    the batch is retried, as before the client skipped validation.
    """
    if isinstance(exc, ClientError):
        return _error_code(exc) == "ValidationException"
    return isinstance(exc, _REQUEST_BUILD_ERRORS + _SERIALIZER_ERRORS)


def _error_code(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or type(exc).__name__)
    return type(exc).__name__
