"""The end of a run prints the answer that run wrote, and nothing stale."""

from __future__ import annotations

import io
import os

from nettebench.study.terminal_answer import print_answer


def test_an_answer_written_during_the_run_is_printed_line_by_line(tmp_path):
    path = tmp_path / "answer.txt"
    path.write_text("bf16 trains resnet18 slower than O0: 0.70x.\nCaveats: none.\n")
    out = io.StringIO()
    assert print_answer(since=path.stat().st_mtime - 1, path=path, stream=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("nettebench: the answer") and str(path) in lines[0]
    assert lines[1:] == ["  bf16 trains resnet18 slower than O0: 0.70x.", "  Caveats: none."]


def test_an_answer_older_than_the_run_or_none_prints_nothing(tmp_path):
    path = tmp_path / "answer.txt"
    out = io.StringIO()
    assert not print_answer(since=0.0, path=path, stream=out)  # no file: no tables yet
    path.write_text("an earlier run's answer\n")
    os.utime(path, (1_000_000, 1_000_000))
    assert not print_answer(since=2_000_000, path=path, stream=out)
    path.write_text("")
    assert not print_answer(since=0.0, path=path, stream=out)  # no comparison to state
    assert out.getvalue() == ""
