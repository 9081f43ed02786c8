"""The files every cell writes, and the only files aggregation reads.

One cell = one directory holding ``metrics.json`` (outcome, parameters, environment, summary) and
``epochs.csv`` (one row per epoch). Keeping the layout in one module means the trainer that writes
these files and the aggregation that reads them cannot drift apart silently: both import the names
of :mod:`nettebench.vocabulary.record_keys` (the keys, the columns, the statuses), this module
checks a record against them, and ``tests/test_train.py`` checks a real trainer run.

Imports nothing heavy: the workflow and the aggregation import this module without torch.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# All-or-nothing writes: a killed process leaves the old file or the new one, never a torn one,
# so the workflow never mistakes a crashed cell for a finished one.
from nettebench.vocabulary.atomic import write_text_atomic as atomic_write_text
from nettebench.vocabulary.outputs import EPOCHS_FILE, METRICS_FILE
from nettebench.vocabulary.record_keys import EPOCH_COLUMNS, METRICS_KEYS, SCHEMA_VERSION, STATUSES


def write_metrics(cell_dir: str | os.PathLike, record: Mapping[str, Any]) -> Path:
    """Validate ``record`` against METRICS_KEYS and write it as the cell's metrics.json."""
    path = Path(cell_dir) / METRICS_FILE
    _check_record(record, path)
    atomic_write_text(path, json.dumps(record, indent=2, sort_keys=False, default=str) + "\n")
    return path


def write_epochs(cell_dir: str | os.PathLike, rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write the per-epoch rows (EPOCH_COLUMNS) as the cell's epochs.csv (header only if none)."""
    path = Path(cell_dir) / EPOCHS_FILE
    lines: list[str] = []

    class _Sink:
        def write(self, text: str) -> None:
            lines.append(text)

    writer = csv.DictWriter(_Sink(), fieldnames=EPOCH_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({column: row.get(column) for column in EPOCH_COLUMNS})
    atomic_write_text(path, "".join(lines))
    return path


def read_metrics(path: str | os.PathLike) -> dict[str, Any]:
    """Read one metrics.json, refusing an unknown schema version or a record missing keys."""
    with open(path, encoding="utf-8") as handle:
        record = json.load(handle)
    version = record.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(f"{path}: schema_version {version!r}, expected {SCHEMA_VERSION}")
    _check_record(record, path)
    return record


def _check_record(record: Mapping[str, Any], path: Path | str) -> None:
    """The same checks when a record is written and when it is read back."""
    missing = [key for key in METRICS_KEYS if key not in record]
    if missing:
        raise ValueError(f"{path}: metrics record lacks keys {missing}")
    if record["status"] not in STATUSES:
        raise ValueError(f"{path}: status {record['status']!r} is not one of {STATUSES}")
