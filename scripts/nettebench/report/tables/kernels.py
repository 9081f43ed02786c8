"""The profiled cells' table: the category shares of every profiled cell side by side, then each
cell's top kernels with nvprof's columns (a CPU-only profile, with no kernels: its top CPU
operators by self time)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from nettebench.profiling import SOURCE_CPU, SOURCE_GPU
from nettebench.profiling.categories import CATEGORIES
from nettebench.report import caveats as C
from nettebench.report import format as T
from nettebench.report.frames.kernels import in_order
from nettebench.vocabulary.record_keys import STATUS_OK

TOP_N = 10
NAME_WIDTH = 90
CATEGORIES_CSV = "kernel_categories.csv"
TOP_KERNELS = "top_kernels"
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


def short_name(name: str, width: int = NAME_WIDTH) -> str:
    """A kernel name short enough for a table (the full name is in kernels.csv)."""
    text = str(name)
    text = text[5:] if text.startswith("void ") else text
    return text if len(text) <= width else text[: width - 1] + "…"


_ms, _us, _pct = T.number_format(",.2f"), T.number_format(",.1f"), T.number_format(".1f", " %")


PROFILE_INTERFERENCE_NOTE = (
    f"{C.INTERFERENCE_MARK} profiled under interference: {C.INTERFERENCE_RULE}; so its ms/step "
    "may be slower than the machine is on its own (`conditions` in its profile.json)."
)


def shares_section(cells: pd.DataFrame, categories: pd.DataFrame) -> list[T.Block]:
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
        sections += T.section(
            f"{dataset}: where a training step's time goes ({_SOURCE_TEXT[source]})",
            T.table(header, rows, "lr" + "r" * len(CATEGORIES)),
            notes=["Each category: ms per profiled step (share of the total)."]
            + (
                [PROFILE_INTERFERENCE_NOTE]
                if any(C.INTERFERENCE_MARK in label for label in group["label"])
                else []
            ),
            level=2,
        )
    not_run = cells[cells["status"] != STATUS_OK]
    if not not_run.empty:
        rows = [
            [row["label"], row["dataset"], T.OUTCOME_TEXT.get(row["status"], row["status"]),
             row["message"] or ""]
            for _, row in not_run.iterrows()
        ]  # fmt: skip
        sections += T.section(
            "Cells that could not be profiled",
            T.table(["cell", "dataset", "outcome", "why"], rows),
            level=2,
        )
    return sections


# The columns after rank, name, category and calls: header -> (column, format)
_KERNEL_COLUMNS = {"total ms": ("total_ms", _ms), "avg µs": ("avg_us", _us)}
_KERNEL_COLUMNS |= {"min µs": ("min_us", _us), "max µs": ("max_us", _us)}
_KERNEL_COLUMNS |= {"share": ("share_pct", _pct)}
_OPERATOR_COLUMNS = {"self ms": ("self_ms", _ms), "total ms": ("total_ms", _ms)}
_OPERATOR_COLUMNS |= {"share": ("share_pct", _pct)}


def _top_table(frame: pd.DataFrame, what: str, columns: dict[str, tuple]) -> T.Block:
    """The rows of ``frame`` (the top kernels or CPU operators) as a table."""
    rows = [
        [
            index + 1,
            f"`{short_name(row['name'])}`",
            row["category"],
            int(row["calls"]),
            *(fmt(row[column]) for column, fmt in columns.values()),
        ]
        for index, (_, row) in enumerate(frame.iterrows())
    ]
    header = ["#", what, "category", "calls", *columns]
    return (
        T.table(header, rows, "rllr" + "r" * len(columns))
        if rows
        else T.Paragraph("No operators were recorded.")
    )


def top_section(cell: pd.Series, profile: dict[str, Any], top: int) -> list[T.Block]:
    """One cell's top kernels (or top CPU operators when it had no GPU kernels)."""
    kernels, operators = profile["kernels"], profile["cpu_ops"]
    where = f"{cell['backend']}, {cell['device_name']}, {cell['steps'] or 0} steps"
    if not kernels.empty:
        shown = kernels.head(top)
        body = _top_table(shown, "kernel", _KERNEL_COLUMNS)
        note = f"Top {len(shown)} of {len(kernels)} kernels by GPU time ({where})."
    else:
        shown = operators.head(top)
        body = _top_table(shown, "CPU operator", _OPERATOR_COLUMNS)
        note = (
            f"No GPU kernels in this run ({where}): the top {len(shown)} of {len(operators)} CPU "
            "operators by self time instead."
        )
    return T.section(f"{cell['dataset']}: {cell['label']}", body, notes=[note], level=3)


def top_kernels_markdown(
    profiles: Sequence[dict[str, Any]], cells: pd.DataFrame, categories: pd.DataFrame, top: int
) -> T.Document:
    if cells.empty:
        return T.document("Top kernels", _NOTE, [], empty=_NO_PROFILES)
    sections = shares_section(cells, categories)
    tops = [
        block
        for (_, cell), profile in zip(cells.iterrows(), in_order(profiles, cells), strict=True)
        if cell["status"] == STATUS_OK
        for block in top_section(cell, profile, top)
    ]
    if tops:
        sections += [*T.section("Top kernels per profiled cell", level=2), *tops]
    return T.document("Top kernels", _NOTE, sections)
