"""Collect every cell's record into tidy CSVs and the study's markdown and HTML tables.

Reads only what the cells wrote (``metrics.json`` and ``epochs.csv``, see
:mod:`nettebench.records.files`, and the optional ``ceiling.json`` that ``python -m
nettebench.benchmarks.ceiling`` writes beside some of them), so a table can always be traced back
to the cell directories in the ``path`` column of ``runs.csv``. Everything after reading is built
from the ``runs`` and ``epochs`` frames, which is also all that :mod:`nettebench.report.figures`
gets to see.

Cells that did not run (``oom``, ``unsupported``) are kept as rows: the study's first lesson was an
out-of-memory error, so "did not fit" is a result to show, not a hole. New cell parameters
(``loader``, ``torchvision``, ...) pass through as columns and, once they vary, appear in the
row labels of the tables, so adding an axis never needs a change here.

Every markdown table is also written as a self-contained HTML page of the same name (and
runs.csv as ``runs.html``), because Snakemake's report shows HTML inline but offers markdown and
CSV only as downloads.

Imports pandas and json only (no torch, no matplotlib): aggregation runs on any login node.

Usage::

    python -m nettebench.report.aggregate --out-dir results/tables [METRICS_JSON ...]

With no metrics files (an aggregate-only run that finds none) it writes empty tables that say so.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from nettebench.records import files as records
from nettebench.report import format as T
from nettebench.study import outputs
from nettebench.study.cell import PARAMETER_NAMES

# Columns after the cell parameters, in this order (then summary, environment, path).
RECORD_COLUMNS = ("kind", "status", "message", "cell_id", "device_type", "device_name", "threads")
# Keys of metrics.json["environment"] (nettebench.records.environment.collect); unknown ones follow
# sorted.
ENV_KEYS = (
    "host",
    "platform",
    "python",
    "cpu_model",
    "cpu_count",
    "gpu_name",
    "gpu_count",
    "driver",
    "cuda",
    "cudnn",
    "torch",
    "torchvision",
    "efficientnet_pytorch",
    "apex",
    "torchvision_commit",
    "torchvision_build",
    "apex_commit",
    "apex_build",
    "git_commit",
    "git_dirty",
    "nettebench",
    "slurm_job_id",
    "slurm_node",
    "slurm_partition",
    "slurm_restart_count",
    "slurm_log",
)
# The compute ceiling (nettebench.benchmarks.ceiling) a cell may have beside its metrics.json.
# Columns after the summary: the ceiling's status, its img/s (missing unless the status is ok),
# and the cell's training img/s as a share of it.
CEILING_COLUMNS = ("ceiling_status", "ceiling_img_s", "ceiling_share")
# Identity columns repeated on every row of the tidy epochs.csv.
EPOCH_ID_COLUMNS = (
    "kind",
    "cell_id",
    "dataset",
    "model",
    "precision",
    "batch_size",
    "epochs",
    "seed",
    "device_type",
)
KIND_ORDER = ("matrix", "cpu_baseline")
# The markdown tables; each is also written as HTML under the same name.
MARKDOWN_TABLES = outputs.TABLE_NAMES
# Output name -> file name; aggregate() returns {name: path} with these names.
OUTPUTS = {
    "runs": "runs.csv",
    "runs_html": "runs.html",
    "epochs": "epochs.csv",
    **{name: f"{name}.md" for name in MARKDOWN_TABLES},
    **{f"{name}_html": f"{name}.html" for name in MARKDOWN_TABLES},
}
# Keys that a table groups by or puts in its columns, so they never go into its row labels.
# max_steps is how a cell was timed, not what was timed: the "~" mark says it instead.
_NOT_ROW_KEYS = ("dataset", "epochs", "device", "seed", "precision", "model", "max_steps")
_LEGEND = (
    "OOM: ran out of memory. n/a: precision not supported on this device. Blank: not in the study."
)
_APPROX_NOTE = (
    f"{T.APPROX_MARK} extrapolated: only `max_steps` steps per epoch were run and timed, "
    "and epoch times scaled to the full epoch."
)
_PARTIAL_NOTE = f"{T.PARTIAL_MARK} some seeds did not finish; mean over those that did."
_NO_CELLS = "No cells have finished yet: no metrics.json files were aggregated."
_NO_CEILINGS = (
    "No compute ceilings were measured (no `ceiling.json` beside any cell's metrics.json)."
)
_CEILING_NOTE = (
    "The compute ceiling is the training img/s of the same model, precision and batch size on a "
    "batch already on the device, with no input pipeline (`ceiling.json`, written by "
    "`python -m nettebench.benchmarks.ceiling`). Blank: no ceiling measured for that cell."
)
_RUNS_NOTE = (
    "One row per cell, exactly as in `runs.csv`: parameters, outcome, device, summary, compute "
    "ceiling, environment (`env_*`) and the cell directory (`path`)."
)


class RecordError(ValueError):
    """A cell's files cannot be read as a record; the message names the file."""


