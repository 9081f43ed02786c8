"""The scaling figure: each data-parallel cell's scaling efficiency against its processes, one
line per cell, from the scaling table's rows (:func:`nettebench.report.tables.scaling.
scaling_frame`), so figure and table cannot disagree. A dashed line marks perfect scaling (100 %);
cells without a one-process twin have no efficiency and are named over the plot instead.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from nettebench.report.figures.plotting import empty_figure, new_figure, reference_line
from nettebench.report.tables.scaling import NO_TWIN, scaling_frame

TITLE = "Data-parallel scaling efficiency"


def plot_scaling(runs: pd.DataFrame) -> Figure:
    frame = scaling_frame(runs)
    if frame.empty:
        return empty_figure(TITLE, "no data: no cells with processes > 1 in runs.csv")
    fig, (ax,) = new_figure(1, panel_width=6.5)
    drawn = frame[frame["efficiency"].notna()]
    for label, line in drawn.groupby("label", sort=False):
        ax.plot(line["processes"], 100 * line["efficiency"].astype(float), marker="o", label=label)
    counts = sorted(frame["processes"].unique())
    ax.set_xticks(counts)
    ax.set_xlabel("processes (GPUs, or CPU processes)")
    ax.set_ylabel("img/s at N / (N x img/s at 1), %")
    ax.set_ylim(bottom=0)
    reference_line(ax, 100.0, "perfect scaling")
    ax.legend(loc="lower left", fontsize="small")
    missing = sorted(set(frame.loc[frame["note"] == NO_TWIN, "label"]))
    if missing:
        ax.set_title(f"{NO_TWIN}: {'; '.join(missing)}", fontsize="small")
    fig.suptitle(TITLE)
    return fig
