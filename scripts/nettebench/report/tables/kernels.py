"""Collect the profiled cells into the report's table of top kernels and the category table.

Reads only what ``python -m nettebench profiling`` wrote beside each ``profile.json``
(``kernels.csv``, ``cpu_ops.csv``, ``categories.csv``) and writes:

- ``kernel_categories.csv``: one tidy row per profiled cell and category (the cell's parameters,
  device, backend, where the categories came from, time per step and share); the category
  figure reads only this file;
- ``top_kernels.md`` and ``top_kernels.html``: the category shares of every profiled cell side by
  side, then each cell's top kernels with nvprof's columns. A CPU-only profile has no kernels;
  there the table lists the top CPU operators by self time, and says so.

Usage::

    python -m nettebench report kernel-tables --out-dir results/tables [PROFILE_JSON ...]

Imports pandas, no torch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from nettebench.profiling import (
    CATEGORIES_FILE,
    CPU_OPS_FILE,
    KERNELS_FILE,
    SOURCE_CPU,
    SOURCE_GPU,
)
from nettebench.profiling.categories import CATEGORIES
from nettebench.records import files as records
from nettebench.report import caveats as C
from nettebench.report import format as T
from nettebench.report.grids import tell_apart
from nettebench.vocabulary import commands
from nettebench.vocabulary.cell import PARAMETER_NAMES
from nettebench.vocabulary.record_keys import STATUS_OK

TOP_N = 10
NAME_WIDTH = 90
CATEGORIES_CSV = "kernel_categories.csv"
TOP_KERNELS = "top_kernels"
OUTPUTS = {
    "categories": CATEGORIES_CSV,
    "top_kernels": f"{TOP_KERNELS}.md",
    "top_kernels_html": f"{TOP_KERNELS}.html",
}
CELL_COLUMNS = ("dataset", "model", "precision", "batch_size")
RECORD_COLUMNS = (
    "label",
    "cell_id",
    "device_type",
    "device_name",
    "backend",
    "status",
    "steps",
    "source",
    "category",
    "calls",
    "total_ms",
    "ms_per_step",
    "share_pct",
    "path",
)
# Parameters that never go into a label: the section heading or the precision column shows them,
# or they say how a cell was trained rather than what runs in a step.
_NOT_LABEL_KEYS = ("dataset", "precision", "epochs", "seed", "max_steps", "lr", "lr_schedule")
_SOURCE_TEXT = {
    SOURCE_GPU: "GPU time of kernels and memory operations",
    SOURCE_CPU: "CPU operators' self time; no GPU in the run",
}
_NOTE = (
    "Each profiled cell ran its warm-up steps untraced, then the profiled window of training "
    "steps, in a process of its own (so profiling never slows the timed cells). ms/step: time in "
    "the category per profiled step; share: of the cell's total. Full kernel names and every "
    "kernel: `kernels.csv` beside each cell's `profile.json` under `results/profiles/`; the "
    "trace (`trace.json.gz`) opens in ui.perfetto.dev."
)
_NO_PROFILES = "No profiled cells: add a `profile:` section to the config."


class ProfileRecordError(ValueError):
    """A profile's files cannot be read; the message names the file."""


def read_profile(summary_path: str | Path) -> dict[str, Any]:
    """One profiled cell: its profile.json with its three tables (as frames) beside it."""
    path = Path(summary_path)
    try:
        record = json.loads(path.read_text())
        tables = {
            name: pd.read_csv(path.parent / file)
            for name, file in (
                ("kernels", KERNELS_FILE),
                ("cpu_ops", CPU_OPS_FILE),
                ("categories", CATEGORIES_FILE),
            )
        }
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
    rows = []
    for (_, cell), profile in zip(cells.iterrows(), _in_order(profiles, cells), strict=True):
        for _, category in profile["categories"].iterrows():
            rows.append(
                {
                    **{key: cell[key] for key in CELL_COLUMNS},
                    **{key: cell[key] for key in RECORD_COLUMNS if key in cell},
                    **{
                        key: category[key]
                        for key in ("category", "calls", "total_ms", "ms_per_step", "share_pct")
                    },
                    "source": category["source"],
                }
            )
    columns = [*CELL_COLUMNS, *RECORD_COLUMNS]
    frame = pd.DataFrame(rows, columns=columns)
    return frame[columns]


def _in_order(profiles: Sequence[dict[str, Any]], cells: pd.DataFrame) -> list[dict[str, Any]]:
    by_path = {profile["path"]: profile for profile in profiles}
    return [by_path[path] for path in cells["path"]]


def short_name(name: str, width: int = NAME_WIDTH) -> str:
    """A kernel name short enough for a table (the full name is in kernels.csv)."""
    text = str(name)
    text = text[5:] if text.startswith("void ") else text
    return text if len(text) <= width else text[: width - 1] + "…"


def _ms(value: Any) -> str:
    return "" if T.is_missing(value) else f"{float(value):,.2f}"


def _us(value: Any) -> str:
    return "" if T.is_missing(value) else f"{float(value):,.1f}"


def _pct(value: Any) -> str:
    return "" if T.is_missing(value) else f"{float(value):.1f} %"


PROFILE_INTERFERENCE_NOTE = (
    f"{C.INTERFERENCE_MARK} profiled under interference: {C.INTERFERENCE_RULE}; so its ms/step "
    "may be slower than the machine is on its own (`conditions` in its profile.json)."
)


