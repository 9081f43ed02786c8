"""A/A studies from records: many simulated families of identical cells, each process drawn
with a between-process spread like the one measured on the 2-core test machine
(docs/measurements.md, Variance breakdown), go through the report's own comparisons
(``answers.comparisons``, the rows of comparisons.md). A family that states any difference is a
false alarm: at most 5 % of families may (Holm's correction over the table), and a real 2x
difference with three processes a side must still be found in nearly every draw.

The draws are seeded, so the test is deterministic; its numbers are counted here from the
verdicts, not computed by the statistics under test."""

from __future__ import annotations

import math
import random

import pytest
import record_factory as F

from nettebench.report import answers
from nettebench.report.frames.runs import read_cells, runs_frame

LRS = [round(0.05 + 0.0001 * i, 4) for i in range(12)]  # an axis that cannot change speed
BETWEEN_CV = 0.08  # between-process spread of a steady rate (about ±13 % over 12 processes)
WITHIN_CV = 0.02  # the steps of one process: far more alike than two processes
IMAGES = 960.0  # images a cell trains over its epochs: seconds = IMAGES / rate
DRAWS = 200


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """Records of 12 cells that differ only in ``lr``, three processes (seeds) each, read once
    into a runs frame whose rates each draw replaces."""
    root = tmp_path_factory.mktemp("aa")
    paths = [
        F.make_cell(root / f"lr{lr}", device_type="cpu", seed=seed, extra_cell={"lr": lr})
        for lr in LRS
        for seed in range(3)
    ]  # fmt: skip
    return runs_frame(read_cells(paths))


def _draw(runs, rng, *, processes, ratios=None):
    """``runs`` with each of the first ``processes`` seeds of every cell given a steady rate
    drawn around its cell's true rate (100 img/s, times ``ratios[lr]``), its seconds and its
    block rates to match; the other seeds dropped."""
    runs = runs[runs["seed"] < processes].copy()
    rates, seconds, blocks = [], [], []
    for lr in runs["lr"]:
        rate = 100.0 * (ratios or {}).get(lr, 1.0) * math.exp(rng.gauss(0.0, BETWEEN_CV))
        rates.append(rate)
        seconds.append(IMAGES / rate)
        blocks.append([rate * math.exp(rng.gauss(0.0, WITHIN_CV)) for _ in range(10)])
    return runs.assign(train_img_s=rates, time_for_epochs_s=seconds, train_block_img_s=blocks)


def _supported(runs):
    found = answers.comparisons(runs)
    assert len(found) == len(LRS) - 1  # each lr against the first
    return [c for c in found if c.found.supported]


@pytest.mark.parametrize("processes", [2, 3])
def test_families_of_identical_cells_state_a_difference_at_most_5_percent(study, processes):
    rng = random.Random(20261206 + processes)
    alarms = sum(bool(_supported(_draw(study, rng, processes=processes))) for _ in range(DRAWS))
    assert alarms <= 0.05 * DRAWS, f"{alarms} of {DRAWS} A/A families stated a difference"


def test_one_process_a_cell_never_states_a_difference(study):
    """The issue's study: one process a cell, steps far more alike than processes. The old rule
    (an interval from one process's steps) called about half of such comparisons different."""
    rng = random.Random(55)
    for _ in range(20):
        runs = _draw(study, rng, processes=1)
        assert _supported(runs) == []
        assert {c.found.supported for c in answers.comparisons(runs)} == {None}


def test_a_real_2x_difference_with_three_processes_a_side_is_found(study):
    """Three cells (a family of two comparisons, as the quick start's), one of them 2x: found
    in nearly every draw with three processes a side. (Among eleven comparisons Holm asks more:
    three processes find it in about 4 draws of 5 at this spread, five in all; docs/honest-
    numbers.md says how many a study needs.)"""
    rng = random.Random(7)
    cells = study[study["lr"].isin(LRS[:3])]
    found = 0
    for _ in range(DRAWS):
        runs = _draw(cells, rng, processes=3, ratios={LRS[1]: 2.0})
        supported = [c for c in answers.comparisons(runs) if c.found.supported]
        found += [c.name for c in supported] == [str(LRS[1])]
    assert found >= 0.95 * DRAWS, f"2x found (alone) in {found} of {DRAWS} draws"
