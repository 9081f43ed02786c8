"""Comparisons in the tables: how many times faster one cell is than another, and whether the
seeds support that it is faster at all (:mod:`nettebench.report.stats`).

A speed-up is the ratio of mean seconds over seeds, ``reference / other`` (above 1: the other
cell is faster); it carries ``(ns)`` when Welch's t-test on the per-seed seconds does not
support a difference. With a single seed on a side the seeds cannot be tested, but the cell's
own steady steps can: the speed-up is then the ratio of the two cells' steady training rates
with its 95 % interval (:func:`nettebench.report.stats.ratio_interval` on their block rates,
``summary.train_block_img_s``), written ``Rx [L-H]``, and ``(ns)`` when the interval holds 1.
Only records without step times still print ``(n=1)``. Used by the time table (each precision
against O0), the machines table (each setup against the first), the version table (each
version against the first) and the report's front page (each loader against the first).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

from nettebench.report import format as T
from nettebench.report import stats
from nettebench.report.grids import GROUP_KEYS, Grid, device_title, groups, row_keys
from nettebench.report.setups import SETUP_COLUMNS, title_suffix
from nettebench.vocabulary.record_keys import STATUS_OK

BASELINE_PRECISION = "O0"


def seconds(cells: pd.DataFrame, value: str = "time_for_epochs_s") -> list[float]:
    """The per-seed values of the finished cells among ``cells``."""
    ok = cells[cells["status"] == STATUS_OK]
    return stats.finite(ok[value])


def block_rates(value: Any) -> list[float]:
    """A cell's ``train_block_img_s`` as numbers (a list in a fresh frame, JSON in runs.csv)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return stats.finite(value) if isinstance(value, list | tuple) else []


def single_blocks(cells: pd.DataFrame) -> list[float] | None:
    """The block rates of the one finished seed among ``cells``; None unless exactly one."""
    ok = cells[cells["status"] == STATUS_OK]
    if len(ok) != 1 or "train_block_img_s" not in ok:
        return None
    return block_rates(ok["train_block_img_s"].iloc[0]) or None


def formula_note(reference: str, other: str) -> str:
    """What a speed-up cell shows, as its caption states it: the formula each of its two forms
    is computed by (:func:`cells_speedup_text`), so a reader can recompute it from runs.csv."""
    return (
        f"A speed-up is how many times faster {other} is than {reference} (above 1: faster), "
        "by one of two formulas, told apart by its form. `Rx [L-H]` (one seed a side with step "
        f"times): the steady training rate of {other} / that of {reference}, each the geometric "
        "mean of the cell's block rates (`train_block_img_s`: images / seconds of 10 "
        "consecutive runs of steady steps); it leaves out validation, warm-up and each epoch's "
        "loader start-up, so it can differ from the ratio of the seconds above. `Rx` (several "
        f"seeds a side, or no step times): mean seconds of {reference} / mean seconds of "
        f"{other} (`summary.time_for_epochs_s`)."
    )


def ratio_text(found: stats.Ratio) -> str:
    """``1.10x [1.04-1.16]`` or ``0.98x [0.91-1.05] (ns)`` (just ``1.10x`` without an
    interval)."""
    if found.ratio is None:
        return ""
    if found.low is None:
        return f"{found.ratio:.2f}x {stats.UNTESTED_MARK}"
    text = f"{found.ratio:.2f}x [{found.low:.2f}-{found.high:.2f}]"
    return text if found.supported else f"{text} {stats.NOT_SUPPORTED_MARK}"


# What makes two cells' compute ceilings the same measurement (their ratio should be 1): the
# step the ceiling times (model, precision, batch, image size, memory format, compile, processes)
# on the same machine and software (the setup: device, driver, CUDA, cuDNN, torch, CPU capability;
# the libraries that build the step). Only what the ceiling ignores may differ (the loader, its
# workers, a Pillow version): a comparison of setups or versions changes the ceiling itself, so
# the ceilings' ratio there is the result, not drift between two jobs.
SAME_CEILING = (
    "model",
    "precision",
    "batch_size",
    "image_size",
    "channels_last",
    "compile",
    "processes",
    "device_type",
    *SETUP_COLUMNS,
    "setup_id",
    "env_torchvision",
    "env_apex",
    "torchvision",
    "apex",
)


