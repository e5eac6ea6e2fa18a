"""The figures of a fault-injection campaign, summed over every example hypothesis ran,
and the hypothesis profiles that size it (see ``conftest.py``)."""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,
    "database": None,
    "print_blob": True,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
settings.register_profile("ci", max_examples=22, derandomize=True, **_COMMON)
#: ``make soak SOAK_EXAMPLES=n`` sizes the soak (about 45 events per example).
SOAK_EXAMPLES = int(os.environ.get("SOAK_EXAMPLES") or 500)
settings.register_profile("soak", max_examples=SOAK_EXAMPLES, derandomize=False, **_COMMON)
settings.register_profile("dev", max_examples=5, derandomize=True, **_COMMON)

#: Events the campaign of each profile must reach (checked after it ran).
MIN_EVENTS = {"ci": 1_000, "soak": 20 * SOAK_EXAMPLES, "dev": 0}

#: Order of the summary's figure lines (anything else is printed after them).
FIGURES = (
    "examples",
    "events committed",
    "events taken effect once (ledger == 1)",
    "events in the consumer DLQ (alarmed)",
    "events quarantined by the bus (alarmed)",
    "cancelled transactions",
    "poison outbox items quarantined",
    "poison consumer messages in DLQ",
    "stream records trimmed before publication",
    "stream batches discarded to on-failure queue",
    "events re-published by the sweeper",
    "stream record redeliveries",
    "duplicates absorbed by the consumer",
    "max deliveries of one stream record",
    "losses",
)


@dataclass
class Campaign:
    """Counters added to by each example; printed by the terminal summary hook."""

    figures: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)
    profile: str = ""
    #: Merged from xdist workers (:meth:`merge`): no one process saw the campaign's wall time.
    merged: bool = False

    def add(self, figures: Counter[str], faults: Counter[str]) -> None:
        self.figures["examples"] += 1
        self.figures.update(figures)
        self.faults.update(faults)

    def maximum(self, name: str, value: int) -> None:
        self.figures[name] = max(self.figures[name], value)

    def to_wire(self) -> dict[str, Any]:
        """The counters as plain data, for an xdist worker to hand to the controller."""
        return {
            "profile": self.profile,
            "figures": dict(self.figures),
            "faults": dict(self.faults),
        }

    def merge(self, wire: dict[str, Any]) -> None:
        """Add a worker's counters (:meth:`to_wire`); maxima stay maxima."""
        self.profile = self.profile or wire["profile"]
        for name, value in wire["figures"].items():
            if name.startswith("max "):
                self.maximum(name, value)
            else:
                self.figures[name] += value
        self.faults.update(wire["faults"])
        self.merged = True

    def lines(self) -> list[str]:
        width = max(len(name) for name in (*FIGURES, *self.faults, *self.figures)) + 2
        out = [f"fault-injection campaign (hypothesis profile {self.profile!r})"]
        names = [n for n in FIGURES if n in self.figures or n == "losses"]
        names += sorted(n for n in self.figures if n not in FIGURES)
        out += [f"  {name:<{width}}{self.figures[name]:>10,}" for name in names]
        out.append(f"  faults injected, by kind ({sum(self.faults.values()):,} in total):")
        out += [
            f"    {kind:<{width - 2}}{count:>10,}" for kind, count in sorted(self.faults.items())
        ]
        if not self.merged:
            out.append(f"  wall time {time.monotonic() - self.started:.1f} s")
        return out


CAMPAIGN = Campaign()