@dataclass
class Cell:
    """One cell as read from disk."""

    record: dict[str, Any]
    epochs: pd.DataFrame
    directory: Path
    ceiling: dict[str, Any] | None = None  # the ceiling.json beside metrics.json, if any


# --------------------------------------------------------------------------------------- reading


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
        if record["status"] == records.STATUS_OK:
            raise RecordError(
                f"{epochs_path}: cannot read the epochs of an ok cell ({error})"
            ) from None
        epochs = pd.DataFrame(columns=list(records.EPOCH_COLUMNS))
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


def read_cells(metrics_paths: Iterable[str | os.PathLike]) -> list[Cell]:
    """Read every cell once (a path given twice is read once), in the order given."""
    seen: set[Path] = set()
    cells = []
    for metrics_path in metrics_paths:
        key = Path(metrics_path).resolve()
        if key not in seen:
            seen.add(key)
            cells.append(read_cell(metrics_path))
    return cells


# ------------------------------------------------------------------------------------ tidy frames


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


def _number(value: Any) -> float | None:
    """A finite float, or None for a missing, non-numeric or infinite value."""
    if isinstance(value, bool) or T.is_missing(value):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def ceiling_columns(record: dict[str, Any], ceiling: dict[str, Any] | None) -> dict[str, Any]:
    """``ceiling_status``, ``ceiling_img_s`` (None unless ok), ``ceiling_share`` of one cell.

    The share is the cell's ``summary.train_img_s`` over the ceiling's ``img_s``; it is None
    when either is missing (a cell or a ceiling that did not run, or no ceiling).
    """
    if ceiling is None:
        return dict.fromkeys(CEILING_COLUMNS)
    status = ceiling.get("status")
    img_s = _number(ceiling.get("img_s")) if status == records.STATUS_OK else None
    train = _number((record["summary"] or {}).get("train_img_s"))
    ok = record["status"] == records.STATUS_OK
    share = train / img_s if ok and train is not None and img_s else None
    return {"ceiling_status": status, "ceiling_img_s": img_s, "ceiling_share": share}


def runs_frame(cells: Sequence[Cell]) -> pd.DataFrame:
    """One row per cell: parameters, outcome, device, summary, ceiling, ``env_*``, path.

    Sorted stably (see :func:`sort_runs`).

    The index holds each cell's position in ``cells`` (used to order the epochs the same way).
    """
    # The documented keys are always columns, so the header is stable even for an empty study.
    cell_keys = _ordered_keys(
        PARAMETER_NAMES, [*PARAMETER_NAMES, *(k for c in cells for k in c.record["cell"])]
    )
    env_keys = _ordered_keys(
        ENV_KEYS, [*ENV_KEYS, *(k for c in cells for k in c.record["environment"] or {})]
    )
    summary_keys = _ordered_keys(
        records.SUMMARY_KEYS,
        [*records.SUMMARY_KEYS, *(k for c in cells for k in c.record["summary"] or {})],
    )
    reserved = {
        *RECORD_COLUMNS,
        *summary_keys,
        *CEILING_COLUMNS,
        "path",
        *(f"env_{k}" for k in env_keys),
    }
    # A parameter that shares a name with a record column keeps its value under "cell_<name>".
    cell_columns = {k: (f"cell_{k}" if k in reserved else k) for k in cell_keys}

    columns: dict[str, list[Any]] = {
        name: []
        for name in [
            *cell_columns.values(),
            *RECORD_COLUMNS,
            *summary_keys,
            *CEILING_COLUMNS,
            *(f"env_{k}" for k in env_keys),
            "path",
        ]
    }
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
        row.update({k: summary.get(k) for k in summary_keys})
        row.update(ceiling_columns(rec, cell.ceiling))
        row.update({f"env_{k}": _jsonable(env.get(k)) for k in env_keys})
        for name, values in columns.items():
            values.append(row[name])
    frame = pd.DataFrame({name: _column(values) for name, values in columns.items()})
    return sort_runs(frame)


