"""Seconds by model, one column per version of a library, like the study's PyTorch 1.0.1 vs 1.1.0.

A table for every library whose version differs between cells: torchvision and apex builds,
packages pinned by a package environment (config ``environments:``, e.g. two Pillow versions for
the ``pil`` loader), Pillow itself, and torch and cuDNN when records from two environments are
aggregated together. A table compares versions on one piece of hardware (machine label, device,
CPU capability); any other software that differs between its cells (driver, CUDA, ...) is named
in the column, so no column averages what differs. After the versions, each version's speed-up
over the first, with whether the seeds support it.
"""

from __future__ import annotations

import pandas as pd

from nettebench.report import format as T
from nettebench.report.compare import Family, formula_note
from nettebench.report.frames.runs import pinned_packages
from nettebench.report.grids import device_title, groups, hardware_keys, no_matrix, row_keys
from nettebench.report.setups import HARDWARE_COLUMNS, SETUP_COLUMNS, describe, varying
from nettebench.report.tables.machines import side_by_side, side_by_side_sections

# Libraries whose versions the version table compares, as recorded in each cell's environment
# (env_<library>, and env_<library>_commit / env_<library>_build where known), and the cell
# parameter that picks each one's build. Packages a package environment pins follow.
VERSIONED_LIBRARIES = ("torch", "cudnn", "torchvision", "apex", "pillow")
# The setup column that holds a library's version, where there is one.
_SETUP_COLUMN_OF = {"torch": "env_torch", "cudnn": "env_cudnn"}


def version_label(row: pd.Series, library: str) -> str:
    """``0.29.1+cu130 @1f1a920`` or ``0.30.0a0+8d2f1c4 @8d2f1c4 (build main)``: the version a
    cell imported, the commit it was built from and the source build it came from, if any; for
    a package its environment pinned, ``11.3.0 (env pillow11)``."""
    pinned = pinned_packages(row)
    if library in pinned:
        environment = row.get("env_package_environment")
        suffix = "" if T.is_missing(environment) else f" (env {environment})"
        return f"{pinned[library]}{suffix}"
    version = row.get(f"env_{library}")
    if f"env_{library}" not in row.index:
        return "installed"
    text = "none" if T.is_missing(version) else T.fmt_value(version)
    commit = row.get(f"env_{library}_commit")
    if not T.is_missing(commit):
        text += f" @{str(commit)[:7]}"
    build = row.get(f"env_{library}_build")
    if not T.is_missing(build):
        text += f" (build {build})"
    return text


def _columns(table: pd.DataFrame, versions: pd.Series, library: str) -> pd.Series:
    """Each cell's column: the library's version, and the rest of its software where that
    differs inside the table (driver, CUDA, cuDNN, torch)."""
    software = [
        c for c in SETUP_COLUMNS if c not in HARDWARE_COLUMNS and c != _SETUP_COLUMN_OF.get(library)
    ]
    others = varying(table, tuple(software))
    if not others:
        return versions
    return pd.Series(
        [
            f"{versions[i]} ({describe(row, others, device=False, machine=False)})"
            for i, row in table.iterrows()
        ],
        index=table.index,
        dtype=object,
    )


def library_versions_markdown(runs: pd.DataFrame) -> T.Document:
    """The version tables (see the module docstring), then the versions recorded."""
    matrix = runs[runs["kind"] == "matrix"] if len(runs) else runs
    counts, recorded, family = [], [], Family()
    pending = []  # written once the family is complete
    group_keys = hardware_keys(runs)
    pinned = {name for _, row in matrix.iterrows() for name in pinned_packages(row)}
    known = [lib for lib in VERSIONED_LIBRARIES if f"env_{lib}" in matrix or lib in pinned]
    for library in [] if matrix.empty else known + sorted(pinned - set(known)):
        labels = matrix.apply(version_label, axis=1, library=library)
        # Rows are labelled without the parameter that picks this library's version (its build,
        # or the package environment that pins it): the columns show what it picked.
        picks = {library, *(["environment"] if library in pinned else [])}
        keys = [k for k in row_keys(runs) if k not in picks]
        for key, table in groups(matrix, group_keys):
            if labels[table.index].nunique() < 2:
                continue
            columns_of = _columns(table, labels[table.index], library)
            versions = list(dict.fromkeys(columns_of))  # in order of appearance
            rows_of = T.row_labels(table, keys)
            rows, notes = side_by_side(table, rows_of, columns_of, versions, "at", family, counts)
            params = dict(zip(group_keys, key, strict=True))
            machine = params.get("machine")
            where = "" if T.is_missing(machine) else f", machine {machine}"
            title = (
                f"{library}: {params['dataset']}, {T.fmt_value(params['epochs'])} epochs, "
                f"{device_title(table)}{where}"
            )
            pending.append((title, "model", versions, rows, notes))
        for version in dict.fromkeys(labels):
            recorded.append([library, version, str(int((labels == version).sum()))])
    sections = side_by_side_sections(pending)
    note = (
        "Seconds for all epochs of a cell by the library version it imported (`@commit`: the "
        f"build's commit), {T.seeds_note(counts)}; then speed-ups over the first version. "
        f"{formula_note('the first version', 'this version')}"
        + (f" {family.note()}" if family.members else "")
    )
    if recorded:
        table = T.table(["library", "version", "matrix cells"], recorded, "llr")
        sections += T.section("Versions recorded", table, level=2)
    empty = no_matrix(runs)
    return T.document("Time by library version", note, sections, empty=empty)
