"""Energy by model x precision: the study's question in joules per trained image, then img/s
per watt (``j_per_img``, ``img_s_per_w`` in runs.csv, :func:`nettebench.records.energy.
energy_columns`), through the shared grid engine, so a disturbed window carries ‡ as in every
other table; a cell no counter measured reads "not measured", never 0.
"""

from __future__ import annotations

import html

import pandas as pd

from nettebench.report import format as T
from nettebench.report.grids import Grid, grid_sections, model_precision_grids, no_matrix
from nettebench.vocabulary.record_keys import STATUS_OK

NOT_MEASURED = "not measured"

NOTE = (
    "Energy per trained image (`j_per_img` in runs.csv): the joules of a cell's steady training "
    "steps over the images they trained (warm-up, the loader's start-up and validation apart), "
    "and its inverse per watt (`img_s_per_w`); from the GPU's NVML counter, or a CPU's RAPL "
    "counter (every process on its packages). Intervals only where a counter measured the "
    f"energy. *{NOT_MEASURED}*: the cell ran, but no counter measured its steady steps. "
    "Formulas: docs/energy.md."
)


fmt_joules = T.number_format(".3g")  # 0.123 J: small values keep their digits


def fmt_joules_or_not_measured(value: object) -> str:
    """A finished cell's J/img, or "not measured" where no counter measured it (never 0)."""
    return NOT_MEASURED if T.is_missing(value) else fmt_joules(value)


def energy_grids(runs: pd.DataFrame, value: str) -> list[Grid]:
    """The model x precision grids of ``value`` (``j_per_img`` or ``img_s_per_w``); a blank
    table cell where some seed ran ok reads "not measured" (no energy counter)."""
    interval = (f"{value}_low", f"{value}_high")
    return model_precision_grids(
        runs, value, fmt_joules, interval=interval, unstable=True, not_measured=NOT_MEASURED
    )


def _sources(runs: pd.DataFrame) -> str:
    matrix = runs[runs["kind"] == "matrix"]
    found = sorted({str(s) for s in matrix.get("energy_source", []) if not T.is_missing(s)})
    return "Energy sources: " + "; ".join(found) + "." if found else ""


def energy_markdown(runs: pd.DataFrame) -> T.Document:
    """The energy table (see the module docstring)."""
    sections = []
    if len(runs[runs["kind"] == "matrix"]):
        for title, value in (
            ("Joules per trained image", "j_per_img"),
            ("Trained img/s per watt", "img_s_per_w"),
        ):
            sections.append(T.Heading(2, title))
            sections += grid_sections(energy_grids(runs, value), level=3)
    return T.document(
        "Energy by model and precision",
        f"{NOTE} {_sources(runs)}".strip(),
        sections,
        empty=no_matrix(runs),
    )


def measured(runs: pd.DataFrame) -> pd.DataFrame:
    """The matrix cells whose energy was measured (for the front page's sentence)."""
    matrix = runs[(runs["kind"] == "matrix") & (runs["status"] == STATUS_OK)]
    if "j_per_img" not in matrix:
        return matrix.iloc[0:0]
    return matrix[~matrix["j_per_img"].map(T.is_missing)]


def energy_sentence(runs: pd.DataFrame) -> str:
    """The front page's energy sentence (an HTML paragraph), only when energy was measured:
    joules per image of each model and precision (mean over seeds), ‡ where disturbed."""
    found = measured(runs)
    if found.empty:
        return ""
    parts = []
    for (device, model), cells in found.groupby(["device_name", "model"], sort=False):
        each = []
        for precision in T.sort_precisions(cells["precision"]):
            seeds = cells[cells["precision"] == precision]
            joules = seeds["j_per_img"].astype(float).mean()
            disturbed = seeds["interference"].map(T.as_bool).any()
            each.append(f"{precision} {fmt_joules(joules)}{'‡' if disturbed else ''}")
        parts.append(f"{model} on {device}: {', '.join(each)} J per trained image")
    sources = sorted({str(s).split(" (")[0] for s in found["energy_source"]})
    text = f"Energy: {'; '.join(parts)} ({', '.join(sources)}; table Energy)."
    return f'<p class="answer">{html.escape(text)}</p>\n'
