"""Machines side by side: seconds per cell, one column per setup, and the speed-up between them.

What a user of two clusters (a T4 partition and an A100 partition), or of one machine before and
after an upgrade, asks first: for the same cell, how long on each, and how many times faster. A
setup is the run's machine label with the hardware and software its records name
(:mod:`nettebench.report.setups`), a GPU power limit set below its default among them; a cell
that ran on one setup only is blank elsewhere.
"""

from __future__ import annotations

import functools
from typing import Any

import pandas as pd

from nettebench.report import format as T
from nettebench.report.compare import (
    Family,
    formula_note,
    no_verdict_note,
    render,
    speedup,
)
from nettebench.report.grids import Marks, grid_cell, groups, no_matrix, row_keys
from nettebench.report.setups import SETUP_COLUMNS, varying

_FIELD_HEADERS = {
    "machine": "machine label",
    "device_name": "device",
    "env_driver": "driver",
    "env_cuda": "CUDA",
    "env_cudnn": "cuDNN",
    "env_torch": "torch",
    "env_cpu_capability": "CPU capability",
    "gpu_power_limit_lowered_w": "GPU power limit, lowered (W)",
}

# Setup columns shown only where some setup has a value: a lowered power limit is rare.
_WHEN_SET = ("gpu_power_limit_lowered_w",)


def _setups_section(matrix: pd.DataFrame) -> list[T.Block]:
    """Every setup and what its records say, so a column header can be looked up; a GPU power
    limit set below its default is named there (hardware, like the device)."""
    columns = [
        c
        for c in SETUP_COLUMNS
        if c in matrix.columns and (c not in _WHEN_SET or not matrix[c].map(T.is_missing).all())
    ]
    rows = []
    for setup, cells in groups(matrix, ["setup"]):
        first = cells.iloc[0]
        rows.append(
            [
                setup[0],
                *("" if T.is_missing(first[c]) else T.fmt_value(first[c]) for c in columns),
                str(len(cells)),
            ]
        )
    header = ["setup", *(_FIELD_HEADERS[c] for c in columns), "matrix cells"]
    return T.section("Setups", T.table(header, rows), level=2)


def _locks_note(matrix: pd.DataFrame) -> str:
    """Which lock each setup ran (``environment.lock``, :mod:`nettebench.records.lock`) where
    the setups compared did not all run the same: their packages beyond the ones a setup
    names (numpy, pillow, ...) may differ too. Empty where they did, or no record says."""
    if "env_lock" not in matrix.columns or matrix["env_lock"].map(T.is_missing).all():
        return ""
    locks = {
        setup[0]: sorted({"unknown" if T.is_missing(v) else str(v) for v in cells["env_lock"]})
        for setup, cells in groups(matrix, ["setup"])
    }
    if len({tuple(names) for names in locks.values()}) < 2:
        return ""
    ran = "; ".join(f"{T.fmt_value(s)}: {', '.join(names)}" for s, names in locks.items())
    return (
        f"The setups ran different locks of the installed packages ({ran}): packages other "
        "than those the setups name may differ too."
    )


def side_by_side(
    table: pd.DataFrame,
    labels: pd.Series,
    side: pd.Series,
    sides: list[str],
    at: str,
    family: Family,
    counts: list[int],
) -> tuple[list[list[Any]], list[str]]:
    """The rows of a side-by-side table (versions, machines) and their footnotes: a row per row
    label and precision, the seconds of each of ``sides`` (the values of ``side``, one per row
    of ``table``: a setup, a version), then each side's speed-up over the first, a member of
    ``family``. ``at`` joins a row and a side in the footnotes (``on``, ``at``); ``counts``
    receives each side's number of finished seeds."""
    rows, marks, withheld, first = [], Marks(), [], sides[0]
    seconds = functools.partial(
        grid_cell, value="time_for_epochs_s", fmt=T.fmt_seconds, marks=marks, unstable=True
    )
    for precision in T.sort_precisions(table["precision"]):
        of_precision = table["precision"] == precision
        for label in labels[of_precision].unique():
            cell = table[(labels == label) & of_precision]
            by_side = {s: cell[side[cell.index] == s] for s in sides}
            row = [f"{label} {precision}"]
            for name, seeds in by_side.items():
                row.append(seconds(seeds.to_dict("records"), name=f"{row[0]} {at} {name}"))
            for name in sides[1:]:
                pair = pd.concat([by_side[first], by_side[name]])
                found = speedup(
                    by_side[first],
                    by_side[name],
                    approx=any(map(T.as_bool, pair["extrapolated"])),
                    names=(f"{row[0]} {at} {first}", f"{row[0]} {at} {name}"),
                    family=family,
                    withheld=withheld,
                )
                row.append(found or "")
            rows.append(row)
    marks.extra_notes = [no_verdict_note(withheld)] if withheld else None
    counts += marks.seed_counts
    return rows, marks.notes()


def side_by_side_sections(pending: list[tuple[str, str, list[str], list, list[str]]]) -> list:
    """Each side-by-side table (title, first column's header, sides, rows, notes) as a section,
    its speed-ups rendered: their family is complete."""
    sections = []
    for title, first, sides, rows, notes in pending:
        header = [first, *sides, *(f"{s}: speed-up over {sides[0]}" for s in sides[1:])]
        body = T.table(header, render(rows), "l" + "r" * (len(header) - 1))
        sections += T.section(title, body, notes=notes, level=2)
    return sections


def machines_markdown(runs: pd.DataFrame) -> T.Document:
    """Seconds for N epochs by cell, one column per setup, then each setup's speed-up over the
    first (mean over seeds, with whether the seeds support it)."""
    matrix = runs[runs["kind"] == "matrix"] if len(runs) else runs
    if matrix.empty:
        note = "Seconds per cell, one column per machine and environment."
        return T.document("Machines side by side", note, [], empty=no_matrix(runs))
    note = (
        "Seconds for all epochs of a cell, one column per setup (here differing in "
        f"{', '.join(_FIELD_HEADERS[c] for c in varying(matrix)) or 'nothing'}), "
        f"{T.SEEDS_TEXT}; then speed-ups over the first column. "
        f"{formula_note('the first setup', 'this setup')}"
    )
    setups_all = sorted(set(matrix["setup"].map(T.fmt_value)))
    if len(setups_all) < 2:  # what to do for a comparison, then the one setup
        how = T.Paragraph(
            f"All matrix cells ran on one setup ({setups_all[0]}). Run the study on another "
            "machine with its own label (`--config machine=a100`), then list that run's "
            "results/ folder under `merge_results:` and aggregate "
            "(`snakemake --workflow-profile profiles/aggregate`) to see them side by side."
        )
        return T.document("Machines side by side", note, [how, *_setups_section(matrix)])
    counts, family = [], Family()
    pending = []  # written once the family is complete
    for (dataset, epochs), table in groups(matrix, ["dataset", "epochs"]):
        setups = sorted(set(table["setup"].map(T.fmt_value)))
        if len(setups) < 2:
            continue
        labels = T.row_labels(table, row_keys(runs))
        side = table["setup"].map(T.fmt_value)
        rows, notes = side_by_side(table, labels, side, setups, "on", family, counts)
        pending.append((f"{dataset}, {T.fmt_value(epochs)} epochs", "cell", setups, rows, notes))
    sections = side_by_side_sections(pending)
    note = note.replace(T.SEEDS_TEXT, T.seeds_note(counts))
    note += f" {family.note()}" if family.members else ""
    locks = _locks_note(matrix)
    note += f" {locks}" if locks else ""
    return T.document("Machines side by side", note, [*sections, *_setups_section(matrix)])
