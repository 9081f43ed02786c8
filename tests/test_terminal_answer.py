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


def test_a_long_sentence_is_wrapped_to_the_terminals_width(tmp_path):
    """A sentence of the answer runs to 1,300 characters in a study of many comparisons: it is
    wrapped to 100 columns, its continuation lines indented under it, no word lost."""
    path = tmp_path / "answer.txt"
    path_word = "results/runs/synthetic-quick/model~resnet18/" + "x" * 120 + "/metrics.json"
    sentence = " ".join([*(f"word{i}" for i in range(300)), f"`{path_word}`", "end-of-it."])
    path.write_text(f"{sentence}\nCaveats: none.\n")
    out = io.StringIO()
    assert print_answer(since=0.0, path=path, stream=out)
    lines = out.getvalue().splitlines()[1:]
    # lines of 100 columns, but a path is never split (its line is as long as it needs)
    assert max(len(line) for line in lines if path_word not in line) <= 100 and len(lines) > 10
    assert any(line.strip() == f"`{path_word}`" for line in lines)
    assert lines[0].startswith("  word0 ") and all(line.startswith("    ") for line in lines[1:-1])
    assert " ".join(" ".join(lines[:-1]).split()) == sentence and lines[-1] == "  Caveats: none."


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
