"""report.answers' edges: no comparison is no word, and a precision with no finished cell is
left out of the sentences while the others are still said."""

from __future__ import annotations

import record_factory as F

from nettebench.report import answers as A
from nettebench.report.collect import read_cells, runs_frame


def test_no_comparison_is_no_word():
    assert A.direction(None) is None
    assert A.direction(A.Verdict(1.3, "how", True)) == A.FASTER
    assert A.direction(A.Verdict(0.7, "how", True)) == A.SLOWER
    assert A.direction(A.Verdict(0.7, "how", False)) == A.ALIKE
    assert A.direction(A.Verdict(0.7, "how", None)) == A.UNTESTED
    disturbed = A.Disturbed("pil's epochs", ("results/runs/x",))
    assert A.direction(A.Verdict(1.3, "how", None, disturbed)) == A.DISTURBED


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
