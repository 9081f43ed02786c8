"""The timed processes of a real run ran round-robin by replicate, read from its own records.

Two cells that differ only in `lr` (0.05 and 0.0501: same model, shapes and kernels, so the
same speed), three seeds each: six processes, each seed a timing replicate of its cell. Were
they run in any other order (all of one cell's seeds, then all of the other's; or, with one
priority for every timed job, as before, whatever order Snakemake's scheduler picks: seeds
1, 0, 0, 2, 1, 2 and 1, 0, 1, 2, 2, 0 in two runs), a drift of the machine over the run would
land more on one side of the comparison than on the other. The records say in which order
the processes were timed: each metrics.json's timing window (``conditions.started_at`` /
``ended_at``), and runs.csv's ``replicate`` and ``timed_order`` columns. Every replicate-0
window must close before any replicate-1 window opens, and every replicate-1 window before any
replicate-2 one.

``interleaved_study`` is the finished work directory (cells and tables, no figures), for any
other test of this module that reads the same run.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from pathlib import Path

import pandas as pd
import pytest
import scipy.stats

from tests.workflow_helpers import copy_workflow, run_study, write_config

pytestmark = pytest.mark.workflow

LRS = [0.05, 0.0501]
SEEDS = [0, 1, 2]
# As small as a real cell gets while keeping a steady-state rate: 96 images of 24 px, batch 8,
# one epoch (12 steps: 5 of warm-up, 7 steady, enough for the median's 95 % interval), the PIL
# loader in the trainer's process (no store job), no ceiling. `lr` is listed before `seed`, so
# the matrix expands cell by cell (0.05 with seeds 0, 1, 2, then 0.0501): the round-robin is
# not the order the cells are listed in.
STUDY = {
    "datasets": {
        "tiny": {
            "synthetic": {"size": 24, "train_images": 96, "val_images": 16, "classes": 4, "seed": 0}
        }
    },
    "matrix": {
        "model": "resnet18",
        "precision": "O0",
        "batch_size": 8,
        "epochs": 1,
        "image_size": 24,
        "workers": 0,
        "lr": LRS,
        "seed": SEEDS,
    },
    "ceiling": False,
}
# the cells and the tables (runs.csv, comparisons.md); the figures and front page are tested
# elsewhere
UNTIL_TABLES = ("--until", "tables_aggregate")


@pytest.fixture(scope="module")
def interleaved_study(tmp_path_factory) -> Path:
    """The work directory of the finished two-cell, three-replicate study."""
    workdir = copy_workflow(tmp_path_factory.mktemp("interleaved"))
    config = write_config(workdir, STUDY)
    started = time.perf_counter()
    run_study(workdir, config, *UNTIL_TABLES)
    print(f"interleaved study: {time.perf_counter() - started:.1f} s")
    return workdir


def timed_windows(workdir: Path) -> list[dict]:
    """Each cell's seed, lr and timing window from its metrics.json, in the order they opened."""
    found = []
    for path in sorted((workdir / "results" / "runs").rglob("metrics.json")):
        record = json.loads(path.read_text())
        assert record["status"] == "ok", (path, record["message"])
        found.append(
            {
                "seed": record["cell"]["seed"],
                "lr": record["cell"]["lr"],
                "from": record["conditions"]["started_at"],
                "to": record["conditions"]["ended_at"],
                "path": str(path.parent),
            }
        )
    return sorted(found, key=lambda window: window["from"])


def test_the_records_show_every_replicate_round_before_the_next(interleaved_study):
    windows = timed_windows(interleaved_study)
    assert len(windows) == len(LRS) * len(SEEDS)
    order = [(w["seed"], w["lr"]) for w in windows]
    # all of round 0 (both cells), then all of round 1, then all of round 2
    assert [seed for seed, _ in order] == sorted(seed for seed, _ in order), order
    for seed in SEEDS:
        assert sorted(lr for s, lr in order if s == seed) == LRS, order
    for rank, later in enumerate(SEEDS[1:]):
        closed = max(w["to"] for w in windows if w["seed"] == SEEDS[rank])
        opened = min(w["from"] for w in windows if w["seed"] == later)
        assert closed <= opened, (SEEDS[rank], later, order)


