"""report/compare.py: the caption's formulas, the extrapolated mark of a speed-up, and which
time column a comparison without steady rates reads (survivors of the mutation run,
notes/mutants2-compare.md). The ceilings no longer widen an interval: the spread between
processes is measured directly (docs/honest-numbers.md, Statistics)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import record_factory as F

from nettebench.report.compare import Family, formula_note, speedup, speedup_grids
from nettebench.report.frames.runs import read_cells, runs_frame


def test_the_formula_note_names_the_rule_and_the_docs_hold_its_formula():
    note = formula_note("O0", "O2")
    assert "Speed-up of O2 over O0" in note
    assert "95 % Welch interval between processes" in note
    assert "Holm's correction" in note and "(n=1): one process a side, untested" in note
    docs = (Path(__file__).resolve().parents[1] / "docs" / "honest-numbers.md").read_text()
    assert "geometric mean of its processes' steady rates" in docs
    assert "Holm" in docs


def test_one_extrapolated_side_is_enough_for_the_approx_mark(tmp_path):
    """O0 ran its epochs, O1 was extrapolated from 3 steps: the speed-up is an estimate."""
    base = F.make_cell(tmp_path / "a", precision="O0", train_img_s=100.0)
    other = F.make_cell(tmp_path / "b", precision="O1", max_steps=3, train_img_s=150.0)
    (grid,), _ = speedup_grids(runs_frame(read_cells([base, other])))
    assert grid.approx is True
    assert grid.rows[0][1] == "~1.50x (n=1)"


def test_without_steady_rates_the_epochs_time_is_compared_not_another_time_column():
    """Three processes a side, no steady rates: Welch on ``time_for_epochs_s`` (10 s against
    5 s, a spread of 1 %: supported), not on another time column (``wall_s``, 1 against 9)."""
    reference = pd.DataFrame(
        {"status": ["ok"] * 3, "time_for_epochs_s": [9.9, 10.0, 10.1], "wall_s": [1.0] * 3}
    )
    other = pd.DataFrame(
        {"status": ["ok"] * 3, "time_for_epochs_s": [4.95, 5.0, 5.05], "wall_s": [9.0] * 3}
    )
    found = speedup(reference, other, family=Family())
    assert found.text().startswith("2.00x [") and found.supported is True
