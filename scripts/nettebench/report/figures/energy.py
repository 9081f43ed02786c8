"""The energy figure: joules per image of each cell's steady training steps (runs.csv's
``j_per_img``, :func:`nettebench.records.energy.energy_columns`) by model and precision, one
panel per setup as the energy table's sections, with the table's statistics (the mean over seeds
and its 95 % interval; a one-seed cell's own interval), its marks over each bar and its footnotes
under the panels (:func:`nettebench.report.tables.energy.energy_grids`). With no energy measured
it says so instead of drawing zeros.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from nettebench.report import caveats as C
from nettebench.report import format as T
from nettebench.report import stats
from nettebench.report.figures.facets import table_marks
from nettebench.report.figures.plotting import (
    empty_figure,
    finish,
    mark_bar,
    new_figure,
    precision_colors,
    side_legend,
)
from nettebench.report.grids import GROUP_KEYS, groups, row_keys
from nettebench.report.tables.energy import energy_grids, measured
from nettebench.vocabulary.record_keys import STATUS_OK

TITLE = "Energy per trained image (J/img, steady training steps)"


def energy_panels(runs: pd.DataFrame) -> list[tuple[str, list[dict], list[str]]]:
    """Per setup: one bar per (row label, precision) with a measured energy, each with its
    table cell's marks, and the panel's footnotes (its table's, for those marks)."""
    matrix = runs[runs["kind"] == "matrix"]
    grids = energy_grids(runs, "j_per_img")  # the table's, one per group below
    panels = []
    for (_, everything), grid in zip(groups(matrix, GROUP_KEYS), grids, strict=True):
        labels = T.row_labels(everything, row_keys(runs))
        precisions = T.sort_precisions(everything["precision"])
        ok = everything["status"] == STATUS_OK
        bars = []
        for row, label in zip(grid.rows, labels.unique(), strict=True):
            for text, precision in zip(row[1:], precisions, strict=True):
                seeds = everything[ok & (labels == label) & (everything["precision"] == precision)]
                summary = stats.summarize(seeds["j_per_img"])
                if not summary.n:
                    continue
                low, high = summary.low, summary.high
                if summary.n == 1:
                    own = C.own_interval(seeds, ("j_per_img_low", "j_per_img_high"))
                    low, high = own if own else (None, None)
                bars.append(
                    {"label": f"{label} {precision}", "precision": precision,
                     "mean": summary.mean, "low": low, "high": high, "mark": table_marks(text)}
                )  # fmt: skip
        if bars:  # titled as the energy table's section
            panels.append((grid.title, bars, grid.notes()))
    return panels


def plot_energy(runs: pd.DataFrame) -> Figure:
    if measured(runs).empty:
        return empty_figure(TITLE, "not measured: no energy counter in any cell's record")
    panels = energy_panels(runs)
    colors = precision_colors(runs["precision"].dropna().astype(str))
    fig, axes = new_figure(len(panels), panel_width=6.5)
    for ax, (title, bars, _) in zip(axes, panels, strict=True):
        xs = range(len(bars))
        means = [b["mean"] for b in bars]
        errors = [
            [b["mean"] - b["low"] if b["low"] is not None else 0 for b in bars],
            [b["high"] - b["mean"] if b["high"] is not None else 0 for b in bars],
        ]
        ax.bar(xs, means, yerr=errors, capsize=3, color=[colors[b["precision"]] for b in bars])
        for x, bar, high in zip(xs, bars, errors[1], strict=True):
            if bar["mark"]:  # over its whisker
                mark_bar(ax, x, bar["mean"] + high, bar["mark"])
        ax.set_xticks(list(xs), [b["label"] for b in bars], rotation=30, ha="right")
        ax.set_ylabel("J per trained image")
        ax.set_title(title, fontsize="small")
        shown = T.sort_precisions(b["precision"] for b in bars)
        side_legend(ax, [Patch(facecolor=colors[p], label=p) for p in shown])
    fig.suptitle(TITLE)
    return finish(fig, [note for _, _, notes in panels for note in notes])
