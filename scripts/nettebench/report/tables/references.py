"""Published references beside the study's own cells (:mod:`nettebench.report.references`).

A user who cannot reproduce a published number wants to know whether the machine or the recipe
is at fault. Each published training throughput is set beside every finished matrix cell of the
same model and precision on the same GPU name (torch's ``device_name``), as a percentage, with
every recipe difference named (batch, data, GPU count, framework, compile, image size). Against
a reference measured on synthetic batches (made on the GPU) the cell's compute ceiling is the
like-for-like number (batches already on the device), when it was measured; otherwise the
cell's own img/s, its input pipeline named as a difference. A cell timed under interference
carries ‡. With no match the table says so, naming the devices the study ran on.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd

from nettebench.report import caveats as C
from nettebench.report import format as T
from nettebench.report.grids import NO_CELLS_NOTE
from nettebench.report.references import REFERENCES, VERSION, Reference
from nettebench.vocabulary.cell import CellSpec
from nettebench.vocabulary.record_keys import STATUS_OK

_DEFAULTS = {field.name: field for field in dataclasses.fields(CellSpec)}

REFERENCE_IMAGE_SIZE = 224


def _value(row: pd.Series, key: str) -> Any:
    value = row.get(key)
    return None if T.is_missing(value) else value


def matches(runs: pd.DataFrame) -> list[tuple[Reference, pd.Series]]:
    """(reference, run row) for every finished matrix cell a reference is of."""
    if runs.empty:
        return []
    done = runs[(runs["kind"] == "matrix") & (runs["status"] == STATUS_OK)]
    return [
        (reference, row)
        for reference in REFERENCES
        for _, row in done.iterrows()
        if row.get("model") == reference.model
        and row.get("precision") == reference.precision
        and row.get("device_name") in reference.gpu_names
    ]


def ours(reference: Reference, row: pd.Series) -> tuple[float | None, str, bool]:
    """The cell's like-for-like img/s, what it is, and whether its window was disturbed."""
    ceiling = _value(row, "ceiling_img_s")
    if reference.data == "synthetic" and ceiling is not None:
        return float(ceiling), "compute ceiling", T.as_bool(row.get("ceiling_interference"))
    rate = _value(row, "train_img_s")
    return (None if rate is None else float(rate)), "trained", T.as_bool(row.get("interference"))


def differences(reference: Reference, row: pd.Series, what: str) -> list[str]:
    """Every recipe difference between the reference and the cell."""
    found = []
    batch = _value(row, "batch_size")
    if reference.batch_size is None:
        found.append(f"batch: theirs not stated, ours {batch}")
    elif str(batch) != str(reference.batch_size):
        found.append(f"batch: theirs {reference.batch_size}, ours {batch}")
    loader = _value(row, "loader") or _DEFAULTS["loader"].default  # older records: the default
    dataset = _value(row, "dataset")
    if reference.data != "synthetic" or what != "compute ceiling":  # else both on the GPU
        found.append(f"data: theirs {reference.data}, ours {dataset} through the {loader} loader")
    size = _value(row, "image_size") or _DEFAULTS["image_size"].default
    if size is not None and int(size) != REFERENCE_IMAGE_SIZE:
        found.append(f"image size: theirs {REFERENCE_IMAGE_SIZE} px, ours {size} px")
    processes = int(_value(row, "processes") or 1)
    if processes != reference.gpus:
        found.append(f"GPUs: theirs {reference.gpus}, ours {processes}")
    found.append(f"framework: theirs {reference.framework}; ours torch {_value(row, 'env_torch')}")
    if T.as_bool(row.get("compile")):
        found.append("ours under torch.compile")
    return found


def _reference_rows() -> list[list[str]]:
    return [
        [
            f"{r.model} {r.precision}, {r.gpu}",
            f"{r.img_s:,.0f}",
            str(r.batch_size or "not stated"),
            r.data,
            str(r.gpus),
            r.framework,
            r.date,
            r.source + (f" ({r.notes})" if r.notes else ""),
        ]
        for r in REFERENCES
    ]


def no_match_note(runs: pd.DataFrame) -> str:
    """Why no reference matches: the devices the study ran on."""
    if runs.empty:
        return NO_CELLS_NOTE
    devices = set()
    for _, row in runs[runs["kind"] == "matrix"].iterrows():
        kind, name = _value(row, "device_type"), _value(row, "device_name")
        if kind == "cpu":
            devices.add(f"cpu ({_value(row, 'env_cpu_model') or name or 'unknown model'})")
        else:
            devices.add(f"{kind} ({name})")
    gpus = ", ".join(sorted({r.gpu for r in REFERENCES}))
    return (
        f"No published reference matches this device: the references are of {gpus}, and this "
        f"study's cells ran on {', '.join(sorted(devices)) or 'no device'}; a reference is set "
        "beside a cell only for the same model, precision and GPU name."
    )


def references_markdown(runs: pd.DataFrame) -> T.Document:
    found = matches(runs)
    rows = []
    for reference, row in found:
        rate, what, disturbed = ours(reference, row)
        mark = C.INTERFERENCE_MARK if disturbed else ""
        share = "" if rate is None else f"{100 * rate / reference.img_s:.0f} %"
        rows.append(
            [
                f"{reference.model} {reference.precision}, {reference.gpu}",
                f"{reference.img_s:,.0f}",
                f"{T.fmt_rate(rate)}{mark} ({what})" if rate is not None else "",
                share,
                "; ".join(differences(reference, row, what)),
                str(row.get("path")),
            ]
        )
    header = ["reference", "published img/s", "ours img/s", "ours / published"]
    header += ["recipe differences", "our cell"]
    beside = T.table(header, rows, "lrrrll") if rows else T.Paragraph(no_match_note(runs))
    header = ["model precision, GPU", "img/s", "batch", "data", "GPUs", "framework", "date"]
    published = T.table([*header, "source"], _reference_rows(), "lrrlrlll")
    sections = [
        *T.section("Beside this study's cells", beside, level=2),
        *T.section(f"The references (version {VERSION})", published, level=2),
    ]
    note = (
        "Published training throughputs (one GPU) beside the cells of the same model, precision "
        "and GPU name. Against a reference on synthetic batches the cell's compute ceiling "
        "(batches already on the device) is compared; otherwise its trained img/s, the input "
        f"pipeline named as a difference. {C.INTERFERENCE_MARK}: timed under interference."
    )
    return T.document("Published references", note, sections)
