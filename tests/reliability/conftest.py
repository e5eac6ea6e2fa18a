"""Hypothesis profiles for the fault-injection campaign, and its summary table.

Profiles (select with ``HYPOTHESIS_PROFILE``, or ``--reliability-profile`` when
``tests/reliability`` is named on the command line, which loads this conftest early
enough for pytest to know the option):

* ``ci`` (default): derandomized, so every run replays the same schedules;
  22 drawn + 2 explicit schedules, at least 1,000 events (about 1,100);
  the whole of tests/reliability takes about 1 min 45 s on this 2-core machine.
* ``soak``: ``$SOAK_EXAMPLES`` schedules (default 500, about 45 events
  each), random each run (a failure prints the blob that reproduces it);
  what ``make soak`` runs.
* ``dev``: a handful of schedules, for working on the tests themselves.
"""

from __future__ import annotations

import os

import pytest

from tests.reliability.campaign import CAMPAIGN, MIN_EVENTS


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--reliability-profile",
        default=None,
        choices=sorted(MIN_EVENTS),
        help="hypothesis profile of tests/reliability (default: $HYPOTHESIS_PROFILE or ci)",
    )


def campaign_profile(config: pytest.Config) -> str:
    chosen = config.getoption("--reliability-profile", default=None) or os.environ.get(
        "HYPOTHESIS_PROFILE"
    )
    return chosen if chosen in MIN_EVENTS else "ci"


@pytest.fixture(scope="session")
def reliability_profile(pytestconfig: pytest.Config) -> str:
    name = campaign_profile(pytestconfig)
    CAMPAIGN.profile = name
    return name
