"""Comparisons in the tables: how many times faster one cell is than another, and whether the
seeds support that it is faster at all (:mod:`nettebench.report.stats`).

A speed-up is the ratio of mean seconds over seeds, ``reference / other`` (above 1: the other
cell is faster); it carries ``(ns)`` when Welch's t-test on the per-seed seconds does not
support a difference and ``(n=1)`` when one side has a single seed. Used by the time table
(each precision against O0), the machines table (each setup against the first) and the version
table (each version against the first).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from nettebench.records import files as records
from nettebench.report import format as T
from nettebench.report import stats
from nettebench.report.grids import GROUP_KEYS, Grid, device_title, groups, row_keys
from nettebench.report.setups import title_suffix

BASELINE_PRECISION = "O0"


def seconds(cells: pd.DataFrame, value: str = "time_for_epochs_s") -> list[float]:
    """The per-seed values of the finished cells among ``cells``."""
    ok = cells[cells["status"] == records.STATUS_OK]
    return stats.finite(ok[value])


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
                text = speedup_text(reference, values, approx=extrapolated)
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
