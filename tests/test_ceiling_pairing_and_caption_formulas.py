"""report/compare.py: what makes two ceilings one measurement, and the caption's formulas
(survivors of the mutation run, notes/mutants2-compare.md)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from nettebench.report.compare import ceiling_drift, formula_note

# what the ceiling's step depends on (the comment above SAME_CEILING): any of them differing
# makes the two ceilings different measurements, never drift
STEP_AND_SETUP = [
    "model", "precision", "batch_size", "image_size", "channels_last", "compile", "processes",
    "device_type", "setup_id", "env_torchvision", "env_apex", "torchvision", "apex",
]  # fmt: skip


def _side(ceiling, **changed):
    columns = {key: "a" for key in STEP_AND_SETUP} | {"loader": "pil"} | changed
    return pd.DataFrame({"status": ["ok"], "ceiling_img_s": [ceiling]} | {
        key: [value] for key, value in columns.items()
    })  # fmt: skip


@pytest.mark.parametrize("key", STEP_AND_SETUP)
def test_a_difference_in_what_the_ceiling_times_is_not_drift(key):
    assert ceiling_drift(_side(200.0), _side(400.0, **{key: "b"})) is None


def test_only_the_loader_differing_is_drift():
    assert ceiling_drift(_side(200.0), _side(400.0, loader="cached")) == math.log(2)


def test_the_formula_note_names_both_forms_and_the_docs_hold_their_formulas():
    note = formula_note("O0", "O2")
    assert "how many times faster O2 is than O0" in note
    assert "`Rx [L-H]`: the ratio of the two cells' steady training rates" in note
    assert "`Rx`: the ratio of mean seconds" in note
    docs = (Path(__file__).resolve().parents[1] / "docs" / "honest-numbers.md").read_text()
    assert "the steady training rate of one cell / that of the other" in docs
    assert "mean seconds of the reference / mean seconds of the other" in docs


def test_one_extrapolated_side_is_enough_for_the_approx_mark(tmp_path):
    """O0 ran its epochs, O1 was extrapolated from 3 steps: the speed-up is an estimate."""
    import record_factory as F

    from nettebench.report.collect import read_cells, runs_frame
    from nettebench.report.compare import speedup_grids

    steady = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8, 100.1, 99.9]
    base = F.make_cell(tmp_path / "a", precision="O0", train_img_s=100.0,
                       summary_extra={"train_block_img_s": steady})  # fmt: skip
    other = F.make_cell(tmp_path / "b", precision="O1", max_steps=3, train_img_s=150.0,
                        summary_extra={"train_block_img_s": [1.5 * r for r in steady]})  # fmt: skip
    (grid,) = speedup_grids(runs_frame(read_cells([base, other])))
    assert grid.approx is True
    assert grid.rows[0][1].startswith("~1.50x")


def test_several_seeds_are_compared_on_their_epochs_time_by_default():
    """Three seeds a side, no block rates: Welch on ``time_for_epochs_s`` (mean 10 s against
    mean 5 s, a spread of 1 %: supported), not on another time column (``wall_s``, 1 against 9)."""
    from nettebench.report.compare import cells_speedup_text

    reference = pd.DataFrame(
        {"status": ["ok"] * 3, "time_for_epochs_s": [9.9, 10.0, 10.1], "wall_s": [1.0] * 3}
    )
    other = pd.DataFrame(
        {"status": ["ok"] * 3, "time_for_epochs_s": [4.95, 5.0, 5.05], "wall_s": [9.0] * 3}
    )
    assert cells_speedup_text(reference, other) == "2.00x"
