"""Settings read from environment variables, with errors that name the variable.

Shared by the functions (publisher, sweeper) and ``outbox-ops``; standard library
only, so the command line stays fast to start.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["ConfigurationError", "integer_env", "required_env"]


class ConfigurationError(RuntimeError):
    """An environment variable is missing or invalid; the message names it."""


def required_env(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The non-empty value of ``name``, or :class:`ConfigurationError` naming it."""
    value = (os.environ if environ is None else environ).get(name, "")
    if not value:
        raise ConfigurationError(f"environment variable {name} must be set")
    return value


def integer_env(
    environ: Mapping[str, str], name: str, default: int, minimum: int, maximum: int | None = None
) -> int:
    """``name`` as an integer in ``minimum..maximum``, ``default`` when unset or blank."""
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise ConfigurationError(
            f"environment variable {name} must be an integer {bounds}, got {text!r}"
        )
    return value
