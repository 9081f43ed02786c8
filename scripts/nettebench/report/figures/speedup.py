"""The speed-up figure: the time table's "Speed-up over O0" grid drawn. Each bar is
:func:`nettebench.report.compare.speedup` (the one definition: a ratio of steady rates, never of
seconds), its whisker the interval between processes, and over it the table's own mark (``~``,
``(ns)``, ``(n=1)``, ``‡ (no verdict)``), its verdict corrected over every bar of the figure, as
the table's over its family.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from nettebench.report import compare, stats
from nettebench.report import format as T
from nettebench.report.figures import facets as F
from nettebench.report.figures.plotting import bar_panels, empty_figure, finish, precision_colors
from nettebench.report.grids import APPROX_NOTE, LEGEND

BASELINE_PRECISION = compare.BASELINE_PRECISION  # the study's pure-fp32 level
REFERENCE_LABEL = f"{BASELINE_PRECISION} = 1"  # the legend's name of the dashed line at 1
WHISKER_NOTE = (
    f"Whisker: the speed-up's {stats.LEVEL} Welch interval between processes (the table's `[L-H]`)."
)


def speedup_frame(frame: pd.DataFrame, family: compare.Family) -> pd.DataFrame:
    """One bar per (row label, precision) of a facet, each verdict added to ``family``; its
    mark is written out (:func:`finish_marks`) once the family is complete."""
    rows = []
    for label in frame["label"].unique():
        base = frame[(frame["label"] == label) & (frame["precision"] == BASELINE_PRECISION)]
        if not compare.seconds(base):
            continue
        for precision in T.sort_precisions(frame["precision"]):
            if precision == BASELINE_PRECISION:
                continue
            seeds = frame[(frame["label"] == label) & (frame["precision"] == precision)]
            if seeds.empty:
                continue
            names = (f"{label} {BASELINE_PRECISION}", f"{label} {precision}")
            found = compare.speedup(base, seeds, names=names, family=family)
            approx = compare.speedup_approx(base, seeds)
            mark = (T.APPROX_MARK if approx else "", found)
            bar = {"label": label, "hue": str(precision), "mark": mark, "disturbed": None}
            if not found:  # no ratio: each seed's outcome, written in the bar's place
                rows += [{**bar, "status": status} for status in seeds["status"]]
                continue
            low, high = (np.nan if end is None else end for end in (found.low, found.high))
            interval = {"value": found.ratio, "low": low, "high": high}
            rows.append({**bar, **interval, "status": "ok", "disturbed": found.disturbed})
    columns = ["label", "hue", "status", "value", "low", "high", "mark", "disturbed"]
    return pd.DataFrame(rows, columns=columns)


def finish_marks(bars: pd.DataFrame) -> pd.DataFrame:
    """``bars`` with each mark written out, once the family of its verdicts is complete."""

    def mark(pair):
        approx, found = pair
        return " ".join(m for m in (approx, found.mark if found else "") if m) or np.nan

    return bars.assign(mark=bars["mark"].map(mark)) if len(bars) else bars


def plot_speedup(runs: pd.DataFrame) -> Figure:
    title = f"Speed-up over {BASELINE_PRECISION}"
    matrix_facets = F.matrix_facets(runs)
    if not matrix_facets:
        return empty_figure(title, "no data: no matrix cells in runs.csv")
    family = compare.Family()  # every bar of the figure, as every verdict of the table
    facets = [(t, speedup_frame(frame, family)) for t, frame in matrix_facets]
    facets = [(t, finish_marks(bars), T.sort_precisions(bars["hue"])) for t, bars in facets]
    facets = [facet for facet in facets if not facet[1].empty]
    if not facets:
        return empty_figure(title, f"no {BASELINE_PRECISION} cells to compare against")
    colors = precision_colors(runs["precision"].dropna().astype(str))
    ylabel = f"times as fast as {BASELINE_PRECISION}"
    fig, _ = bar_panels(facets, colors, ylabel, reference=(1.0, REFERENCE_LABEL))
    fig.suptitle(title)
    notes = [note for _, bars, _ in facets for note in facet_notes(bars)]
    return finish(fig, [WHISKER_NOTE, *notes])


def facet_notes(bars: pd.DataFrame) -> list[str]:
    """What the marks of one panel mean, as its table (the time table's speed-up grid) says:
    ``~`` its extrapolated note, ``(ns)`` / ``(n=1)`` its comparison note, ``‡ (no verdict)``
    its note naming the disturbed sides, ``OOM`` / ``n/a`` its legend."""
    marks = " ".join(str(m) for m in bars["mark"].dropna())
    notes = [APPROX_NOTE] if T.APPROX_MARK in marks else []
    explained = [
        note
        for mark, note in ((stats.NOT_SUPPORTED_MARK, stats.NOT_SUPPORTED_NOTE),
                           (stats.UNTESTED_MARK, stats.UNTESTED_NOTE))
        if mark in marks
    ]  # fmt: skip
    notes += [f"{'; '.join(explained)}. {stats.FORMULAS}"] if explained else []
    withheld = [found for found in bars["disturbed"] if found is not None]
    notes += [compare.no_verdict_note(withheld)] if withheld else []
    failed = bars.loc[bars["status"] != "ok", "status"]
    return notes + ([LEGEND] if failed.isin(list(T.OUTCOME_TEXT)).any() else [])
