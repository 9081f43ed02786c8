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
from nettebench.report.figures.plotting import bar_panels, precision_colors
from nettebench.report.grids import GROUP_KEYS, Marks, row_keys
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
        columns["mark"] = bar_marks(frame, hue)
    if interval is not None and all(c in frame for c in interval):  # a cell's own interval
        columns["low"], columns["high"] = (
            pd.to_numeric(frame[c], errors="coerce") for c in interval
        )
    return pd.DataFrame(columns)


# The marks a table cell may carry after its number, in the order the grids append them.
_SUFFIXES = (T.PARTIAL_MARK, C.INTERFERENCE_MARK, C.WITHIN_NOISE_MARK, C.UNSTABLE_MARK)


def table_marks(text: str) -> str:
    """The marks of one table cell (``~12.3 ± 0.4†‡§`` gives ``~†‡§``; ``✗`` stays ``✗``);
    empty for a plain number or an outcome (``OOM``, ``n/a``)."""
    text = str(text)
    if text == C.IMPOSSIBLE_MARK:
        return text
    marks = T.APPROX_MARK if text.startswith(T.APPROX_MARK) else ""
    tail = ""
    while text and text[-1] in _SUFFIXES:
        tail, text = text[-1] + tail, text[:-1]
    return marks + tail


def grid_marks(facets, grids) -> list[pd.Series]:
    """Per facet (:func:`matrix_facets`), the mark of each of its rows: its table cell's
    (:func:`table_marks` of the matching ``grids``, the table's own, in the same order)."""
    found = []
    for (_, frame), grid in zip(facets, grids, strict=True):
        precisions = T.sort_precisions(frame["precision"])
        cells = {
            (label, precision): table_marks(text)
            for label, row in zip(frame["label"].unique(), grid.rows, strict=True)
            for precision, text in zip(precisions, row[1:], strict=True)
        }
        keys = zip(frame["label"], frame["precision"].astype(str), strict=True)
        found.append(pd.Series([cells.get(key, "") for key in keys], index=frame.index))
    return found


def seed_marks(ok: list[dict[str, Any]]) -> str:
    """The caveat marks of a share cell's finished seeds, by report.caveats' rules: ``✗`` alone
    where a seed is beyond its ceiling (the number withheld), else ``‡`` (the cell or its
    ceiling timed under interference), ``≈`` (above the ceiling within the spreads), ``§``
    (unstable steps)."""
    withheld, mark = C.cell_caveat(ok, "share")
    if withheld:
        return C.IMPOSSIBLE_MARK
    mark += C.WITHIN_NOISE_MARK if C.exceeded(ok) else ""
    return mark + (C.UNSTABLE_MARK if C.unstable_reasons(ok) else "")


def bar_marks(frame: pd.DataFrame, hue: str = "precision") -> pd.Series:
    """Per bar (the rows of one label and ``hue``), on each of its rows: its seeds' marks
    (:func:`seed_marks`), as the throughput tables mark the cell, ``†`` first where some seeds
    did not finish."""
    found = pd.Series("", index=frame.index, dtype=object)
    for _, seeds in frame.groupby([frame["label"], frame[hue].astype(str)], sort=False):
        ok = seeds[seeds["status"] == "ok"].to_dict("records")
        marks = seed_marks(ok)
        if marks != C.IMPOSSIBLE_MARK and ok and len(ok) < len(seeds):
            marks = T.PARTIAL_MARK + marks
        found[seeds.index] = marks
    return found


def caveat_notes(frame: pd.DataFrame, marks: pd.Series, hue: str = "precision") -> list[str]:
    """The throughput tables' footnotes for the ``marks`` (:func:`bar_marks`) drawn, in the
    tables' order (:class:`~nettebench.report.grids.Marks`)."""
    used = set("".join(marks.dropna()))
    marked = frame[marks.reindex(frame.index).fillna("").str.contains(C.UNSTABLE_MARK)]
    cells = [f"{label} {name}" for label, name in zip(marked["label"], marked[hue], strict=True)]
    return Marks(
        partial=T.PARTIAL_MARK in used,
        interference="share" if C.INTERFERENCE_MARK in used else None,
        impossible=C.IMPOSSIBLE_MARK in used,
        unstable=cells or None,
        within_noise=C.WITHIN_NOISE_MARK in used,
    ).notes()


def precision_bar_panels(
    runs: pd.DataFrame, facets, value: str, ylabel: str, marks, status="status", outcomes=None
):
    """One panel per (title, frame) facet: bars of ``value`` by row label, one per precision
    (colours fixed across the figure), each with its mark (``marks``: one series per facet,
    as :func:`grid_marks` gives). The figure and its axes."""
    panels = []
    for (title, frame), facet_marks in zip(facets, marks, strict=True):
        bars = bar_frame(frame, value, status=status).assign(mark=facet_marks)
        panels.append((title, bars, T.sort_precisions(frame["precision"])))
    colors = precision_colors(runs["precision"].dropna().astype(str))
    return bar_panels(panels, colors, ylabel, outcomes=outcomes)


def equal(column: pd.Series, value: Any) -> pd.Series:
    """Rows whose value is ``value``, a missing value matching missing ones."""
    return column.isna() if T.is_missing(value) else column == value
