"""The CPU baselines against the matrix cells: the study's 4-vCPU VM against its T4."""

from __future__ import annotations

from typing import Any

import pandas as pd

from nettebench.records import files as records
from nettebench.report import caveats as C
from nettebench.report import format as T
from nettebench.report import stats
from nettebench.report.grids import APPROX_NOTE, LEGEND, NO_CELLS_NOTE


def _fastest_matrix(
    matrix_ok: pd.DataFrame, dataset: Any, model: Any, batch_size: Any, machine: Any = None
) -> dict[str, Any] | None:
    """The fastest precision (per epoch) of the model's matrix cells, and O0 on the same setup.

    Only cells of the CPU baseline's own run count (the same machine label, or none), so a
    merged study compares each machine's CPU with its own GPU. Cells at the CPU baseline's
    batch size are preferred; otherwise any batch size counts (and the table says which).
    """
    same = matrix_ok[(matrix_ok["dataset"] == dataset) & (matrix_ok["model"] == model)]
    if "machine" in same:
        same = same[same["machine"].map(T.fmt_value) == T.fmt_value(machine)]
    if same.empty:
        return None
    if (same["batch_size"] == batch_size).any():
        same = same[same["batch_size"] == batch_size]
    # per setup: two environments on one machine are not averaged together
    keys = ["device_name", "setup", "batch_size", "precision"]
    means = (
        same.assign(extrapolated=same["extrapolated"].map(T.as_bool))
        .groupby(keys, sort=False, dropna=False)
        .agg(epoch_s=("epoch_s_median", "mean"), approx=("extrapolated", "any"))
        .dropna(subset=["epoch_s"])
    )
    if means.empty:
        return None
    device, setup, batch, precision = means["epoch_s"].idxmin()
    best = means.loc[(device, setup, batch, precision)]
    o0 = (device, setup, batch, "O0")
    baseline = means.loc[o0] if o0 in means.index else None

    def seeds_text(key: tuple) -> str:
        """mean ± 95 % CI of the group's per-seed seconds per epoch."""
        match = pd.Series(True, index=same.index)
        for column, value in zip(keys, key, strict=True):
            match &= same[column].isna() if T.is_missing(value) else same[column] == value
        return stats.with_ci(stats.summarize(same.loc[match, "epoch_s_median"]), T.fmt_seconds)

    return {
        "device": device,
        "batch_size": batch,
        "precision": precision,
        "epoch_s": best["epoch_s"],
        "epoch_text": seeds_text((device, setup, batch, precision)),
        "approx": bool(best["approx"]),
        "o0_epoch_s": None if baseline is None else baseline["epoch_s"],
        "o0_text": None if baseline is None else seeds_text(o0),
        "o0_approx": False if baseline is None else bool(baseline["approx"]),
    }


def cpu_vs_gpu_markdown(runs: pd.DataFrame) -> str:
    """Each CPU baseline next to the same model's fastest matrix cell and its O0 cell."""
    baselines = runs[runs["kind"] == "cpu_baseline"]
    matrix_ok = runs[(runs["kind"] == "matrix") & (runs["status"] == records.STATUS_OK)]
    note = (
        "Seconds per epoch (median epoch wall time, `summary.epoch_s_median`; matrix cells: "
        f"{T.SEEDS_TEXT}) "
        "of each CPU baseline cell next to the same dataset and model in the matrix; "
        "speed-up = CPU seconds / device seconds."
    )
    header = [
        "dataset",
        "model",
        "batch",
        "threads",
        "CPU",
        "CPU s/epoch",
        "device",
        "fastest precision",
        "s/epoch",
        "speed-up",
        "O0 s/epoch",
        "O0 speed-up",
    ]
    rows, unmatched, approx, not_ok, disturbed = [], 0, False, False, False
    for _, cpu in baselines.iterrows():
        cpu_ok = cpu["status"] == records.STATUS_OK
        cpu_s = cpu["epoch_s_median"] if cpu_ok else None
        cpu_text = T.outcome_cell(
            [cpu["status"]], cpu_s, T.fmt_seconds, approx=T.as_bool(cpu["extrapolated"])
        )
        if cpu_ok and T.as_bool(cpu.get("interference")):  # report.caveats
            cpu_text += C.INTERFERENCE_MARK
            disturbed = True
        not_ok |= not cpu_ok
        row = [
            cpu["dataset"],
            cpu["model"],
            T.fmt_value(cpu["batch_size"]),
            T.fmt_value(cpu["threads"]),
            "" if T.is_missing(cpu.get("env_cpu_model")) else cpu["env_cpu_model"],
            cpu_text,
        ]
        match = _fastest_matrix(
            matrix_ok, cpu["dataset"], cpu["model"], cpu["batch_size"], cpu.get("machine")
        )
        if match is None:
            unmatched += 1
            rows.append([*row, "no matching matrix cell"])
            continue
        precision = match["precision"]
        if match["batch_size"] != cpu["batch_size"]:
            precision += f" (batch {T.fmt_value(match['batch_size'])})"
        o0 = match["o0_epoch_s"]
        rows.append(
            [
                *row,
                T.fmt_value(match["device"]),
                precision,
                T.outcome_cell(
                    ["ok"],
                    match["epoch_s"],
                    lambda _, m=match: m["epoch_text"],
                    approx=match["approx"],
                ),
                T.fmt_speedup(cpu_s / match["epoch_s"]) if cpu_s is not None else "",
                T.outcome_cell(
                    ["ok"] if o0 is not None else [],
                    o0,
                    lambda _, m=match: m["o0_text"],
                    approx=match["o0_approx"],
                ),
                T.fmt_speedup(cpu_s / o0) if cpu_s is not None and o0 is not None else "",
            ]
        )
        approx |= match["approx"] or match["o0_approx"]
        approx |= cpu_text.startswith(T.APPROX_MARK)
    if baselines.empty:
        empty = NO_CELLS_NOTE if runs.empty else "No CPU baseline cells in the study."
        return T.document("CPU versus GPU", note, [], empty=empty)
    notes = []
    if unmatched:
        notes.append(
            f"{unmatched} of {len(baselines)} CPU baseline cell(s) have no finished matrix cell "
            "of the same dataset and model to compare with."
        )
    if approx:
        notes.append(APPROX_NOTE)
    if not_ok:
        notes.append(LEGEND)
    if disturbed:
        notes.append(C.interference_note("cell"))
    table = T.pipe_table(header, rows, "llrrlrllrrrr")
    return T.document(
        "CPU versus GPU", note, [T.section("CPU baselines", table, notes=notes, level=2)]
    )
