"""The energy figure: joules per trained image by model and precision, with their intervals.

Joules per image of each cell's steady training steps (validation, the warm-up and the
loader's start-up apart: :func:`nettebench.records.energy.energy_columns`), drawn from runs.csv's
``j_per_img`` with the energy table's own statistics (the mean over seeds and its 95 %
interval, :func:`nettebench.report.stats.summarize`; a one-seed cell's own interval), one panel
per setup as the table's sections; a bar timed under interference or on a throttled GPU carries
‡ as in the table. With no energy measured it says so instead of drawing zeros.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from nettebench.report import caveats as C
from nettebench.report import format as T
from nettebench.report import stats
from nettebench.report.grids import GROUP_KEYS, groups, row_keys
from nettebench.report.plotting import MARK_COLOR, empty_figure, new_figure
from nettebench.report.tables.energy import measured
from nettebench.vocabulary.record_keys import STATUS_OK

TITLE = "Energy per trained image (J/img, steady training steps)"


def energy_bars(runs: pd.DataFrame) -> list[tuple[str, list[dict]]]:
    """Per setup: one bar per (row label, precision) with a measured energy."""
    matrix = runs[(runs["kind"] == "matrix") & (runs["status"] == STATUS_OK)]
    panels = []
    for key, table in groups(matrix, GROUP_KEYS):
        labels = T.row_labels(table, row_keys(runs))
        bars = []
        for label in labels.unique():
            for precision in T.sort_precisions(table["precision"]):
                seeds = table[(labels == label) & (table["precision"] == precision)]
                summary = stats.summarize(seeds["j_per_img"])
                if not summary.n:
                    continue
                low, high = summary.low, summary.high
                if summary.n == 1:
                    own = C.own_interval(seeds, ("j_per_img_low", "j_per_img_high"))
                    low, high = own if own else (None, None)
                _, mark = C.cell_caveat(seeds.to_dict("records"), "cell")
                bars.append(
                    {"label": f"{label} {precision}", "mean": summary.mean, "low": low,
                     "high": high, "mark": mark}
                )  # fmt: skip
        if bars:
            panels.append((" / ".join(str(k) for k in key if not T.is_missing(k)), bars))
    return panels


def plot_energy(runs: pd.DataFrame) -> Figure:
    if measured(runs).empty:
        return empty_figure(TITLE, "not measured: no energy counter in any cell's record")
    panels = energy_bars(runs)
    fig, axes = new_figure(len(panels), panel_width=6.5)
    for ax, (title, bars) in zip(axes, panels, strict=True):
        xs = range(len(bars))
        means = [b["mean"] for b in bars]
        errors = [
            [b["mean"] - b["low"] if b["low"] is not None else 0 for b in bars],
            [b["high"] - b["mean"] if b["high"] is not None else 0 for b in bars],
        ]
        ax.bar(xs, means, yerr=errors, capsize=3, color="tab:green")
        for x, bar in zip(xs, bars, strict=True):
            if bar["mark"]:
                ax.text(x, bar["mean"], bar["mark"], ha="center", va="bottom", color=MARK_COLOR)
        ax.set_xticks(list(xs), [b["label"] for b in bars], rotation=30, ha="right")
        ax.set_ylabel("J per trained image")
        ax.set_title(title, fontsize="small")
    fig.suptitle(TITLE)
    return fig
