"""Records of one measurement, merged from several result trees, counted once.

A merged study can hold two records of the same cell, seed and setup that are not byte for byte
the same: two snapshots of one results folder taken before and after a rerun, or two unlabelled
clusters with the same hardware and software. Counted as two seeds they narrow the interval as
if the cell had been measured twice independently, so only one is kept (byte-identical copies
are left out earlier, by :func:`nettebench.report.frames.runs.read_cells`).

Two records are the same measurement when every column that says *what* was measured and
*where* is equal (:func:`identity_columns`). An ``env_*`` column not named in
:data:`INCIDENTAL_ENV` keeps records apart, so a new environment field errs towards the old
behaviour, never towards merging two machines. Which one is kept: :func:`_rank`; each merge is
reported as one line naming both paths and why one was kept.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import pandas as pd

from nettebench.records.environment import SLURM_KEYS
from nettebench.report import format as T
from nettebench.report.frames.runs import cell_keys
from nettebench.vocabulary.outputs import METRICS_FILE
from nettebench.vocabulary.record_keys import STATUS_OK

# env_* columns that say where and when a record was made, not what was measured on what.
INCIDENTAL_ENV = ("host", "platform", "process_id", "cpu_affinity", "git_dirty", "slurm_job_id")
INCIDENTAL_ENV += SLURM_KEYS
# Other columns of runs that identify the measurement: the device it ran on (a GPU's power
# limit set below its default is part of it: report.caveats).
DEVICE_COLUMNS = ("kind", "cell_id", "device_type", "device_name", "threads")
DEVICE_COLUMNS += ("gpu_power_limit_lowered_w",)


@dataclass(frozen=True)
class Merge:
    """One record left out because ``kept`` describes the same cell, seed and setup."""

    dropped: str  # the left-out record's directory
    kept: str
    why: str

    def line(self) -> str:
        return (
            f"counted once: {self.dropped} and {self.kept} describe the same cell, seed and "
            f"setup; kept {self.kept} ({self.why})"
        )


def identity_columns(runs: pd.DataFrame) -> list[str]:
    """The columns of ``runs`` whose values make two rows the same measurement."""
    env = [c for c in runs.columns if c.startswith("env_") and c[4:] not in INCIDENTAL_ENV]
    return [*cell_keys(runs), *(c for c in DEVICE_COLUMNS if c in runs), *env]


def _written(path: str) -> float:
    try:
        return os.stat(os.path.join(path, METRICS_FILE)).st_mtime
    except OSError:
        return float("-inf")


def _epochs(row: pd.Series) -> int:
    value = pd.to_numeric(row.get("epochs_run"), errors="coerce")
    return -1 if pd.isna(value) else int(value)


def _rank(row: pd.Series, order: int) -> tuple:
    """Sorts the record to keep first: an ``ok`` one (over, say, an OOM caused by another
    process on the GPU), then the one that ran more epochs (a snapshot taken mid-run has fewer),
    then the newer ``metrics.json`` (a rerun replaces a result), then the first listed."""
    return (row["status"] != STATUS_OK, -_epochs(row), -_written(row["path"]), order)


def _why(kept: pd.Series, dropped: pd.Series) -> str:
    """The first rule that told the two apart, in words."""
    if (kept["status"] == STATUS_OK) != (dropped["status"] == STATUS_OK):
        return f"its status is ok, the other's {T.fmt_value(dropped['status'])}"
    if _epochs(kept) != _epochs(dropped):
        return f"it ran {_epochs(kept)} epoch(s), the other {max(_epochs(dropped), 0)}"
    kept_at, dropped_at = _written(kept["path"]), _written(dropped["path"])
    if kept_at != dropped_at:
        stamp = datetime.datetime.fromtimestamp(kept_at).isoformat(timespec="seconds")
        other = datetime.datetime.fromtimestamp(dropped_at).isoformat(timespec="seconds")
        return f"the newer record: written {stamp}, the other {other}"
    return "nothing tells them apart: the first listed"


def merge_duplicates(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[Merge]]:
    """``runs`` with one row per measurement (the kept rows, in their order) and the merges."""
    if runs.empty:
        return runs, []
    columns = identity_columns(runs)
    # as strings, missing ones too: pandas turns None into NaN, which equals nothing
    keys = runs[columns].map(lambda v: repr(None if T.is_missing(v) else T.fmt_value(v)))
    keep, merges = [], []
    for _, group in keys.groupby(columns, sort=False, dropna=False):
        if len(group) == 1:
            keep.append(group.index[0])
            continue
        ranked = sorted(group.index, key=lambda i: _rank(runs.loc[i], runs.index.get_loc(i)))
        kept = runs.loc[ranked[0]]
        keep.append(ranked[0])
        for index in ranked[1:]:
            dropped = runs.loc[index]
            merges.append(Merge(str(dropped["path"]), str(kept["path"]), _why(kept, dropped)))
    kept_rows = runs.loc[[i for i in runs.index if i in set(keep)]]
    return kept_rows, merges
