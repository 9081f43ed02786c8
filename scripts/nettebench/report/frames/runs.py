"""Read the cells' records into the two tidy frames every table and figure is built from.

Reads only what the cells wrote (``metrics.json`` and ``epochs.csv``, see
:mod:`nettebench.records.files`, and the optional ``ceiling.json`` beside a matrix cell), so a
number in a table can always be traced back to the cell directory in the ``path`` column of
``runs.csv``. ``runs`` has one row per cell (parameters, outcome, device, summary, ceiling,
environment as ``env_*``), ``epochs`` one row per epoch of each cell. New cell parameters pass
through as columns. pandas only, no torch.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from nettebench.records import files as records
from nettebench.records.energy import ENERGY_COLUMNS, energy_columns
from nettebench.records.environment import KEYS as ENV_KEYS
from nettebench.records.environment import PACKAGE_KEYS
from nettebench.report import format as T
from nettebench.report.caveats import CAVEAT_COLUMNS, caveat_columns, number
from nettebench.report.setups import setup_ids, setup_labels
from nettebench.vocabulary import outputs
from nettebench.vocabulary.cell import PARAMETER_NAMES
from nettebench.vocabulary.record_keys import EPOCH_COLUMNS, STATUS_OK, SUMMARY_KEYS

# Columns after the cell parameters, in this order (then summary, environment, path).
RECORD_COLUMNS = ("kind", "status", "message", "cell_id", "device_type", "device_name", "threads")

# After the summary: the compute ceiling (nettebench.benchmarks.ceiling) beside metrics.json.
CEILING_COLUMNS = ("ceiling_status", "ceiling_img_s", "ceiling_share")

# After the ceiling's: the cell's setup (nettebench.report.setups) and its time to accuracy
# (config `target_top1`, :func:`time_to_target`; missing for a cell that ran partial epochs).
COMPARISON_COLUMNS = ("setup", "setup_id", "target_top1", "time_to_target_s", "target_epoch")

# After the comparison's: the order the timed processes ran in, so a reader can see that a run
# interleaved its replicates (nettebench.study.replicates; :func:`order_columns`).
ORDER_COLUMNS = ("replicate", "timed_order")

# Identity columns repeated on every row of the tidy epochs.csv (the record's directory, `path`,
# tells apart two copies of one cell from two machines, which share their cell_id).
EPOCH_ID_COLUMNS = ("kind", "cell_id", "dataset", "model", "precision", "batch_size", "epochs")
EPOCH_ID_COLUMNS += ("seed", "device_type", "setup", "path")

KIND_ORDER = ("matrix", "cpu_baseline")


class RecordError(ValueError):
    """A cell's files cannot be read as a record; the message names the file."""


@dataclass
class Cell:
    """One cell as read from disk."""

    record: dict[str, Any]
    epochs: pd.DataFrame
    directory: Path
    ceiling: dict[str, Any] | None = None  # the ceiling.json beside metrics.json, if any


def read_cell(metrics_path: str | os.PathLike) -> Cell:
    """Read one cell's metrics.json and the epochs.csv beside it, naming the file on any error."""
    path = Path(metrics_path)
    try:
        record = records.read_metrics(path)
    except FileNotFoundError:
        raise RecordError(f"{path}: no such metrics file") from None
    except json.JSONDecodeError as error:
        raise RecordError(f"{path}: not valid JSON ({error})") from None
    except ValueError as error:  # schema version, keys or status; the message names the file
        raise RecordError(str(error)) from None

    epochs_path = path.parent / outputs.EPOCHS_FILE
    try:
        epochs = pd.read_csv(epochs_path)
    except (FileNotFoundError, pd.errors.EmptyDataError) as error:
        if record["status"] == STATUS_OK:
            raise RecordError(
                f"{epochs_path}: cannot read the epochs of an ok cell ({error})"
            ) from None
        epochs = pd.DataFrame(columns=list(EPOCH_COLUMNS))
    ceiling = read_ceiling(path.parent / outputs.CEILING_FILE)
    return Cell(record=record, epochs=epochs, directory=path.parent, ceiling=ceiling)