def sort_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """Sort by kind (matrix first), dataset, model, batch size, precision (display order), seed.

    Stable, so cells equal on all of these keep the order they were given in.
    """
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
    columns = [*EPOCH_ID_COLUMNS, *records.EPOCH_COLUMNS]
    parts = []
    for position, run in runs.iterrows():
        epochs = cells[position].epochs
        if epochs.empty:
            continue
        part = epochs.reindex(columns=list(records.EPOCH_COLUMNS))
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


# ------------------------------------------------------------------------------- table shaping


def cell_keys(runs: pd.DataFrame) -> list[str]:
    """The parameter columns of ``runs``: all columns before ``kind`` (true of runs.csv too)."""
    return list(runs.columns[: runs.columns.get_loc("kind")]) if "kind" in runs else []


def row_keys(runs: pd.DataFrame) -> list[str]:
    """Parameters that may tell rows apart in a label (not those the tables lay out)."""
    return [k for k in cell_keys(runs) if k not in _NOT_ROW_KEYS]


def _device_title(frame: pd.DataFrame) -> str:
    names = sorted({str(n) for n in frame["device_name"] if not T.is_missing(n)})
    kinds = sorted({str(t) for t in frame["device_type"] if not T.is_missing(t)})
    text = ", ".join(kinds) or "unknown device"
    return f"{text} ({'; '.join(names)})" if names else text


def _groups(frame: pd.DataFrame, keys: list[str]) -> Iterable[tuple[tuple, pd.DataFrame]]:
    """Groups in order of first appearance, missing values kept as their own group."""
    for key, group in frame.groupby(keys, sort=False, dropna=False):
        yield (key if isinstance(key, tuple) else (key,)), group


@dataclass
class _Grid:
    """One model x precision table and what its footnotes need to say."""

    title: str
    header: list[str]
    rows: list[list[str]]
    seed_counts: list[int]
    approx: bool
    partial: bool
    not_ok: bool

    def notes(self) -> list[str]:
        notes = []
        if self.approx:
            notes.append(_APPROX_NOTE)
        if self.partial:
            notes.append(_PARTIAL_NOTE)
        if self.not_ok:
            notes.append(_LEGEND)
        return notes


def model_precision_grids(
    runs: pd.DataFrame,
    value: str,
    fmt: Any,
    *,
    mark_extrapolated: bool,
    status: str = "status",
    require: str | None = None,
) -> list[_Grid]:
    """Matrix cells as model x precision tables, one per (dataset, epochs, device type).

    A table cell is the mean of ``value`` over the seeds whose ``status`` column is ok (the
    ceiling's tables pass ``ceiling_status``). With ``require``, a table is left out unless some
    of its cells have a value in that column.
    """
    matrix = runs[runs["kind"] == "matrix"]
    grids = []
    for (dataset, epochs, _), table in _groups(matrix, ["dataset", "epochs", "device_type"]):
        if require is not None and table[require].map(T.is_missing).all():
            continue
        labels = T.row_labels(table, row_keys(runs))
        precisions = T.sort_precisions(table["precision"])
        rows, counts, approx, partial = [], [], False, False
        for label in labels.unique():
            row = [label]
            for precision in precisions:
                seeds = table[(labels == label) & (table["precision"] == precision)]
                ok = seeds[seeds[status] == records.STATUS_OK]
                mean = pd.to_numeric(ok[value], errors="coerce").mean() if len(ok) else None
                extrapolated = mark_extrapolated and any(map(T.as_bool, ok["extrapolated"]))
                text = T.outcome_cell(list(seeds[status]), mean, fmt, approx=extrapolated)
                row.append(text)
                if len(ok):
                    counts.append(len(ok))
                approx |= text.startswith(T.APPROX_MARK)
                partial |= text.endswith(T.PARTIAL_MARK)
            rows.append(row)
        title = f"{dataset}, {T.fmt_value(epochs)} epochs, {_device_title(table)}"
        grids.append(
            _Grid(
                title=title,
                header=["model", *precisions],
                rows=rows,
                seed_counts=counts,
                approx=approx,
                partial=partial,
                not_ok=bool(table[status].isin(list(T.OUTCOME_TEXT)).any()),
            )
        )
    return grids


