"""The profiled cells' records read into frames: each ``profile.json`` with the three tables
``python -m nettebench profiling`` wrote beside it (``kernels.csv``, ``cpu_ops.csv``,
``categories.csv``), one row per cell (:func:`cells_frame`, with its display label) and one per
cell and category (:func:`categories_frame`, written as ``kernel_categories.csv``, which the
category figure reads). :mod:`nettebench.report.tables.kernels` renders them. Imports pandas,
no torch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from nettebench.profiling import CATEGORIES_FILE, CATEGORY_COLUMNS, CPU_OPS_FILE, KERNELS_FILE
from nettebench.report import caveats as C
from nettebench.report import format as T
from nettebench.report.grids import tell_apart
from nettebench.vocabulary.cell import PARAMETER_NAMES

CELL_COLUMNS = ("dataset", "model", "precision", "batch_size")
RECORD_COLUMNS = ("label", "cell_id", "device_type", "device_name", "backend", "status", "steps")
RECORD_COLUMNS += ("source", "category", "calls", "total_ms", "ms_per_step", "share_pct", "path")
# Parameters that never go into a label: the section heading or the precision column shows them,
# or they say how a cell was trained rather than what runs in a step.
_NOT_LABEL_KEYS = ("dataset", "precision", "epochs", "seed", "max_steps", "lr", "lr_schedule")


class ProfileRecordError(ValueError):
    """A profile's files cannot be read; the message names the file."""


def read_profile(summary_path: str | Path) -> dict[str, Any]:
    """One profiled cell: its profile.json with its three tables (as frames) beside it."""
    path = Path(summary_path)
    try:
        record = json.loads(path.read_text())
        files = {"kernels": KERNELS_FILE, "cpu_ops": CPU_OPS_FILE, "categories": CATEGORIES_FILE}
        tables = {name: pd.read_csv(path.parent / file) for name, file in files.items()}
    except (OSError, ValueError) as error:
        raise ProfileRecordError(f"{path}: cannot read the profile ({error})") from None
    for key in ("status", "cell", "backend", "window", "device"):
        if key not in record:
            raise ProfileRecordError(f"{path}: profile.json lacks the key {key!r}")
    return {"record": record, "path": str(path.parent), **tables}


def cells_frame(profiles: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """One row per profile: its cell parameters, device, backend, status and a display label."""
    rows = []
    for profile in profiles:
        record = profile["record"]
        rows.append(
            {
                **{key: record["cell"].get(key) for key in PARAMETER_NAMES},
                "cell_id": record.get("cell_id"),
                "device_type": record["device"].get("type"),
                "device_name": record["device"].get("name"),
                "backend": record["backend"],
                "status": record["status"],
                "message": record.get("message"),
                "steps": (record["window"] or {}).get("steps_profiled"),
                "source": record.get("category_source"),
                "interference": (record.get("conditions") or {}).get("interference"),
                "path": profile["path"],
            }
        )
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame = frame.sort_values(
        ["dataset", "model", "batch_size", "precision"],
        key=lambda column: (
            column.map(T.precision_rank) if column.name == "precision" else column.astype(str)
        ),
    ).reset_index(drop=True)
    keys = [k for k in PARAMETER_NAMES if k not in _NOT_LABEL_KEYS]
    marks = [C.INTERFERENCE_MARK if flag is True else "" for flag in frame["interference"]]
    frame["label"] = [
        f"{label} {precision}{mark}"
        for label, precision, mark in zip(
            T.row_labels(frame, keys), frame["precision"], marks, strict=True
        )
    ]
    return _distinct_labels(frame)


# What tells two profiles of one label apart: two seeds, two machines' labels, two devices
# (unlabelled copies from two machines merged together).
_TELL_APART = ("seed", "machine", "device_name")


def _distinct_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """Profiles that share a label keep a row each, named by what differs between them (seed,
    machine, device); failing all of those, by the part of their folders that differs (never
    the whole results path)."""
    frame["label"] = tell_apart(frame["label"], frame, _TELL_APART)
    for label, group in frame.groupby("label", sort=False):
        if len(group) < 2:
            continue
        parts = [Path(path).parts for path in group["path"]]
        common = len(os.path.commonprefix(parts))
        frame.loc[group.index, "label"] = [
            f"{label} · {'/'.join(p[common:]) or '.'}" for p in parts
        ]
    return frame


def categories_frame(profiles: Sequence[dict[str, Any]], cells: pd.DataFrame) -> pd.DataFrame:
    """kernel_categories.csv: one row per profiled cell and category."""
    rows = [
        {**cell, **category[list(CATEGORY_COLUMNS)]}  # the category's source over the cell's
        for (_, cell), profile in zip(cells.iterrows(), in_order(profiles, cells), strict=True)
        for _, category in profile["categories"].iterrows()
    ]
    return pd.DataFrame(rows, columns=[*CELL_COLUMNS, *RECORD_COLUMNS])


def in_order(profiles: Sequence[dict[str, Any]], cells: pd.DataFrame) -> list[dict[str, Any]]:
    by_path = {profile["path"]: profile for profile in profiles}
    return [by_path[path] for path in cells.get("path", [])]  # no profiles: no columns
