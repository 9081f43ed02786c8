"""The CPU baselines against the matrix cells: the study's 4-vCPU VM against its T4.

One row per CPU baseline cell, labelled by what tells it apart from the others (its machine,
when there are several, and any parameter that varies); the matrix side is the mean over the
seeds of one measurement only, never across loaders, image sizes, workers, learning rates,
package environments or setups.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from nettebench.report import caveats as C
from nettebench.report import format as T
from nettebench.report import stats
from nettebench.report.answers import ALIKE, DISTURBED, FASTER, SLOWER, UNTESTED, direction
from nettebench.report.compare import Family, Speedup, render, speedup
from nettebench.report.duplicates import identity_columns
from nettebench.report.frames.runs import cell_keys
from nettebench.report.grids import NO_CELLS_NOTE, Marks, row_keys
from nettebench.report.setups import SETUP_COLUMNS, describe, varying
from nettebench.vocabulary.cell import PATH_LABELS
from nettebench.vocabulary.record_keys import STATUS_OK

# Parameters a CPU baseline differs from the matrix in by design (or that the table lays out):
# never required to match. Every other parameter (loader, image size, workers, lr, package
# environment, ...) is preferred equal, and named in the table where the match differs.
_BY_DESIGN = ("dataset", "model", "device", "precision", "epochs", "max_steps", "seed", "machine")

# How the precision column states the fewest-seconds cell against O0: the verdict on the same
# two cells in the words the front page uses (report.answers.direction), corrected over this
# table's verdicts, never "fastest" beside "cannot be told apart".
_VERSUS_O0 = {
    FASTER: " (faster than O0)",
    SLOWER: " (slower than O0 by its processes' steady rates)",
    ALIKE: " (O0 and it cannot be told apart)",
    UNTESTED: " (untested against O0)",
    DISTURBED: " (no verdict against O0: timed under interference ‡)",
}


@dataclass(frozen=True)
class _PrecisionCell:
    """The precision column: the fastest precision, its verdict against O0 (read once the
    table's family is complete) and what differs from the baseline."""

    precision: str
    versus: Speedup | None
    differences: list[str]

    def text(self) -> str:
        text = self.precision + _VERSUS_O0.get(direction(self.versus), "")
        return text + (f" ({', '.join(self.differences)})" if self.differences else "")


NO_GPU = "no GPU cell"
NO_GPU_NOTE = (
    f"{NO_GPU}: every matrix cell ran on the CPU (no GPU was visible), so there is no "
    "CPU-versus-GPU speed-up to state; the CPU baseline's seconds per epoch stand alone."
)

# What a matrix cell on the CPU baseline's own machine shares with it (a GPU cell records its
# host's CPU too): the setup but the device, and the CPU model.
_HOST_COLUMNS = (*(c for c in SETUP_COLUMNS if c != "device_name"), "env_cpu_model")


def _text(value: Any) -> str | None:
    return None if T.is_missing(value) else T.fmt_value(value)


def _key(value: Any) -> str:
    """A value as a comparable string, missing included (pandas turns None into NaN, and NaN
    equals nothing, not even itself)."""
    return repr(_text(value))


def seed_groups(cells: pd.DataFrame) -> tuple[dict[tuple, pd.Index], list[str]]:
    """The rows of ``cells`` that are seeds of one measurement: equal on every column that
    makes two records the same measurement (:func:`nettebench.report.duplicates.
    identity_columns`: every cell parameter, the device, the setup and the package
    environment) but the seed. Averaging across groups would treat a pil and a cached cell,
    two image sizes or two environments as seeds of one cell."""
    columns = [c for c in identity_columns(cells) if c not in ("seed", "cell_id")]
    keys = cells[columns].map(_key)
    return {
        key if isinstance(key, tuple) else (key,): index
        for key, index in keys.groupby(columns, sort=False, dropna=False).groups.items()
    }, columns


def _differences(cpu: pd.Series, cell: pd.Series, keys: list[str]) -> list[str]:
    """``batch 128``, ``loader cached``: the parameters where ``cell`` is not like ``cpu``."""
    return [
        f"{PATH_LABELS.get(k, k)} {_text(cell.get(k))}"
        for k in keys
        if _text(cell.get(k)) != _text(cpu.get(k))
    ]


def _o0_of(best: tuple, columns: list[str], means: dict[tuple, Any]) -> tuple | None:
    """The O0 group of the cell ``best`` is: equal on every column but the precision and how
    it was timed (``max_steps``: an extrapolated bf16 cell's O0 twin may run full epochs);
    the one timed like ``best`` when there is one, else one timed in full epochs."""
    skip = {columns.index("precision"), columns.index("max_steps")}
    twins = [
        key
        for key in means
        if key[columns.index("precision")] == _key("O0")
        and all(a == b for i, (a, b) in enumerate(zip(key, best, strict=True)) if i not in skip)
    ]
    steps = columns.index("max_steps")
    twins.sort(key=lambda key: (key[steps] != best[steps], key[steps] != _key(None)))
    return twins[0] if twins else None


def _fastest_matrix(
    matrix_ok: pd.DataFrame, cpu: pd.Series, cpu_s: float | None, family: Family, marks: Marks
) -> list[Any] | None:
    """The table's matrix columns for the CPU baseline ``cpu`` (``cpu_s`` seconds per epoch):
    the device, the precision with the fewest seconds per epoch of its model in its own run
    (machine label) with its verdict against O0 (in ``family``), then its seconds and speed-up
    and O0's. Cells like the baseline in every parameter not different by design are preferred,
    then cells of its host; seconds are averaged over the seeds of one measurement
    (:func:`seed_groups`)."""
    same = matrix_ok[
        (matrix_ok["dataset"] == cpu["dataset"]) & (matrix_ok["model"] == cpu["model"])
    ]
    if "machine" in same:
        same = same[same["machine"].map(T.fmt_value) == T.fmt_value(cpu.get("machine"))]
    if same.empty:
        return None
    if (same["batch_size"] == cpu["batch_size"]).any():
        same = same[same["batch_size"] == cpu["batch_size"]]
    keys = [k for k in cell_keys(same) if k not in _BY_DESIGN]
    # like for like, then the baseline's own host (its CPU, driver and libraries): unlabelled
    # machines have no label to match on
    for columns in (keys, [c for c in _HOST_COLUMNS if c in same]):
        alike = pd.Series(True, index=same.index)
        for column in columns:
            alike &= same[column].map(_key) == _key(cpu.get(column))
        if alike.any():
            same = same[alike]
    groups, columns = seed_groups(same)
    means = {
        key: (
            pd.to_numeric(same.loc[index, "epoch_s_median"], errors="coerce").mean(),
            same.loc[index, "extrapolated"].map(T.as_bool).any(),
        )
        for key, index in groups.items()
    }
    means = {key: value for key, value in means.items() if not pd.isna(value[0])}
    if not means:
        return None
    best = min(means, key=lambda key: means[key][0])
    o0 = _o0_of(best, columns, means)
    first = same.loc[groups[best][0]]

    def seconds(key: tuple | None) -> list[str]:
        """The group's seconds per epoch (mean ± CI over its seeds) and the CPU's speed-up."""
        if key not in means:
            return ["", ""]
        mean, approx = means[key]
        marks.approx |= bool(approx)
        summary = stats.summarize(same.loc[groups[key], "epoch_s_median"])
        text = (T.APPROX_MARK if approx else "") + stats.with_ci(summary, T.fmt_seconds)
        return [text, T.fmt_speedup(cpu_s / mean) if cpu_s is not None else ""]

    versus = None
    if o0 in means and o0 != best:  # the front page's verdict on the same two cells
        versus = speedup(same.loc[groups[o0]], same.loc[groups[best]], family=family)
    differences = _differences(cpu, first, ["batch_size", *keys])
    precision = _PrecisionCell(first["precision"], versus, differences)
    return [T.fmt_value(first["device_name"]), precision, *seconds(best), *seconds(o0)]


def cpu_vs_gpu_markdown(runs: pd.DataFrame) -> T.Document:
    """Each CPU baseline next to the same model's fastest matrix cell and its O0 cell."""
    baselines = runs[runs["kind"] == "cpu_baseline"]
    matrix_ok = runs[(runs["kind"] == "matrix") & (runs["status"] == STATUS_OK)]
    # A speed-up over the CPU needs a device that is not one: on a CPU-only machine the matrix
    # ran on the CPU too, and its cells against the baseline would be the CPU against itself.
    on_cpu = matrix_ok["device_type"].map(T.fmt_value) == "cpu"
    cpu_only = bool(len(matrix_ok)) and bool(on_cpu.all())
    matrix_ok = matrix_ok[~on_cpu]
    note = (
        "Seconds per epoch (median epoch wall time, `summary.epoch_s_median`; matrix cells: "
        f"{T.SEEDS_TEXT}) "
        "of each CPU baseline cell next to the same dataset and model in the matrix: its "
        "precision with the fewest seconds per epoch, with the verdict on it against O0 that "
        "the front page states, and O0; speed-up = CPU seconds per epoch / device seconds per "
        "epoch."
    )
    # what tells the baselines apart: their machine (setup), and parameters that vary
    several_setups = (
        baselines["setup"].nunique(dropna=False) > 1
        or baselines["machine"].map(_text).notna().any()
    )
    labels = T.row_labels(baselines, [*row_keys(runs), "seed"])
    # the machine column names what the CPU column does not: its label, driver, torch, ...
    machine_fields = [f for f in varying(baselines) if f != "device_name"]
    header = ["dataset", "model", *(["machine"] if several_setups else []), "batch", "threads"]
    header += ["CPU", "CPU s/epoch", "device", "precision", "s/epoch", "speed-up"]
    header += ["O0 s/epoch", "O0 speed-up"]
    rows, unmatched, marks = [], 0, Marks()
    family = Family()  # the table's verdicts against O0, corrected together
    for index, cpu in baselines.iterrows():
        cpu_ok = cpu["status"] == STATUS_OK
        cpu_s = cpu["epoch_s_median"] if cpu_ok else None
        cpu_text = T.outcome_cell(
            [cpu["status"]], cpu_s, T.fmt_seconds, approx=T.as_bool(cpu["extrapolated"])
        )
        if cpu_ok and T.as_bool(cpu.get("interference")):  # report.caveats
            cpu_text += C.INTERFERENCE_MARK
            marks.interference = "cell"
        marks.not_ok |= not cpu_ok
        row = [cpu["dataset"], labels[index]]
        if several_setups:
            row.append(describe(cpu, machine_fields) or T.fmt_value(cpu["setup"]))
        row += [
            T.fmt_value(cpu["batch_size"]),
            T.fmt_value(cpu["threads"]),
            "" if T.is_missing(cpu.get("env_cpu_model")) else cpu["env_cpu_model"],
            cpu_text,
        ]
        match = _fastest_matrix(matrix_ok, cpu, cpu_s, family, marks)
        if match is None:
            unmatched += 1
            rows.append([*row, NO_GPU if cpu_only else "no matching matrix cell"])
            continue
        rows.append([*row, *match])
        marks.approx |= cpu_text.startswith(T.APPROX_MARK)
    if baselines.empty:
        empty = NO_CELLS_NOTE if runs.empty else "No CPU baseline cells in the study."
        return T.document("CPU versus GPU", note, [], empty=empty)
    notes = []
    if unmatched and cpu_only:
        notes.append(NO_GPU_NOTE)
    elif unmatched:
        notes.append(
            f"{unmatched} of {len(baselines)} CPU baseline cell(s) have no finished matrix cell "
            "of the same dataset and model to compare with."
        )
    notes += marks.notes()
    rows = render(rows)
    if family.size:
        notes.append(family.note())
    table = T.table(header, rows, "ll" + ("l" if several_setups else "") + "rrlrllrrrr")
    return T.document(
        "CPU versus GPU", note, T.section("CPU baselines", table, notes=notes, level=2)
    )