def _no_matrix(runs: pd.DataFrame) -> str:
    """What a model x precision document says when it has no table to show."""
    return _NO_CELLS if runs.empty else "No matrix cells in the study yet."


def _grid_sections(grids: list[_Grid], level: int) -> list[str]:
    return [
        T.section(
            g.title,
            T.pipe_table(g.header, g.rows, "l" + "r" * (len(g.header) - 1)),
            notes=g.notes(),
            level=level,
        )
        for g in grids
    ]


def time_markdown(runs: pd.DataFrame) -> str:
    """The study's "seconds for N epochs" table: model x precision, mean over seeds."""
    grids = model_precision_grids(runs, "time_for_epochs_s", T.fmt_seconds, mark_extrapolated=True)
    counts = [c for g in grids for c in g.seed_counts]
    note = (
        "Seconds to train and validate all epochs of a cell (sum of per-epoch wall times, "
        f"`summary.time_for_epochs_s`), {T.seeds_note(counts)}."
    )
    return T.document(
        "Time by model and precision",
        note,
        _grid_sections(grids, level=2),
        empty=_no_matrix(runs),
    )


# Libraries whose versions the version table compares, as recorded in each cell's environment
# (env_<library>, and env_<library>_commit / env_<library>_build where known), and the cell
# parameter that picks each one's build.
VERSIONED_LIBRARIES = ("torch", "cudnn", "torchvision", "apex")


def version_label(row: pd.Series, library: str) -> str:
    """``0.29.1+cu130 @1f1a920`` or ``0.30.0a0+8d2f1c4 @8d2f1c4 (build main)``: the version a
    cell imported, the commit it was built from and the source build it came from, if any."""
    version = row.get(f"env_{library}")
    text = "none" if T.is_missing(version) else T.fmt_value(version)
    commit = row.get(f"env_{library}_commit")
    if not T.is_missing(commit):
        text += f" @{str(commit)[:7]}"
    build = row.get(f"env_{library}_build")
    if not T.is_missing(build):
        text += f" (build {build})"
    return text


def library_versions_markdown(runs: pd.DataFrame) -> str:
    """Seconds for N epochs by model and precision, one column per version of a library.

    One table per library whose recorded version differs among the matrix cells of a dataset,
    epoch count and device type (a ``torchvision`` axis of source builds, or records merged from
    two environments), like the study's PyTorch 1.0.1 / 1.1.0 table. Rows are labelled without
    the parameter that picks the library's build, since the columns show it.
    """
    matrix = runs[runs["kind"] == "matrix"] if len(runs) else runs
    sections, counts, recorded = [], [], []
    for library in VERSIONED_LIBRARIES:
        if matrix.empty or f"env_{library}" not in matrix:
            continue
        labels = matrix.apply(version_label, axis=1, library=library)
        keys = [k for k in row_keys(runs) if k != library]
        for (dataset, epochs, _), table in _groups(matrix, ["dataset", "epochs", "device_type"]):
            versions = list(dict.fromkeys(labels[table.index]))
            if len(versions) < 2:
                continue
            rows_of = T.row_labels(table, keys)
            rows, approx, not_ok = [], False, False
            for precision in T.sort_precisions(table["precision"]):
                for row_label in rows_of[table["precision"] == precision].unique():
                    row = [f"{row_label} {precision}"]
                    for version in versions:
                        seeds = table[
                            (rows_of == row_label)
                            & (table["precision"] == precision)
                            & (labels[table.index] == version)
                        ]
                        ok = seeds[seeds["status"] == records.STATUS_OK]
                        mean = (
                            pd.to_numeric(ok["time_for_epochs_s"], errors="coerce").mean()
                            if len(ok)
                            else None
                        )
                        extrapolated = any(map(T.as_bool, ok["extrapolated"]))
                        row.append(
                            T.outcome_cell(
                                list(seeds["status"]), mean, T.fmt_seconds, approx=extrapolated
                            )
                        )
                        counts += [len(ok)] if len(ok) else []
                        approx |= row[-1].startswith(T.APPROX_MARK)
                        not_ok |= row[-1] in T.OUTCOME_TEXT.values()
                    rows.append(row)
            notes = ([_APPROX_NOTE] if approx else []) + ([_LEGEND] if not_ok else [])
            title = f"{library}: {dataset}, {T.fmt_value(epochs)} epochs, {_device_title(table)}"
            body = T.pipe_table(["model", *versions], rows, "l" + "r" * len(versions))
            sections.append(T.section(title, body, notes=notes, level=2))
        for version in dict.fromkeys(labels):
            recorded.append([library, version, str(int((labels == version).sum()))])
    note = (
        "Seconds to train and validate all epochs of a cell (`summary.time_for_epochs_s`) by the "
        "version of a library it ran against, as recorded in its metrics.json "
        "(`environment.<library>`, `@commit` it was built from, `build` for a source build "
        f"from the config's `builds:`), {T.seeds_note(counts)}; a table for each library whose "
        "version differs between cells."
    )
    if recorded:
        table = T.pipe_table(["library", "version", "matrix cells"], recorded, "llr")
        sections.append(T.section("Versions recorded", table, level=2))
    empty = _no_matrix(runs)
    return T.document("Time by library version", note, sections, empty=empty)


