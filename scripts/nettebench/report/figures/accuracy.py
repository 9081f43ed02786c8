"""The accuracy figure: validation top-1 (solid) and top-5 (dashed) after each epoch, one panel
per row of the accuracy table, the seeds' mean with their min-max band."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from nettebench.report import format as T
from nettebench.report.figures.plotting import (
    empty_figure,
    finish,
    new_figure,
    precision_colors,
    side_legend,
)
from nettebench.report.grids import row_keys
from nettebench.report.tables import time_to_accuracy as tta


def _cell_labels(runs: pd.DataFrame | None) -> tuple[dict, set]:
    """Per cell directory (``path``): its row label as the tables write it (every parameter
    that varies: loader, environment, batch, ...), and the directories of extrapolated cells
    (``~``: partial epochs, their accuracy from ``max_steps`` steps an epoch)."""
    if runs is None or runs.empty or "path" not in runs:
        return {}, set()
    matrix = runs[runs["kind"] == "matrix"]
    labels = T.row_labels(matrix, row_keys(runs)) if len(matrix) else pd.Series(dtype=object)
    partial = set(matrix.loc[matrix["extrapolated"].map(T.as_bool), "path"].map(str))
    return dict(zip(matrix["path"].map(str), labels, strict=True)), partial


def plot_accuracy(epochs: pd.DataFrame, runs: pd.DataFrame | None = None) -> Figure:
    """Validation top-1 (solid) and top-5 (dashed) against epoch, one panel per row of the
    accuracy table: cells that differ in any parameter (``runs``: the loader, the environment,
    ...) are never averaged, only their seeds; a precision whose cells in the panel ran
    ``max_steps`` steps an epoch is named ``bf16 (partial epochs)`` in the legend, in the
    time-to-accuracy table's words (its ``~`` marks an extrapolated time)."""
    title = "Validation accuracy by epoch"
    matrix = epochs[(epochs["kind"] == "matrix") & epochs["epoch"].notna()]
    if matrix.empty:
        return empty_figure(title, "no data: no epochs of matrix cells in epochs.csv")
    # One record per directory (two machines' copies of a cell share a cell_id); an epochs.csv
    # from before `path` was a column falls back to the cell_id.
    key = "path" if matrix["path"].notna().any() else "cell_id"
    cells = matrix.drop_duplicates(key)
    labels = T.row_labels(cells, ["batch_size", "epochs"])
    by_path, partial = _cell_labels(runs) if key == "path" else ({}, set())
    labels = [by_path.get(str(p), label) for p, label in zip(cells[key], labels, strict=True)]
    matrix = matrix.assign(
        label=matrix[key].map(dict(zip(cells[key], labels, strict=True))),
        partial=matrix[key].map(str).isin(partial),
    )
    several_datasets = matrix["dataset"].nunique() > 1
    several_setups = matrix["setup"].nunique() > 1
    panels = list(matrix.groupby(["dataset", "setup", "label"], sort=False, dropna=False))
    colors = precision_colors(matrix["precision"].dropna().astype(str))
    fig, axes = new_figure(len(panels), panel_width=5.0)
    for ax, ((dataset, setup, label), frame) in zip(axes, panels, strict=True):
        precisions = T.sort_precisions(frame["precision"])
        for precision in precisions:
            per_epoch = frame[frame["precision"] == precision].groupby("epoch")
            for column, dashes in (("val_top1", "-"), ("val_top5", "--")):
                band = per_epoch[column].agg(["mean", "min", "max"]).dropna()
                if band.empty:
                    continue
                color, width = colors[precision], 1.4 if dashes == "-" else 1.0
                line = {"color": color, "marker": "o", "markersize": 3, "linewidth": width}
                ax.plot(band.index, band["mean"], dashes, **line)
                ax.fill_between(
                    band.index, band["min"], band["max"], color=color, alpha=0.15, linewidth=0
                )
        lines = [str(label)]
        lines += [str(dataset)] if several_datasets else []
        lines += [str(setup)] if several_setups else []
        ax.set_title("\n".join(lines), fontsize=9)
        ax.set_xlabel("epoch")
        ax.set_ylabel("validation accuracy (%)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        partial = set(frame.loc[frame["partial"], "precision"])
        handles = [
            Line2D([], [], color=colors[p], label=f"{p} ({tta.PARTIAL})" if p in partial else p)
            for p in precisions
        ]
        handles += [
            Line2D([], [], color="0.3", linestyle="-", label="top-1"),
            Line2D([], [], color="0.3", linestyle="--", label="top-5"),
        ]
        side_legend(ax, handles, title=None)
    fig.suptitle(f"{title}\n(mean over seeds, band = min-max)")
    return finish(fig, [tta.PARTIAL_NOTE] if matrix["partial"].any() else [])