def read_ceiling(path: str | os.PathLike) -> dict[str, Any] | None:
    """The compute ceiling record at ``path``, or None when there is none (it is optional)."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as handle:
            ceiling = json.load(handle)
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as error:
        raise RecordError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(ceiling, dict) or "status" not in ceiling:
        raise RecordError(f"{path}: not a ceiling record (no 'status' key)")
    return ceiling


def read_cells(
    metrics_paths: Iterable[str | os.PathLike], *, copies: list[tuple[str, str]] | None = None
) -> list[Cell]:
    """Read every cell once, in the order given: a path given twice is read once, and so is a
    byte-identical copy of a metrics.json under another path (a result tree merged twice, or
    copied into results/ and listed under ``merge_results:`` as well), which would otherwise
    count one run as two seeds. ``copies`` receives (copy, original) for each copy left out."""
    seen: set[Path] = set()
    contents: dict[str, str] = {}
    cells = []
    for metrics_path in metrics_paths:
        key = Path(metrics_path).resolve()
        if key in seen:
            continue
        seen.add(key)
        try:
            digest = hashlib.sha256(key.read_bytes()).hexdigest()
        except OSError:
            digest = None  # read_cell names the file
        if digest is not None and digest in contents:
            if copies is not None:
                copies.append((str(metrics_path), contents[digest]))
            continue
        if digest is not None:
            contents[digest] = str(metrics_path)
        cells.append(read_cell(metrics_path))
    return cells


def _jsonable(value: Any) -> Any:
    """Nested parameter values (a dict-valued ``loader``) become one JSON string per CSV cell."""
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list | tuple) else value


def _column(values: list[Any]) -> Any:
    """Ints stay ints next to missing values (``128``, not ``128.0`` in the CSV)."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pd.array(values, dtype="Int64")
    return values


def _ordered_keys(known: Sequence[str], seen: Iterable[str]) -> list[str]:
    """Known keys in their documented order, then any others sorted by name."""
    seen = set(seen)
    return [k for k in known if k in seen] + sorted(seen - set(known))


def ceiling_columns(record: dict[str, Any], ceiling: dict[str, Any] | None) -> dict[str, Any]:
    """:data:`CEILING_COLUMNS` of one cell: the ceiling's status, its img/s (None unless ok),
    and the cell's ``summary.train_img_s`` over it (None when either is missing)."""
    if ceiling is None:
        return dict.fromkeys(CEILING_COLUMNS)
    status = ceiling.get("status")
    img_s = number(ceiling.get("img_s")) if status == STATUS_OK else None
    train = number((record["summary"] or {}).get("train_img_s"))
    ok = record["status"] == STATUS_OK
    share = train / img_s if ok and train is not None and img_s else None
    return {"ceiling_status": status, "ceiling_img_s": img_s, "ceiling_share": share}


def time_to_target(epochs: pd.DataFrame, target: float | None) -> tuple[float | None, int | None]:
    """Seconds of epochs (train + validation wall time, summed) until validation top-1 first
    reached ``target`` (%), and that epoch; (None, None) when it never did or no target."""
    if target is None or epochs.empty or "val_top1" not in epochs:
        return None, None
    ordered = epochs.assign(
        epoch=pd.to_numeric(epochs["epoch"], errors="coerce"),
        val_top1=pd.to_numeric(epochs["val_top1"], errors="coerce"),
        wall_s=pd.to_numeric(epochs["wall_s"], errors="coerce"),
    ).sort_values("epoch")
    elapsed = ordered["wall_s"].cumsum()
    reached = ordered["val_top1"] >= target
    if not reached.any():
        return None, None
    first = reached.idxmax()
    return float(elapsed.loc[first]), int(ordered.loc[first, "epoch"])


