"""Make the consumer toolkit and Powertools idempotency read the virtual clock.

An idempotency record expires ``expires_after_seconds`` after it was written,
and the toolkit skips a replay older than that window. Crossing such windows in
a test (days, weeks) needs their clocks moved, not waited for: within
:func:`toolkit_follows`, Powertools' idempotency (which reads
``datetime.datetime.now()`` through the ``dt`` module alias of its
``aws_lambda_powertools.utilities.idempotency`` modules, Powertools 3.x,
internal API) and the toolkit's ``time.time()`` read ``clock``. The records
they write carry virtual timestamps too, so the store (moto) sees the same
time. Nothing else in the process is affected.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import types
from collections.abc import Iterator
from unittest import mock

from .clock import VirtualClock

__all__ = ["toolkit_follows"]

_POWERTOOLS_CLOCKS = (
    "aws_lambda_powertools.utilities.idempotency.base.dt",
    "aws_lambda_powertools.utilities.idempotency.persistence.base.dt",
    "aws_lambda_powertools.utilities.idempotency.persistence.dynamodb.dt",
    "aws_lambda_powertools.utilities.idempotency.persistence.datarecord.dt",
)
_TOOLKIT_TIME = "dynamodb_outbox.consumer._processing.time"


def _datetime_reading(clock: VirtualClock) -> type[_dt.datetime]:
    class VirtualDatetime(_dt.datetime):
        @classmethod
        def now(cls, tz: _dt.tzinfo | None = None) -> VirtualDatetime:
            moment = _dt.datetime.fromtimestamp(clock.now(), tz)
            return cls.fromtimestamp(moment.timestamp(), tz)

    return VirtualDatetime


@contextlib.contextmanager
def toolkit_follows(clock: VirtualClock) -> Iterator[VirtualClock]:
    """Within the block, idempotency expiry and replay age are measured on ``clock``."""
    shim = types.SimpleNamespace(
        datetime=_datetime_reading(clock),
        timedelta=_dt.timedelta,
        date=_dt.date,
        time=_dt.time,
        timezone=_dt.timezone,
    )
    with contextlib.ExitStack() as stack:
        for target in _POWERTOOLS_CLOCKS:
            stack.enter_context(mock.patch(target, shim))
        stack.enter_context(mock.patch(_TOOLKIT_TIME, types.SimpleNamespace(time=clock.now)))
        yield clock