def throughput_markdown(runs: pd.DataFrame) -> str:
    """Training img/s, the share of it spent waiting for data, and the compute ceiling.

    The two ceiling tables (pipeline img/s as a percentage of the ceiling, and the ceiling's own
    img/s) appear only when some matrix cell has a ``ceiling.json``; otherwise one line says
    that no ceilings were measured.
    """
    rate = model_precision_grids(runs, "train_img_s", T.fmt_rate, mark_extrapolated=False)
    wait = model_precision_grids(runs, "data_wait_share", T.fmt_percent, mark_extrapolated=False)
    ceiling_grids = {
        "share": model_precision_grids(
            runs,
            "ceiling_share",
            T.fmt_percent,
            mark_extrapolated=False,
            require="ceiling_status",
        ),
        "ceiling": model_precision_grids(
            runs,
            "ceiling_img_s",
            T.fmt_rate,
            mark_extrapolated=False,
            status="ceiling_status",
            require="ceiling_status",
        ),
    }
    counts = [c for g in rate for c in g.seed_counts]
    note = (
        "Training images per second (median over epochs of the steady-state rate, warm-up "
        "excluded, `summary.train_img_s`), the percentage of training time spent waiting for "
        "the input pipeline (`summary.data_wait_share`) and, where measured, the same img/s as a "
        f"percentage of the compute ceiling, {T.seeds_note(counts)}."
    )
    if not rate:
        return T.document("Throughput", note, [], empty=f"{_no_matrix(runs)}\n\n{_NO_CEILINGS}")
    sections = [
        "## Training throughput (img/s)\n",
        *_grid_sections(rate, level=3),
        "## Time waiting for data (% of training time)\n",
        *_grid_sections(wait, level=3),
    ]
    if ceiling_grids["share"]:
        sections += [
            "## Share of the compute ceiling (%)\n",
            "Training img/s of the cell as a percentage of its compute ceiling "
            "(`ceiling_share` in runs.csv; 100 = the input pipeline costs nothing). "
            f"{_CEILING_NOTE}\n",
            *_grid_sections(ceiling_grids["share"], level=3),
            "## Compute ceiling (img/s)\n",
            "Training img/s with the batch already on the device (`ceiling_img_s` in runs.csv; "
            "median step time of `nettebench.benchmarks.ceiling`), mean over the seeds measured.\n",
            *_grid_sections(ceiling_grids["ceiling"], level=3),
        ]
    else:
        sections.append(_NO_CEILINGS + "\n")
    return T.document("Throughput", note, sections)


