"""The suite's CI stages beside ``make test``: tests that train long enough to compare what cells
learn run in .ci/run's learning stage (NETTEBENCH_LEARNING=1), so `make test` keeps within 10
minutes on 2 cores; elsewhere they are skipped saying how to run them."""

from __future__ import annotations

import os

import pytest

LEARNING = os.environ.get("NETTEBENCH_LEARNING") == "1"


def learning_stage(cost: str):
    """Mark a test for the learning stage; ``cost`` says what it trains and for how long."""

    def mark(test):
        skipped = pytest.mark.skipif(not LEARNING, reason=f"{cost}: NETTEBENCH_LEARNING=1")
        return pytest.mark.learning(skipped(test))

    return mark
