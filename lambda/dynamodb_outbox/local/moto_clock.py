"""Make moto stamp DynamoDB stream records with the virtual clock (in-process moto only).

moto writes ``ApproximateCreationDateTime`` from the wall clock. Record age
(``MaximumRecordAgeInSeconds``) and the 24-hour retention are measured from
that stamp, so a test that advances the virtual clock between two writes needs
the second record stamped at the *virtual* time of its write. This patches the
``utcnow`` that ``moto.dynamodb.models.table`` (moto 5.2.5, internal API)
imported for that purpose; it also moves the table's and the stream's creation
stamps, which nothing here reads. It cannot reach a moto *server*: there, the
runtime measures ages from wall-clock stamps, which agree with a virtual clock
created just before the writes and never advanced in between.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from unittest import mock

from .clock import VirtualClock

__all__ = ["stream_records_follow"]

_MOTO_TABLE_UTCNOW = "moto.dynamodb.models.table.utcnow"


@contextmanager
def stream_records_follow(clock: VirtualClock) -> Iterator[VirtualClock]:
    """Within the block, stream records written through in-process moto carry ``clock``'s time."""

    def virtual_utcnow() -> datetime:
        # moto works with naive UTC datetimes.
        return clock.now_datetime().replace(tzinfo=None)

    with mock.patch(_MOTO_TABLE_UTCNOW, virtual_utcnow):
        yield clock
