"""The suite's CI stages beside ``make test``, so `make test` keeps within 10 minutes on 2 cores;
elsewhere their tests are skipped saying how to run them:

- learning (NETTEBENCH_LEARNING=1): tests that train long enough to compare what cells learn;
- builds (NETTEBENCH_BUILDS=1): library builds from source and package environments from the
  registry, through the real pip and git, and the workflows that use them (about 150 s of a
  worker in a suite run).
"""

from __future__ import annotations

import os

import pytest

LEARNING = os.environ.get("NETTEBENCH_LEARNING") == "1"
BUILDS = os.environ.get("NETTEBENCH_BUILDS") == "1"


def learning_stage(cost: str):
    """Mark a test for the learning stage; ``cost`` says what it trains and for how long."""

    def mark(test):
        skipped = pytest.mark.skipif(not LEARNING, reason=f"{cost}: NETTEBENCH_LEARNING=1")
        return pytest.mark.learning(skipped(test))

    return mark


def builds_stage(cost: str) -> list:
    """A module's marks for the builds stage (its ``pytestmark``); ``cost`` says what it builds
    or installs."""
    return [
        pytest.mark.builds,
        pytest.mark.skipif(not BUILDS, reason=f"{cost}: NETTEBENCH_BUILDS=1"),
    ]
