"""report/compare.py: what makes two ceilings one measurement, and the caption's formulas
(survivors of the mutation run, notes/mutants2-compare.md)."""

from __future__ import annotations

import math

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


def test_the_formula_note_names_both_formulas_in_their_order():
    note = formula_note("O0", "O2")
    assert "how many times faster O2 is than O0" in note
    assert "the steady training rate of O2 / that of O0" in note
    assert "mean seconds of O0 / mean seconds of O2" in note