def shares_section(cells: pd.DataFrame, categories: pd.DataFrame) -> list[str]:
    """Per dataset and source: cells as rows, categories as columns (ms/step and share)."""
    sections = []
    ok = categories[categories["status"] == STATUS_OK]
    for (dataset, source), group in ok.groupby(["dataset", "source"], sort=False):
        rows = []
        for label, cell in group.groupby("label", sort=False):
            by_category = cell.set_index("category")
            total = by_category["ms_per_step"].sum()
            shares = [
                f"{_ms(by_category.at[c, 'ms_per_step'])} ({_pct(by_category.at[c, 'share_pct'])})"
                for c in CATEGORIES
            ]
            rows.append([label, _ms(total), *shares])
        header = ["cell", "ms/step", *CATEGORIES]
        sections.append(
            T.section(
                f"{dataset}: where a training step's time goes ({_SOURCE_TEXT[source]})",
                T.pipe_table(header, rows, "lr" + "r" * len(CATEGORIES)),
                notes=["Each category: ms per profiled step (share of the total)."]
                + (
                    [PROFILE_INTERFERENCE_NOTE]
                    if any(C.INTERFERENCE_MARK in label for label in group["label"])
                    else []
                ),
                level=2,
            )
        )
    not_run = cells[cells["status"] != STATUS_OK]
    if not not_run.empty:
        rows = [
            [row["label"], row["dataset"], T.OUTCOME_TEXT.get(row["status"], row["status"]),
             row["message"] or ""]
            for _, row in not_run.iterrows()
        ]  # fmt: skip
        sections.append(
            T.section(
                "Cells that could not be profiled",
                T.pipe_table(["cell", "dataset", "outcome", "why"], rows),
                level=2,
            )
        )
    return sections


def top_section(cell: pd.Series, profile: dict[str, Any], top: int) -> str:
    """One cell's top kernels (or top CPU operators when it had no GPU kernels)."""
    kernels = profile["kernels"]
    steps = cell["steps"] or 0
    where = f"{cell['backend']}, {cell['device_name']}, {steps} steps"
    title = f"{cell['dataset']}: {cell['label']}"
    if not kernels.empty:
        rows = [
            [
                index + 1,
                f"`{short_name(row['name'])}`",
                row["category"],
                int(row["calls"]),
                _ms(row["total_ms"]),
                _us(row["avg_us"]),
                _us(row["min_us"]),
                _us(row["max_us"]),
                _pct(row["share_pct"]),
            ]
            for index, (_, row) in enumerate(kernels.head(top).iterrows())
        ]
        header = ["#", "kernel", "category", "calls", "total ms", "avg µs", "min µs", "max µs"]
        body = T.pipe_table([*header, "share"], rows, "rllrrrrrr")
        note = f"Top {len(rows)} of {len(kernels)} kernels by GPU time ({where})."
        return T.section(title, body, notes=[note], level=3)
    operators = profile["cpu_ops"]
    rows = [
        [
            index + 1,
            f"`{short_name(row['name'])}`",
            row["category"],
            int(row["calls"]),
            _ms(row["self_ms"]),
            _ms(row["total_ms"]),
            _pct(row["share_pct"]),
        ]
        for index, (_, row) in enumerate(operators.head(top).iterrows())
    ]
    header = ["#", "CPU operator", "category", "calls", "self ms", "total ms", "share"]
    body = T.pipe_table(header, rows, "rllrrrr") if rows else "No operators were recorded."
    note = (
        f"No GPU kernels in this run ({where}): the top {len(rows)} of {len(operators)} CPU "
        "operators by self time instead."
    )
    return T.section(title, body, notes=[note], level=3)


def top_kernels_markdown(
    profiles: Sequence[dict[str, Any]], cells: pd.DataFrame, categories: pd.DataFrame, top: int
) -> str:
    if cells.empty:
        return T.document("Top kernels", _NOTE, [], empty=_NO_PROFILES)
    sections = shares_section(cells, categories)
    tops = [
        top_section(cell, profile, top)
        for (_, cell), profile in zip(cells.iterrows(), _in_order(profiles, cells), strict=True)
        if cell["status"] == STATUS_OK
    ]
    if tops:
        sections.append(T.section("Top kernels per profiled cell", "", level=2) + T.join(tops))
    return T.document("Top kernels", _NOTE, sections)


def aggregate(
    summary_paths: Iterable[str | Path], out_dir: str | Path, *, top: int = TOP_N
) -> dict[str, Path]:
    """Write kernel_categories.csv, top_kernels.md and top_kernels.html into ``out_dir``."""
    profiles = [read_profile(path) for path in summary_paths]
    cells = cells_frame(profiles)
    categories = (
        categories_frame(profiles, cells)
        if not cells.empty
        else pd.DataFrame(columns=[*CELL_COLUMNS, *RECORD_COLUMNS])
    )
    markdown = top_kernels_markdown(profiles, cells, categories, top)
    texts = {
        "categories": categories.to_csv(index=False, lineterminator="\n"),
        "top_kernels": markdown,
        "top_kernels_html": T.html_document(markdown),
    }
    out = Path(out_dir)
    written = {}
    for name, text in texts.items():
        written[name] = records.atomic_write_text(out / OUTPUTS[name], text)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = commands.Parser(
        prog="python -m nettebench report kernel-tables",
        description="Collect profiled cells into kernel_categories.csv and top_kernels.md/html.",
    )
    parser.add_argument("--out-dir", required=True, type=Path, help="folder for the tables")
    parser.add_argument("--top", type=int, default=TOP_N, help="kernels per cell")
    parser.add_argument("profiles", nargs="*", metavar="PROFILE_JSON")
    return commands.run(parser, _aggregate, argv, errors=(ProfileRecordError,))


def _aggregate(args: argparse.Namespace) -> list[str]:
    aggregate(args.profiles, args.out_dir, top=args.top)
    return [f"aggregated {len(args.profiles)} profile(s) into {args.out_dir}"]


if __name__ == "__main__":  # run as python -m nettebench report kernel-tables
    sys.exit(commands.moved(__spec__.name))