def comparison_columns(
    frame: pd.DataFrame, cells: Sequence[Cell], target_top1: float | None
) -> pd.DataFrame:
    """:data:`COMPARISON_COLUMNS` for the rows of ``frame`` (indexed by position in ``cells``)."""
    times = {}
    for position, status in frame["status"].items():
        # An extrapolated cell trained only `max_steps` steps of each epoch: its accuracy is not
        # that of its (scaled) epoch times, so it has no time to accuracy.
        full = status == STATUS_OK and not T.as_bool(frame.at[position, "extrapolated"])
        times[position] = (
            time_to_target(cells[position].epochs, target_top1) if full else (None, None)
        )
    return pd.DataFrame(
        {
            "setup": setup_labels(frame),
            "setup_id": setup_ids(frame),
            "target_top1": [target_top1] * len(frame),
            "time_to_target_s": [times[p][0] for p in frame.index],
            "target_epoch": pd.array([times[p][1] for p in frame.index], dtype="Int64"),
        },
        index=frame.index,
    )


def runs_frame(cells: Sequence[Cell], *, target_top1: float | None = None) -> pd.DataFrame:
    """One row per cell, in the module's column order, sorted by :func:`sort_runs`; the index
    holds each cell's position in ``cells`` (used to order the epochs the same way)."""
    # The documented keys are always columns, so the header is stable even for an empty study.
    cell_keys = _ordered_keys(
        PARAMETER_NAMES, [*PARAMETER_NAMES, *(k for c in cells for k in c.record["cell"])]
    )
    # Every environment key is a column, those of package environments only where a record has
    # them: the version table lists Pillow where its column is, reading a missing value as
    # "none", and a record from before package environments did not record its Pillow.
    always = [k for k in ENV_KEYS if k not in PACKAGE_KEYS]
    env_keys = _ordered_keys(
        ENV_KEYS, [*always, *(k for c in cells for k in c.record["environment"] or {})]
    )
    summary_keys = _ordered_keys(
        SUMMARY_KEYS,
        [*SUMMARY_KEYS, *(k for c in cells for k in c.record["summary"] or {})],
    )
    record_columns = [
        *RECORD_COLUMNS,
        *summary_keys,
        *CEILING_COLUMNS,
        *CAVEAT_COLUMNS,
        *ENERGY_COLUMNS,
        *(f"env_{k}" for k in env_keys),
        "path",
    ]
    reserved = {*record_columns, *COMPARISON_COLUMNS, *ORDER_COLUMNS}
    # A parameter that shares a name with a record column keeps its value under "cell_<name>".
    cell_columns = {k: (f"cell_{k}" if k in reserved else k) for k in cell_keys}
    columns: dict[str, list[Any]] = {name: [] for name in [*cell_columns.values(), *record_columns]}
    for cell in cells:
        rec = cell.record
        device = rec["device"] or {}
        summary = rec["summary"] or {}
        env = rec["environment"] or {}
        row = {column: _jsonable(rec["cell"].get(key)) for key, column in cell_columns.items()}
        row.update(
            kind=rec["kind"],
            status=rec["status"],
            message=rec["message"],
            cell_id=rec["cell_id"],
            device_type=device.get("type"),
            device_name=device.get("name"),
            threads=device.get("threads"),
            path=str(cell.directory),
        )
        row.update({k: _jsonable(summary.get(k)) for k in summary_keys})
        row.update(ceiling_columns(rec, cell.ceiling))
        row.update(caveat_columns(rec, cell.ceiling))
        row.update(energy_columns(rec))
        row.update({f"env_{k}": _jsonable(env.get(k)) for k in env_keys})
        for name, values in columns.items():
            values.append(row[name])
    frame = pd.DataFrame({name: _column(values) for name, values in columns.items()})
    extra = pd.concat([comparison_columns(frame, cells, target_top1), order_columns(frame)], axis=1)
    at = frame.columns.get_loc(CEILING_COLUMNS[-1]) + 1
    for offset, name in enumerate(extra.columns):
        frame.insert(at + offset, name, extra[name])
    return sort_runs(frame)