def accuracy_markdown(runs: pd.DataFrame, epochs: pd.DataFrame) -> str:
    """Validation top-1/top-5 after every epoch, one table per model configuration."""
    matrix = runs[runs["kind"] == "matrix"]
    keys = [k for k in cell_keys(runs) if k not in ("seed", "precision", "device")]
    shown = ("dataset", "model", "batch_size", "epochs")
    extra = T.varying_keys(matrix, [k for k in keys if k not in shown], within=shown)
    epochs = epochs[epochs["kind"] == "matrix"] if len(epochs) else epochs
    sections, counts = [], []
    for key, table in _groups(matrix, [*keys, "device_type"]):
        params = dict(zip([*keys, "device_type"], key, strict=True))
        title = ", ".join(
            [
                str(params["model"]),
                f"batch {T.fmt_value(params['batch_size'])}",
                *(f"{k} {T.fmt_value(params[k])}" for k in extra),
                str(params["dataset"]),
                f"{T.fmt_value(params['epochs'])} epochs",
                _device_title(table),
            ]
        )
        ok = table[table["status"] == records.STATUS_OK]
        ep = epochs[epochs["cell_id"].isin(ok["cell_id"])] if len(epochs) else epochs
        n_epochs = int(ep["epoch"].max()) if len(ep) else 0
        rows, notes = [], []
        for precision in T.sort_precisions(table["precision"]):
            pe = ep[ep["precision"] == precision] if len(ep) else ep
            seeds = table[table["precision"] == precision]
            if pe.empty:
                outcome = T.outcome_cell(list(seeds["status"]), None, str)
                notes.append(f"{precision} ({outcome or 'no epochs recorded'})")
                continue
            counts.append(pe["cell_id"].nunique())
            means = pe.groupby("epoch")[["val_top1", "val_top5"]].mean()
            for column, name in (("val_top1", "Top1"), ("val_top5", "Top5")):
                rows.append(
                    [f"{precision} {name}"]
                    + [
                        T.fmt_accuracy(means[column].get(e)) if e in means.index else ""
                        for e in range(1, n_epochs + 1)
                    ]
                )
        body = (
            T.pipe_table(["", *map(str, range(1, n_epochs + 1))], rows, "l" + "r" * n_epochs)
            if rows
            else "No cell of this configuration finished."
        )
        if notes:
            notes = ["Not shown: " + "; ".join(notes) + ". " + _LEGEND]
        sections.append(T.section(title, body, notes=notes, level=2))
    note = (
        "Validation accuracy (%) after each epoch (columns = epoch), top-1 and top-5, "
        f"{T.seeds_note(counts)}."
    )
    return T.document("Accuracy by epoch", note, sections, empty=_no_matrix(runs))


def _fastest_matrix(
    matrix_ok: pd.DataFrame, dataset: Any, model: Any, batch_size: Any
) -> dict[str, Any] | None:
    """The fastest precision (per epoch) of the model's matrix cells, and O0 on the same setup.

    Cells at the CPU baseline's batch size are preferred; otherwise any batch size counts (and
    the table says which).
    """
    same = matrix_ok[(matrix_ok["dataset"] == dataset) & (matrix_ok["model"] == model)]
    if same.empty:
        return None
    if (same["batch_size"] == batch_size).any():
        same = same[same["batch_size"] == batch_size]
    keys = ["device_name", "batch_size", "precision"]
    means = (
        same.assign(extrapolated=same["extrapolated"].map(T.as_bool))
        .groupby(keys, sort=False, dropna=False)
        .agg(epoch_s=("epoch_s_median", "mean"), approx=("extrapolated", "any"))
        .dropna(subset=["epoch_s"])
    )
    if means.empty:
        return None
    device, batch, precision = means["epoch_s"].idxmin()
    best = means.loc[(device, batch, precision)]
    baseline = means.loc[(device, batch, "O0")] if (device, batch, "O0") in means.index else None
    return {
        "device": device,
        "batch_size": batch,
        "precision": precision,
        "epoch_s": best["epoch_s"],
        "approx": bool(best["approx"]),
        "o0_epoch_s": None if baseline is None else baseline["epoch_s"],
        "o0_approx": False if baseline is None else bool(baseline["approx"]),
    }


