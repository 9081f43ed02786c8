"""The time-to-accuracy figure: seconds until validation top-1 first reached the config's
``target_top1``, one bar per precision, each bar as its cell in the time-to-accuracy table
(``not reached`` where no seed got there, ``(k/n)`` where only some did)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from nettebench.report import format as T
from nettebench.report import stats
from nettebench.report.figures import facets as F
from nettebench.report.figures.plotting import empty_figure, finish
from nettebench.report.grids import LEGEND
from nettebench.report.tables import time_to_accuracy as tta


def plot_time_to_accuracy(runs: pd.DataFrame) -> Figure:
    """Seconds until validation top-1 first reached ``target_top1``, by model and precision."""
    target = tta.target_of(runs)
    if target is None:
        return empty_figure("Time to accuracy", "no target: set target_top1 in the config")
    title = f"Time to {target:g} % validation top-1"
    facets = F.matrix_facets(runs)
    if not facets:
        return empty_figure(title, "no data: no matrix cells in runs.csv")
    # Each bar as its table cell (tables.time_to_accuracy.cell_text): the mean over the seeds
    # that reached the target, "(k/n)" over it where only some did; else the cell's text in
    # the bar's place (not reached, partial epochs, OOM, n/a).
    texts = [_target_texts(frame) for _, frame in facets]
    reached = pd.to_numeric(runs["time_to_target_s"], errors="coerce").notna()
    reached &= (runs["status"] == "ok") & ~runs["extrapolated"].map(T.as_bool)
    facets = [
        (t, f.assign(target_status=_target_status(text, reached[f.index])))
        for (t, f), text in zip(facets, texts, strict=True)
    ]
    marks = [text.map(lambda t: t.rsplit(" ", 1)[1] if t.endswith(")") else "") for text in texts]
    fig, _ = F.precision_bar_panels(
        runs,
        facets,
        "time_to_target_s",
        f"seconds to target (mean ± {stats.LEVEL} CI)",
        marks,
        status="target_status",
        outcomes={"not_reached": tta.NOT_REACHED, "partial": tta.PARTIAL},
    )
    fig.suptitle(title)
    shown = {t for text in texts for t in text}
    notes = [tta.PARTIAL_NOTE] if tta.PARTIAL in shown else []
    notes += [tta.NOT_REACHED_NOTE] if tta.NOT_REACHED in shown else []
    notes += [tta.SOME_NOTE] if any(t.endswith(")") for t in shown) else []
    notes += [LEGEND] if shown & set(T.OUTCOME_TEXT.values()) else []
    return finish(fig, notes)


# The status a time-to-accuracy bar is drawn with, for a table cell without a number.
_TARGET_STATUS = {
    tta.NOT_REACHED: "not_reached",
    tta.PARTIAL: "partial",
    **{text: status for status, text in T.OUTCOME_TEXT.items()},
}


def _target_status(texts: pd.Series, reached: pd.Series) -> list[str]:
    """Per row: ok where its seed reached the target in a cell the table gives a number, else
    the status that writes the cell's text (:data:`_TARGET_STATUS`) in the bar's place."""
    pairs = zip(texts, reached, strict=True)
    return [_TARGET_STATUS.get(text, "ok" if hit else "not_reached") for text, hit in pairs]


def _target_texts(frame: pd.DataFrame) -> pd.Series:
    """On each row of a facet, its cell's text in the time-to-accuracy table."""
    found = pd.Series("", index=frame.index, dtype=object)
    for _, seeds in frame.groupby([frame["label"], frame["precision"].astype(str)], sort=False):
        found[seeds.index] = tta.cell_text(seeds)
    return found
