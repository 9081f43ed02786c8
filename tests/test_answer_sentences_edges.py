"""report.answers' edges: no comparison is no word, a verdict's word is read through its family
(Holm), and a precision with no finished cell is left out of the sentences while the others are
still said."""

from __future__ import annotations

import math

import record_factory as F

from nettebench.report import answers as A
from nettebench.report.compare import Disturbed, Family, Speedup
from nettebench.report.frames.runs import read_cells, runs_frame


def _word(ratio, p, n=(3, 3), disturbed=None):
    low, high = (None, None) if p is None else (0.5 * ratio, 2 * ratio)
    return A.direction(Speedup(ratio, low, high, p, n, disturbed))


def test_no_comparison_is_no_word():
    assert A.direction(None) is None
    assert _word(1.3, 0.01) == A.FASTER
    assert _word(0.7, 0.01) == A.SLOWER
    assert _word(0.7, 0.2) == A.ALIKE
    assert _word(0.7, None, n=(1, 3)) == A.UNTESTED  # one process a side: never tested
    disturbed = Disturbed("pil's epochs", ("results/runs/x",))
    assert _word(1.3, 0.01, disturbed=disturbed) == A.DISTURBED  # p 0.01 would be faster


def test_a_verdicts_word_is_the_one_its_family_corrects():
    """Raw p 0.03 and 0.04: each alone is a difference; as one family of two, Holm makes them
    2 x 0.03 = 0.06 and max(0.06, 1 x 0.04) = 0.06, neither below 0.05, so neither is."""
    family = Family()
    first = family.add(Speedup(1.3, 1.05, 1.6, 0.03, (3, 3)))
    second = family.add(Speedup(0.8, 0.65, 0.98, 0.04, (3, 3)))
    untested = family.add(Speedup(2.0, None, None, None, (1, 1)))  # not counted in the family
    assert family.size == 2
    assert math.isclose(first.p_corrected, 0.06) and math.isclose(second.p_corrected, 0.06)
    assert A.direction(first) == A.direction(second) == A.ALIKE
    assert A.direction(untested) == A.UNTESTED
    assert A.direction(Speedup(1.3, 1.05, 1.6, 0.03, (3, 3))) == A.FASTER  # alone


def test_a_precision_without_a_finished_cell_is_left_out(tmp_path):
    paths = [
        F.make_cell(tmp_path, precision="O0", time_for_epochs_s=100.0),
        F.make_cell(tmp_path, precision="O1", status="oom"),
        F.make_cell(tmp_path, precision="O2", time_for_epochs_s=50.0),
    ]
    runs = runs_frame(read_cells(paths))
    assert set(runs["precision"]) == {"O0", "O1", "O2"}  # the failed cell is in the frame
    (found,) = A.answer_sentences(runs)
    assert "O2 " in found and "O1" not in found and "2.00x" in found
    assert "one process a side, not tested" in found  # one process each: no verdict
