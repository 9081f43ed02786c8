"""Seconds by model, one column per version of a library, like the study's PyTorch 1.0.1 vs 1.1.0.

A table for every library whose version differs between cells (torchvision and apex builds, and
torch and cuDNN when records from two environments are aggregated together).
"""

from __future__ import annotations

import pandas as pd

from nettebench.records import files as records
from nettebench.report import format as T
from nettebench.report.grids import APPROX_NOTE, LEGEND, device_title, groups, no_matrix, row_keys

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
        for (dataset, epochs, _), table in groups(matrix, ["dataset", "epochs", "device_type"]):
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
            notes = ([APPROX_NOTE] if approx else []) + ([LEGEND] if not_ok else [])
            title = f"{library}: {dataset}, {T.fmt_value(epochs)} epochs, {device_title(table)}"
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
    empty = no_matrix(runs)
    return T.document("Time by library version", note, sections, empty=empty)
