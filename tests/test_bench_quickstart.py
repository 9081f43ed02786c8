"""The quick-start benchmark's report (tests/bench_quickstart.py): the runs-side-by-side table
a note needs and the check that supported comparisons keep their direction across runs."""

from __future__ import annotations

from tests import bench_quickstart as B

# The quick start's one comparison (report/answers.py's sentences), bf16 against O0
BF16_FASTER = (
    "On a CPU (X), bf16 trains resnet18 1.32x faster than O0 (95 % interval 1.12-1.55x "
    "between 3 and 3 processes, Welch's p = 0.0042)."
)
BF16_SLOWER = (
    "On a CPU (X), bf16 trains resnet18 slower than O0: 0.75x its speed (95 % interval "
    "0.61-0.92x between 3 and 3 processes, Welch's p = 0.018)."
)
NOISE = (
    "On a CPU (X), `cached` and `pil` train resnet18 at speeds their processes cannot tell "
    "apart: 1.04x (95 % interval 0.90-1.20x between 3 and 3 processes, Welch's p = 0.45)."
)


def _run(answers, rate="127", marks=None):
    row = {
        "kind": "matrix", "precision": "O0", "loader": "pil", "seed": "1", "max_steps": "",
        "time_for_epochs_s": "13.2", "train_img_s": rate, "train_img_s_low": "120",
        "train_img_s_high": "133", "extrapolated": "False", "implausible": marks or "",
        "interference": "False", "ceiling_interference": "False", "unstable": "",
        "train_step_cv": "0.04",
    }  # fmt: skip
    return {
        "wall_s": 100.0,
        "run_s": 96.0,
        "report_s": 4.0,
        "loadavg_before": "0.50 0.40 0.30",
        "other_cpu_share_during_run": 0.004,
        "steal_share_during_run": 0.18,
        "answers": answers,
        "table_cells": {B.cell_name(row): B.cell_text(row)},
    }


def test_directions_read_only_supported_comparisons():
    assert B.directions([BF16_FASTER, NOISE]) == {"bf16 vs O0 on resnet18": "faster"}
    assert B.directions([BF16_SLOWER]) == {"bf16 vs O0 on resnet18": "slower"}


def test_the_side_by_side_table_names_flips_and_impossible_cells():
    table = B.side_by_side([_run([BF16_FASTER]), _run([BF16_SLOWER], marks="above its ceiling")])
    assert (
        "| cell O0 `pil` seed 1 | 13.2 s, 127 [120-133] img/s | 13.2 s, 127 [120-133] img/s **✗** |"
        in (table)
    )
    assert (
        "| wall: run + report (load before; others' share, stolen share of the CPUs) "
        "| 100 s: 96 + 4 (0.50 0.40 0.30; 0.4 %, 18.0 %) |"
    ) in table
    assert "directions that flip between runs: 1" in table and "cells with ✗: 1" in table
    steady = B.side_by_side([_run([BF16_FASTER]), _run([BF16_FASTER, NOISE])])
    assert "directions that flip between runs: 0" in steady and "cells with ✗: 0" in steady


def test_each_trained_cells_setup_is_read_from_its_records_startup(tmp_path):
    record = {
        "startup": {
            "to_first_step_s": 7.3,
            "before_first_step": {"imports": 6.9, "model": 0.2},
            "after_last_step_s": 5.1,
            "after_last_step": {"weights": 0.2, "after_epochs": 4.7},
        },
        "conditions": {"wall_s": 42.0},
    }
    cell = tmp_path / "results" / "runs" / "syn" / "model~resnet18"
    cell.mkdir(parents=True)
    (cell / "metrics.json").write_text(B.json.dumps(record))
    baseline = tmp_path / "results" / "cpu" / "syn" / "model~resnet18"
    baseline.mkdir(parents=True)  # a CPU baseline: no ceiling, no startup in an older record
    (baseline / "metrics.json").write_text("{}")
    found = B.job_setup(tmp_path)
    assert found["runs/syn/model~resnet18"] == {
        "to_first_step_s": 7.3, "imports_s": 6.9, "epochs_wall_s": 42.0,
        "after_last_step_s": 5.1, "ceiling_s": 4.7,
    }  # fmt: skip
    assert set(found["cpu/syn/model~resnet18"].values()) == {None}
    assert "ceiling 4.7 s" in B.side_by_side([{**_run([]), "setup": found}])
