"""Data-parallel scaling: a cell's img/s at N processes against the same cell at one.

Scaling efficiency is ``img/s at N / (N x img/s at 1)``, the number NVIDIA's
DeepLearningExamples and MLPerf report beside every multi-GPU result: 100 % means N devices do
N times the work of one; what is missing went to the gradient all-reduce, to waiting for the
slowest process, or to a shared input pipeline. The twin is the same cell in every parameter
but ``processes`` (the same global batch, so the same lr and the same data per step); seeds are
averaged. A cell whose one-process twin did not run (or did not finish) says so instead of a
number. Per-process img/s is the total over the processes divided by N.
"""

from __future__ import annotations

import pandas as pd

from nettebench.report import format as T
from nettebench.report.frames.runs import cell_keys
from nettebench.report.grids import NO_CELLS_NOTE
from nettebench.vocabulary.record_keys import STATUS_OK

# Parameters that are not part of a cell's twin: the one compared, and the seeds averaged.
NOT_TWIN_KEYS = ("processes", "seed")
NO_TWIN = "no 1-process twin"
COLUMNS = ("label", "processes", "img_s", "img_s_per_process", "twin_img_s", "efficiency")
COLUMNS += ("status", "note")
EMPTY_NOTE = (
    "No data-parallel cells: set the matrix parameter `processes` (for example `[1, 2]`) to "
    "run cells on several GPUs or CPU processes and compare them with one."
)


def _processes(runs: pd.DataFrame) -> pd.Series:
    """The ``processes`` column, 1 for cells recorded before the parameter existed."""
    if "processes" not in runs:
        return pd.Series(1, index=runs.index)
    return pd.to_numeric(runs["processes"], errors="coerce").fillna(1).astype(int)


def scaling_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per data-parallel cell and process count, with its 1-process row (see module).

    Only groups holding some cell with more than one process appear.
    """
    matrix = runs[runs["kind"] == "matrix"] if "kind" in runs else runs.iloc[0:0]
    if matrix.empty:
        return pd.DataFrame(columns=COLUMNS)
    matrix = matrix.assign(processes=_processes(matrix))
    keys = [k for k in cell_keys(runs) if k not in NOT_TWIN_KEYS]
    keys += [k for k in ("device_type",) if k in matrix]
    rows = []
    labels = T.row_labels(matrix, [k for k in keys if k != "dataset"])
    matrix = matrix.assign(_label=labels)
    for _, group in matrix.groupby([matrix[k].map(T.fmt_value) for k in keys], sort=False):
        if group["processes"].max() <= 1:
            continue
        by_count = dict(list(group.groupby("processes", sort=True)))
        twin = _mean_rate(by_count[1]) if 1 in by_count else None
        for count, part in by_count.items():
            img_s = _mean_rate(part)
            efficiency = None if img_s is None or twin is None else img_s / (count * twin)
            rows.append(
                {
                    "label": f"{group['_label'].iloc[0]} on {group['dataset'].iloc[0]}",
                    "processes": count,
                    "img_s": img_s,
                    "img_s_per_process": None if img_s is None else img_s / count,
                    "twin_img_s": twin,
                    "efficiency": efficiency,
                    "status": _status(part),
                    "note": NO_TWIN if twin is None else "",
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def _mean_rate(part: pd.DataFrame) -> float | None:
    ok = part[part["status"] == STATUS_OK]
    values = pd.to_numeric(ok["train_img_s"], errors="coerce").dropna()
    return float(values.mean()) if len(values) else None


def _status(part: pd.DataFrame) -> str:
    """ok when some seed finished, else the first other outcome (oom, unsupported)."""
    statuses = list(part["status"].astype(str))
    return STATUS_OK if STATUS_OK in statuses else statuses[0]


def _fmt(value, fmt) -> str:
    return "—" if value is None or pd.isna(value) else fmt(value)


def scaling_markdown(runs: pd.DataFrame) -> T.Document:
    """The scaling table: total and per-process img/s, the twin's img/s, the efficiency."""
    frame = scaling_frame(runs)
    note = (
        "Training img/s (`summary.train_img_s`, the sum over the processes, steady state, "
        "warm-up excluded) of each data-parallel cell, per process, and its scaling efficiency "
        "against the same cell at one process: img/s at N / (N x img/s at 1), mean over seeds."
    )
    if frame.empty:
        return T.document("Scaling", note, [], empty=NO_CELLS_NOTE if runs.empty else EMPTY_NOTE)
    header = ["Cell", "Processes", "img/s", "img/s per process", "img/s at 1 process"]
    header += ["Scaling efficiency"]
    body = []
    for row in frame.itertuples(index=False):
        if row.status != STATUS_OK:
            outcome = T.OUTCOME_TEXT.get(row.status, row.status)
            body.append(
                [row.label, row.processes, outcome, outcome, _fmt(row.twin_img_s, T.fmt_rate)]
            )
            continue
        efficiency = row.note or _fmt(row.efficiency, T.fmt_percent)
        body.append(
            [
                row.label,
                row.processes,
                _fmt(row.img_s, T.fmt_rate),
                _fmt(row.img_s_per_process, T.fmt_rate),
                _fmt(row.twin_img_s, T.fmt_rate),
                efficiency,
            ]
        )
    table = T.table(header, body, align="lrrrrr")
    return T.document("Scaling", note, T.section("Data-parallel scaling", table, level=2))
