"""How the bar figures are cut: one panel per (dataset, epochs, device, setup), the bars' frame,
the caveat marks over a bar, and the panels of bars by precision. Shared by every bar figure of
:mod:`nettebench.report.figures`; panels follow the tables' grouping
(:data:`nettebench.report.grids.GROUP_KEYS`), so two machines are never one panel. No torch.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from nettebench.report import caveats as C
from nettebench.report import format as T
from nettebench.report.grids import GROUP_KEYS, row_keys
from nettebench.report.plotting import bar_width, grouped_bars, new_figure, precision_colors
from nettebench.report.setups import title_suffix


def facet_title(
    dataset: Any, epochs: Any, frame: pd.DataFrame, among: pd.DataFrame | None = None
) -> str:
    names = sorted({str(n) for n in frame["device_name"].dropna()})
    device = "; ".join(names) or "; ".join(sorted({str(t) for t in frame["device_type"].dropna()}))
    if among is not None:
        device += title_suffix(frame, among)
    parts = [str(dataset)]
    if epochs is not None:
        parts.append(f"{T.fmt_value(epochs)} epochs")
    return ", ".join(parts) + (f"\n{device}" if device else "")


def matrix_facets(runs: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Matrix cells split by (dataset, epochs, device type, setup), each with its row labels."""
    matrix = runs[runs["kind"] == "matrix"]
    facets = []
    for (dataset, epochs, _, _), frame in matrix.groupby(GROUP_KEYS, sort=False, dropna=False):
        frame = frame.assign(label=T.row_labels(frame, row_keys(runs)))
        facets.append((facet_title(dataset, epochs, frame, matrix), frame))
    return facets


def bar_frame(
    frame: pd.DataFrame,
    value: str,
    hue: str = "precision",
    outline: str | None = None,
    status: str = "status",
    interval: tuple[str, str] | None = None,
) -> pd.DataFrame:
    columns = {
        "label": frame["label"],
        "hue": frame[hue].astype(str),
        "status": frame[status],
        "value": pd.to_numeric(frame[value], errors="coerce"),
    }
    if outline is not None and outline in frame:  # an older runs.csv has no ceiling columns
        columns["outline"] = pd.to_numeric(frame[outline], errors="coerce")
        columns["mark"] = caveat_marks(frame)
    if interval is not None and all(c in frame for c in interval):  # a cell's own interval
        columns["low"], columns["high"] = (
            pd.to_numeric(frame[c], errors="coerce") for c in interval
        )
    return pd.DataFrame(columns)


def caveat_marks(frame: pd.DataFrame) -> pd.Series:
    """Per cell: ``✗`` above its own ceiling beyond both spreads (not comparable), else ``‡``
    timed under interference (its own or its ceiling's), ``≈`` above its ceiling within the
    spreads, ``§`` unstable steps, or empty (report.caveats)."""

    def mark(row) -> str:
        if T.as_bool(row.get("above_ceiling")):
            return C.IMPOSSIBLE_MARK
        found = ""
        if T.as_bool(row.get("interference")) or T.as_bool(row.get("ceiling_interference")):
            found += C.INTERFERENCE_MARK
        if not T.is_missing(row.get("ceiling_exceeded")):
            found += C.WITHIN_NOISE_MARK
        if not T.is_missing(row.get("unstable")):
            found += C.UNSTABLE_MARK
        return found

    return frame.apply(mark, axis=1) if len(frame) else pd.Series(dtype=object)


def precision_bar_panels(
    runs: pd.DataFrame, facets, value: str, status: str = "status", outcomes=None
):
    """One panel per (title, frame) facet: bars of ``value`` by row label, one per precision
    (colours fixed across the figure). Returns the figure and its (axes, frame) pairs for the
    caller's own labels and marks."""
    colors = precision_colors(runs["precision"].dropna().astype(str))
    widest = max(bar_width(f["label"].nunique(), f["precision"].nunique()) for _, f in facets)
    fig, axes = new_figure(len(facets), panel_width=widest)
    panels = []
    for ax, (facet_title, frame) in zip(axes, facets, strict=True):
        grouped_bars(
            ax,
            bar_frame(frame, value, status=status),
            categories=list(frame["label"].unique()),
            hues=T.sort_precisions(frame["precision"]),
            colors=colors,
            outcomes=outcomes,
        )
        ax.set_title(facet_title, fontsize=9)
        panels.append((ax, frame))
    return fig, panels


def equal(column: pd.Series, value: Any) -> pd.Series:
    """Rows whose value is ``value``, a missing value matching missing ones."""
    return column.isna() if T.is_missing(value) else column == value
