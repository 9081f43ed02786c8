"""The study's headline table: seconds for N epochs by model x precision (mean over seeds), and
each precision's speed-up over O0 with whether the seeds support it."""

from __future__ import annotations

import pandas as pd

from nettebench.report import format as T
from nettebench.report.compare import BASELINE_PRECISION, formula_note, speedup_grids
from nettebench.report.grids import Grid, grid_sections, model_precision_grids, no_matrix


def time_grids(runs: pd.DataFrame) -> list[Grid]:
    """The time table's model x precision grids (the time figure draws their marks)."""
    return model_precision_grids(runs, "time_for_epochs_s", T.fmt_seconds)


def time_markdown(runs: pd.DataFrame) -> T.Document:
    """The study's "seconds for N epochs" table: model x precision, mean over seeds."""
    grids = time_grids(runs)
    counts = [c for g in grids for c in g.seed_counts]
    note = (
        "Seconds to train and validate all epochs of a cell (sum of per-epoch wall times, "
        f"`summary.time_for_epochs_s`), {T.seeds_note(counts)}."
    )
    return T.document(
        "Time by model and precision",
        note,
        grid_sections(grids, level=2) + speedup_sections(runs),
        empty=no_matrix(runs),
    )


def speedup_sections(runs: pd.DataFrame) -> list[T.Block]:
    """The speed-up of every precision over O0, per table of the time grids above."""
    grids, family = speedup_grids(runs)
    if not grids:
        return []
    intro = (
        f"Each precision against {BASELINE_PRECISION} for the same model, parameters and setup. "
        f"{formula_note(BASELINE_PRECISION, 'the precision')} {family.note()}"
    )
    heading = T.Heading(2, f"Speed-up over {BASELINE_PRECISION}")
    return [heading, T.Paragraph(intro), *grid_sections(grids, level=3)]