def order_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """:data:`ORDER_COLUMNS`: ``replicate``, the 0-based rank of the cell's seed among its kind's
    seeds (from the rows, so it needs no config and matches the rank the workflow ordered the
    jobs by); ``timed_order``, 1-based, the order the timing windows opened (``timed_from``: what
    ran, told by the cells, not the order the files were listed in), missing without one."""
    seeds = pd.to_numeric(frame["seed"], errors="coerce")
    replicate = seeds.groupby(frame["kind"], dropna=False).rank(method="dense") - 1
    started = pd.to_numeric(frame["timed_from"], errors="coerce")
    return pd.DataFrame(
        {
            "replicate": replicate.astype("Int64"),
            "timed_order": started.rank(method="min").astype("Int64"),
        },
        index=frame.index,
    )


def sort_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """Sort by kind (matrix first), dataset, model, batch size, precision (display order), seed;
    stable, so cells equal on all of these keep the order they were given in."""
    if frame.empty:
        return frame
    kinds = list(KIND_ORDER) + sorted(set(frame["kind"].dropna().astype(str)) - set(KIND_ORDER))
    precision = frame["precision"].map(T.precision_rank)
    keys = pd.DataFrame(
        {
            "kind": frame["kind"].map(lambda k: kinds.index(k) if k in kinds else len(kinds)),
            "dataset": frame["dataset"].map(T.fmt_value),
            "model": frame["model"].map(T.fmt_value),
            "batch": pd.to_numeric(frame["batch_size"], errors="coerce").fillna(-1),
            "precision_rank": precision.map(lambda rank: rank[0]),
            "precision_name": precision.map(lambda rank: rank[1]),
            "seed": pd.to_numeric(frame["seed"], errors="coerce").fillna(-1),
        },
        index=frame.index,
    )
    order = keys.sort_values(list(keys.columns), kind="stable").index
    return frame.loc[order]


def epochs_frame(cells: Sequence[Cell], runs: pd.DataFrame) -> pd.DataFrame:
    """Every epoch of every cell, in the order of ``runs``, with the cell's identity in front."""
    columns = [*EPOCH_ID_COLUMNS, *EPOCH_COLUMNS]
    parts = []
    for position, run in runs.iterrows():
        epochs = cells[position].epochs
        if epochs.empty:
            continue
        part = epochs.reindex(columns=list(EPOCH_COLUMNS))
        for column in reversed(EPOCH_ID_COLUMNS):
            part.insert(0, column, run.get(column))
        parts.append(part)
    if not parts:
        return pd.DataFrame(columns=columns)
    frame = pd.concat(parts, ignore_index=True)[columns]
    for column in ("batch_size", "epochs", "seed", "epoch"):
        if pd.api.types.is_float_dtype(frame[column]) or frame[column].dtype == object:
            numeric = pd.to_numeric(frame[column], errors="coerce")
            if (numeric.dropna() % 1 == 0).all():
                frame[column] = numeric.astype("Int64")
    return frame


def cell_keys(runs: pd.DataFrame) -> list[str]:
    """The parameter columns of ``runs``: all columns before ``kind`` (true of runs.csv too)."""
    return list(runs.columns[: runs.columns.get_loc("kind")]) if "kind" in runs else []


def pinned_packages(row: pd.Series) -> dict[str, str]:
    """The packages a cell's environment pinned: runs.csv's ``env_packages`` (JSON) decoded."""
    value = row.get("env_packages")
    if T.is_missing(value):
        return {}
    try:
        packages = json.loads(value) if isinstance(value, str) else dict(value)
    except (TypeError, ValueError):
        return {}
    return {str(k): str(v) for k, v in (packages or {}).items() if v is not None}