def ceiling_drift(reference: pd.DataFrame, other: pd.DataFrame) -> float | None:
    """|log| of the ratio of two single-seed cells' compute ceilings when both measured the
    same thing (every :data:`SAME_CEILING` column alike: a loader comparison), so any difference
    between them is the machine drifting between the two jobs; else None (a comparison of
    precisions, setups or library versions, whose ceilings differ by what is compared)."""
    a, b = (cells[cells["status"] == STATUS_OK] for cells in (reference, other))
    if len(a) != 1 or len(b) != 1 or "ceiling_img_s" not in a:
        return None
    if any(str(a[k].iloc[0]) != str(b[k].iloc[0]) for k in SAME_CEILING if k in a):
        return None
    ceilings = pd.to_numeric(pd.concat([a["ceiling_img_s"], b["ceiling_img_s"]]), errors="coerce")
    if ceilings.isna().any() or (ceilings <= 0).any():
        return None
    return abs(math.log(ceilings.iloc[0] / ceilings.iloc[1]))


def cells_speedup(reference: pd.DataFrame, other: pd.DataFrame) -> stats.Ratio | None:
    """The within-cell comparison of two single-seed cells (other's steady rate over the
    reference's: above 1, other is faster); None when a side has several seeds or no steps.

    The steps' interval says what the noise within the two jobs allows; between the jobs the
    machine itself may drift (another tenant, the clock). Where both cells measured the same
    compute ceiling in their own jobs, the ceilings' disagreement is that drift, and the
    interval is widened by it on both sides (``stats.widen``)."""
    base, found = single_blocks(reference), single_blocks(other)
    if base is None or found is None:
        return None
    result = stats.ratio_interval(found, base)
    drift = ceiling_drift(reference, other)
    return result if drift is None else stats.widen(result, drift)


def cells_speedup_text(
    reference: pd.DataFrame, other: pd.DataFrame, value: str = "time_for_epochs_s", **kwargs
) -> str:
    """:func:`speedup_text` of two groups of cells (their seeds): Welch on the seeds' ``value``
    where both sides have several, else the within-cell ratio of steady rates and its interval."""
    within = cells_speedup(reference, other)
    if within is None:
        return speedup_text(seconds(reference, value), seconds(other, value), **kwargs)
    text = ratio_text(within)
    return T.APPROX_MARK + text if kwargs.get("approx") and text else text


def speedup_text(reference: Iterable[Any], other: Iterable[Any], *, approx: bool = False) -> str:
    """``1.8x``, ``1.02x (ns)`` or ``1.8x (n=1)``: mean reference / mean other, and its mark."""
    reference, other = stats.finite(reference), stats.finite(other)
    if not reference or not other:
        return ""
    ratio = (sum(reference) / len(reference)) / (sum(other) / len(other))
    text = f"{ratio:.2f}x" + stats.comparison_mark(reference, other)
    return T.APPROX_MARK + text if approx else text


def speedup_grids(
    runs: pd.DataFrame, value: str = "time_for_epochs_s", baseline: str = BASELINE_PRECISION
) -> list[Grid]:
    """Each precision's speed-up over ``baseline`` (same model, setup and parameters), as
    model x precision tables like the time table's; none where no baseline cell finished."""
    matrix = runs[runs["kind"] == "matrix"]
    grids = []
    for (dataset, epochs, _, _), table in groups(matrix, GROUP_KEYS):
        precisions = [p for p in T.sort_precisions(table["precision"]) if p != baseline]
        if baseline not in set(table["precision"]) or not precisions:
            continue
        labels = T.row_labels(table, row_keys(runs))
        rows, counts, approx, not_ok = [], [], False, False
        for label in labels.unique():
            base = table[(labels == label) & (table["precision"] == baseline)]
            reference = seconds(base, value)
            row = [label]
            for precision in precisions:
                seeds = table[(labels == label) & (table["precision"] == precision)]
                values = seconds(seeds, value)
                extrapolated = any(
                    map(T.as_bool, pd.concat([base, seeds])["extrapolated"])
                ) and bool(reference and values)
                text = cells_speedup_text(base, seeds, value, approx=extrapolated)
                if not text:
                    text = T.outcome_cell(list(seeds["status"]), None, str)
                    not_ok |= text in T.OUTCOME_TEXT.values()
                else:
                    counts += [len(reference), len(values)]
                approx |= extrapolated
                row.append(text)
            rows.append(row)
        title = (
            f"{dataset}, {T.fmt_value(epochs)} epochs, {device_title(table)}"
            f"{title_suffix(table, matrix)}"
        )
        grids.append(
            Grid(
                title=title,
                header=["model", *precisions],
                rows=rows,
                seed_counts=counts,
                approx=approx,
                partial=False,
                not_ok=not_ok,
            )
        )
    return grids
