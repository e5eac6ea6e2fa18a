"""Terraform and the AWS provider, as the tests run them, collect garbage less often.

Both are Go programs, and the suite starts them hundreds of times (every
``terraform test`` run plans the whole module; every plan starts the 700 MB
provider and decodes its schema). At Go's default, ``GOGC=100``, about a
quarter of their CPU went to garbage collection. ``GOGC=400`` lets the heap
grow four times its live size between collections instead of once; measured
on this module (2 cores): ``validation.tftest.hcl`` 19.8 -> 13.5 s of CPU,
``consumers.tftest.hcl`` 36.8 -> 27.0 s, a no-change plan of examples/complete
8.7 -> 6.5 s, while the largest process's peak memory went from 314 to 360 MB.
Higher settings were no faster (``off`` was slower: the heap outgrew the cache).

Only the tests' environment changes, and a ``GOGC`` already set is kept.
"""

from __future__ import annotations

import os

GOGC_FOR_TESTS = "400"


def collect_go_garbage_less_often() -> None:
    """Set GOGC for every terraform (and provider) process the tests start."""
    os.environ.setdefault("GOGC", GOGC_FOR_TESTS)