def cpu_vs_gpu_markdown(runs: pd.DataFrame) -> str:
    """Each CPU baseline next to the same model's fastest matrix cell and its O0 cell."""
    baselines = runs[runs["kind"] == "cpu_baseline"]
    matrix_ok = runs[(runs["kind"] == "matrix") & (runs["status"] == records.STATUS_OK)]
    note = (
        "Seconds per epoch (median epoch wall time, `summary.epoch_s_median`, mean over seeds) "
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
    rows, unmatched, approx, not_ok = [], 0, False, False
    for _, cpu in baselines.iterrows():
        cpu_ok = cpu["status"] == records.STATUS_OK
        cpu_s = cpu["epoch_s_median"] if cpu_ok else None
        cpu_text = T.outcome_cell(
            [cpu["status"]], cpu_s, T.fmt_seconds, approx=T.as_bool(cpu["extrapolated"])
        )
        not_ok |= not cpu_ok
        row = [
            cpu["dataset"],
            cpu["model"],
            T.fmt_value(cpu["batch_size"]),
            T.fmt_value(cpu["threads"]),
            "" if T.is_missing(cpu.get("env_cpu_model")) else cpu["env_cpu_model"],
            cpu_text,
        ]
        match = _fastest_matrix(matrix_ok, cpu["dataset"], cpu["model"], cpu["batch_size"])
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
                T.outcome_cell(["ok"], match["epoch_s"], T.fmt_seconds, approx=match["approx"]),
                T.fmt_speedup(cpu_s / match["epoch_s"]) if cpu_s is not None else "",
                T.outcome_cell(
                    ["ok"] if o0 is not None else [], o0, T.fmt_seconds, approx=match["o0_approx"]
                ),
                T.fmt_speedup(cpu_s / o0) if cpu_s is not None and o0 is not None else "",
            ]
        )
        approx |= match["approx"] or match["o0_approx"]
        approx |= cpu_text.startswith(T.APPROX_MARK)
    if baselines.empty:
        empty = _NO_CELLS if runs.empty else "No CPU baseline cells in the study."
        return T.document("CPU versus GPU", note, [], empty=empty)
    notes = []
    if unmatched:
        notes.append(
            f"{unmatched} of {len(baselines)} CPU baseline cell(s) have no finished matrix cell "
            "of the same dataset and model to compare with."
        )
    if approx:
        notes.append(_APPROX_NOTE)
    if not_ok:
        notes.append(_LEGEND)
    table = T.pipe_table(header, rows, "llrrlrllrrrr")
    return T.document(
        "CPU versus GPU", note, [T.section("CPU baselines", table, notes=notes, level=2)]
    )


# ------------------------------------------------------------------------------------- writing


def _csv_text(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, lineterminator="\n")


def aggregate(
    metrics_paths: Iterable[str | os.PathLike], out_dir: str | os.PathLike
) -> dict[str, Path]:
    """Read the cells; write runs.csv, epochs.csv, the markdown tables and their HTML pages.

    Returns {output name: path} for every entry of :data:`OUTPUTS`. No cells at all still
    writes every file (header-only CSVs, tables that say no cell has finished).
    """
    cells = read_cells(metrics_paths)
    runs = runs_frame(cells)
    epochs = epochs_frame(cells, runs)
    runs = runs.reset_index(drop=True)
    texts = {
        "runs": _csv_text(runs),
        "epochs": _csv_text(epochs),
        "time_by_model_precision": time_markdown(runs),
        "accuracy_by_epoch": accuracy_markdown(runs, epochs),
        "throughput": throughput_markdown(runs),
        "cpu_vs_gpu": cpu_vs_gpu_markdown(runs),
        "time_by_library_version": library_versions_markdown(runs),
    }
    texts["runs_html"] = T.csv_to_html(texts["runs"], "Runs", _RUNS_NOTE, empty=_NO_CELLS)
    texts.update({f"{name}_html": T.markdown_to_html(texts[name]) for name in MARKDOWN_TABLES})
    out = Path(out_dir)
    written = {}
    for name, text in texts.items():
        written[name] = out / OUTPUTS[name]
        records.atomic_write_text(written[name], text)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nettebench.report.aggregate",
        description="Aggregate cell records (metrics.json, epochs.csv and an optional "
        "ceiling.json) into CSV, markdown and HTML tables.",
    )
    parser.add_argument("--out-dir", required=True, type=Path, help="folder for the tables")
    parser.add_argument(
        "metrics",
        nargs="*",
        metavar="METRICS_JSON",
        help="cell metrics.json files (none: write empty tables)",
    )
    args = parser.parse_args(argv)
    try:
        written = aggregate(args.metrics, args.out_dir)
    except RecordError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    print(
        f"aggregated {len(args.metrics)} cell(s) into {len(written)} files in {args.out_dir}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
