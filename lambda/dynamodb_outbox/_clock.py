"""The clocks the package reads, and the one text form of an instant it writes.

* :func:`utc_now`: the wall clock, in UTC (the publisher's and ``outbox-ops``'
  "now"; tests pass their own clock instead);
* :func:`iso_milliseconds`: RFC 3339 with milliseconds and ``Z`` for UTC,
  ``2019-11-14T00:13:49.717Z``: the envelope's default ``time``, the
  quarantine stamp, the ledger's dates and Lambda's failure records;
* :func:`remaining_seconds`: what is left of a Lambda invocation, read from its
  context.

Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["iso_milliseconds", "remaining_seconds", "utc_now"]


def utc_now() -> datetime:
    """The current time, aware, in UTC."""
    return datetime.now(UTC)


def iso_milliseconds(moment: datetime, *, keep_offset: bool = False) -> str:
    """``moment`` as RFC 3339 text with milliseconds: ``2019-11-14T00:13:49.717Z``.

    ``moment`` must be aware. It is written in UTC (``Z``), or with
    ``keep_offset`` in its own offset (``+02:00``; ``Z`` when that is zero).
    """
    if not keep_offset:
        moment = moment.astimezone(UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def remaining_seconds(context: object) -> Callable[[], float] | None:
    """The invocation's remaining seconds, read from a Lambda context on each call.

    None when ``context`` has no ``get_remaining_time_in_millis()`` (a test's or
    a caller's stand-in): no deadline is known then.
    """
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if not callable(remaining):
        return None
    return lambda: float(remaining()) / 1000
