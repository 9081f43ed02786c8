"""Notes under the tables stay short however many cells were disturbed (issue [3/5], item 3).

A study whose every cell was timed under interference, with unstable steps and a disturbed
ceiling, is the worst case for the notes: each cell's reasons belong in the timing-conditions
table (one row per timed window), and a note names the cells briefly. So no paragraph of any
table (its caption or a note) is over 90 words, and the per-cell reasons are in the timing
conditions table, not under the time table.
"""

from __future__ import annotations

import re

import record_factory as F

from nettebench.report import caveats as C
from nettebench.report.aggregate import aggregate

MAX_WORDS = 90
MODELS = ("resnet18", "resnet34", "resnet50")
PRECISIONS = ("O0", "O1", "O2", "bf16")
BUSY = "other processes used 48% of the job's 16 CPUs (460.8 CPU-s in 60.0 s)"


def _unstable(model: str, precision: str) -> str:
    """A reason of the shape records.spread writes, different for every cell."""
    return f"sd 14 % of the mean over 40 steps ({model} {precision} shared its CPUs)"


def _disturbed_study(root) -> list:
    """12 cells, 2 seeds each, every one disturbed, unstable, with a disturbed ceiling."""
    paths = []
    for model in MODELS:
        for precision in PRECISIONS:
            for seed in F.STUDY_SEEDS:
                path = F.make_cell(
                    root,
                    model=model,
                    precision=precision,
                    seed=seed,
                    conditions=F.window(0.48, reasons=(BUSY,)),
                    summary_extra={"unstable": _unstable(model, precision)},
                )
                F.make_ceiling(path, conditions=F.window(0.4, reasons=(BUSY,)))
                paths.append(path)
    return paths


def _paragraphs(markdown: str) -> list[str]:
    """The text paragraphs of a Markdown table file: not headings, not table rows."""
    found = []
    for block in re.split(r"\n\s*\n", markdown):
        lines = [line for line in block.splitlines() if line.strip()]
        if lines and not lines[0].startswith(("#", "|")):
            found.append(" ".join(lines))
    return found


def test_no_note_of_a_study_with_every_cell_disturbed_is_over_90_words(tmp_path):
    written = aggregate(_disturbed_study(tmp_path / "cells"), tmp_path / "tables")
    texts = {p.name: p.read_text() for p in written.values() if p.suffix == ".md"}
    # the worst case: every number of the throughput table marked unstable and disturbed
    assert f"{C.INTERFERENCE_MARK}{C.UNSTABLE_MARK}" in texts["throughput.md"]
    long = [
        (name, len(paragraph.split()), paragraph[:80])
        for name, text in texts.items()
        for paragraph in _paragraphs(text)
        if len(paragraph.split()) > MAX_WORDS
    ]
    assert not long, long


def test_each_cells_reasons_are_in_the_timing_conditions_table_not_under_the_time_table(
    tmp_path,
):
    written = aggregate(_disturbed_study(tmp_path / "cells"), tmp_path / "tables")
    conditions = written["timing_conditions"].read_text()
    time_table = written["time_by_model_precision"].read_text()
    throughput = written["throughput"].read_text()
    for model in MODELS:
        for precision in PRECISIONS:
            reason = _unstable(model, precision)
            rows = [line for line in conditions.splitlines() if reason in line]
            # one row per seed's epochs window, each with its own reason beside its cell's name
            assert len(rows) == len(F.STUDY_SEEDS), (model, precision)
            assert all(line.startswith(f"| {model}") for line in rows)
            assert reason not in time_table and reason not in throughput