def test_runs_csv_shows_the_replicate_and_the_order(interleaved_study):
    runs = pd.read_csv(interleaved_study / "results" / "tables" / "runs.csv")
    assert list(runs.columns).index("timed_order") == list(runs.columns).index("replicate") + 1
    assert dict(zip(runs["seed"], runs["replicate"], strict=True)) == {
        seed: rank for rank, seed in enumerate(SEEDS)
    }
    assert sorted(runs["timed_order"]) == list(range(1, len(runs) + 1))
    in_order = runs.sort_values("timed_order")
    assert list(in_order["replicate"]) == sorted(in_order["replicate"])
    # the order the records' own windows tell
    windows = timed_windows(interleaved_study)
    assert list(in_order["path"].map(lambda p: str(interleaved_study / p))) == [
        w["path"] for w in windows
    ]


AA_LEVEL = 0.001  # a true null gives a p below this in 1 run in 1,000


def _welch_from_records(workdir: Path) -> tuple[float, float, float, float]:
    """The lr comparison computed here from the six records' steady rates: 0.0501's over
    0.05's as the ratio of geometric means, with Welch's t on the logarithms (Satterthwaite's
    degrees of freedom written out), its 95 % interval and its two-sided p."""
    logs: dict[float, list[float]] = {lr: [] for lr in LRS}
    for path in (workdir / "results" / "runs").rglob("metrics.json"):
        record = json.loads(path.read_text())
        logs[record["cell"]["lr"]].append(math.log(record["summary"]["train_img_s"]))
    a, b = logs[LRS[1]], logs[LRS[0]]
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    diff, se = statistics.mean(a) - statistics.mean(b), math.sqrt(va + vb)
    half = scipy.stats.t.ppf(0.975, df) * se
    p = 2 * scipy.stats.t.sf(abs(diff) / se, df)
    return math.exp(diff), math.exp(diff - half), math.exp(diff + half), p


def test_an_aa_study_of_real_processes_states_no_difference(interleaved_study):
    """The two cells cannot differ in speed (only `lr` does). The comparison of their three
    processes each is Welch's test on the six records' rates, computed again here, and its
    verdict follows its p. A true null puts that p below 0.001 in 1 run in 1,000; the old rule
    (each cell's interval from the steps of one process, which are alike) called such pairs
    different about half the time, with p far smaller. At the table's own 5 % this test
    would fail 1 run in 20 by design; the rate of false verdicts at 5 % is checked on simulated
    A/A families in tests/test_aa_families.py. A side timed under interference states no
    verdict whatever its p."""
    tables = interleaved_study / "results" / "tables"
    rows = pd.read_csv(tables / "comparisons.csv")
    (row,) = rows[rows["axis"] == "lr"].to_dict("records")
    assert (row["n_reference"], row["n_compared"]) == (len(SEEDS), len(SEEDS))
    ratio, low, high, p = _welch_from_records(interleaved_study)
    found = (row["ratio"], row["low"], row["high"], row["p"])
    assert found == pytest.approx((ratio, low, high, p), rel=1e-9), row
    text = (tables / "comparisons.md").read_text()
    assert "| 0.0501 / 0.05," in text and "| 3 / 3 |" in text
    if isinstance(row["disturbed"], str):  # interference: no verdict
        assert pd.isna(row["supported"]) and "| yes |" not in text, row
    else:  # quiet: one comparison in its family, so Holm's p is the raw p
        assert p >= AA_LEVEL, row
        assert row["p_holm"] == pytest.approx(p, rel=1e-9)
        assert bool(row["supported"]) == (p < 0.05) == ("| yes |" in text), row
