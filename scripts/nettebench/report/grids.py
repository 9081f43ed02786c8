"""Table shaping shared by the study's tables: row labels, groups, model x precision grids.

Cells are grouped by dataset, epochs, device and setup (machine and environment, see
:mod:`nettebench.report.setups`: two machines' copies of a cell are never averaged as seeds);
within a group, rows are models (plus every cell parameter that varies, so adding an axis never
needs a change here) and columns are precisions in the table's fixed order. A table cell is the
mean over seeds with its 95 % confidence interval (:mod:`nettebench.report.stats`). Also the
notes every table prints under itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

import pandas as pd

from nettebench.report import caveats as C
from nettebench.report import format as T
from nettebench.report import stats
from nettebench.report.frames.runs import cell_keys
from nettebench.report.setups import HARDWARE_COLUMNS, title_suffix
from nettebench.vocabulary.record_keys import STATUS_OK

# Keys that a table groups by or puts in its columns, so they never go into its row labels.
# max_steps is how a cell was timed, not what was timed: the "~" mark says it instead.
# The machine label is part of a table's setup (its title), not of its rows.
_NOT_ROW_KEYS = ("dataset", "epochs", "device", "seed", "precision", "model")
_NOT_ROW_KEYS += ("max_steps", "machine")
# What every table groups by before it lays out rows and columns.
GROUP_KEYS = ["dataset", "epochs", "device_type", "setup"]

LEGEND = (
    "OOM: ran out of memory. n/a: precision not supported on this device. Blank: not in the study."
)

APPROX_NOTE = (
    f"{T.APPROX_MARK} extrapolated: only `max_steps` steps per epoch were run and timed, "
    "and epoch times scaled to the full epoch."
)

PARTIAL_NOTE = f"{T.PARTIAL_MARK} some seeds did not finish; mean over those that did."

NO_CELLS_NOTE = "No cells have finished yet: no metrics.json files were aggregated."

NO_CEILINGS_NOTE = (
    "No compute ceilings were measured (no `ceiling.json` beside any cell's metrics.json)."
)

CEILING_NOTE = (
    "The compute ceiling is the training img/s of the same model, precision and batch size on a "
    "batch already on the device, with no input pipeline (`ceiling.json`, measured in the cell's "
    "own job right after its epochs: `python -m nettebench benchmarks cell-job`). Blank: no "
    "ceiling measured for that cell."
)


def row_keys(runs: pd.DataFrame) -> list[str]:
    """Parameters that may tell rows apart in a label (not those the tables lay out)."""
    return [k for k in cell_keys(runs) if k not in _NOT_ROW_KEYS]


APEX_FALLBACK = "apex's Python fallback: no amp_C"


def mark_apex_fallback(table: pd.DataFrame, labels: pd.Series) -> pd.Series:
    """Row labels of apex cells whose apex had no ``amp_C`` (a Python-only build, recorded as
    ``environment.apex_kernels``) say so: their loss scaler synchronised once per parameter
    per step, which the study's apex, built with its extensions, did not."""
    if "env_apex_kernels" not in table or "amp_backend" not in table:
        return labels
    fallback = (table["amp_backend"] == "apex") & (table["env_apex_kernels"] == "python")
    return labels.where(~fallback, labels + f" [{APEX_FALLBACK}]")


def hardware_keys(runs: pd.DataFrame) -> list[str]:
    """What a comparison never crosses: dataset, epochs, device type and the hardware (machine
    label, device, CPU capability); software may differ, as an axis of its own."""
    return ["dataset", "epochs", "device_type", *(c for c in HARDWARE_COLUMNS if c in runs)]


SPOKEN_KINDS = {"cuda": "a GPU", "cpu": "a CPU"}  # a sentence's device of one kind


def device_title(frame: pd.DataFrame, *, spoken: bool = False) -> str:
    """``cuda (Tesla T4)``; ``spoken``, a sentence's ``a GPU (Tesla T4)`` for one kind."""
    names = sorted({str(n) for n in frame["device_name"] if not T.is_missing(n)})
    kinds = sorted({str(t) for t in frame["device_type"] if not T.is_missing(t)})
    text = ", ".join(kinds) or "unknown device"
    text = SPOKEN_KINDS.get(text, text) if spoken else text
    return f"{text} ({'; '.join(names)})" if names else text


def groups(frame: pd.DataFrame, keys: list[str]) -> Iterable[tuple[tuple, pd.DataFrame]]:
    """Groups in order of first appearance, missing values kept as their own group."""
    for key, group in frame.groupby(keys, sort=False, dropna=False):
        yield (key if isinstance(key, tuple) else (key,)), group


def matrix_groups(runs: pd.DataFrame) -> Iterable[tuple[str, pd.DataFrame]]:
    """The matrix cells by :data:`GROUP_KEYS`, each group with its title (``imagenette, 2
    epochs, cuda (Tesla T4)``, then its setup where there are several)."""
    matrix = runs[runs["kind"] == "matrix"]
    for (dataset, epochs, _, _), table in groups(matrix, GROUP_KEYS):
        title = f"{dataset}, {T.fmt_value(epochs)} epochs, {device_title(table)}"
        yield title + title_suffix(table, matrix), table


@dataclass(kw_only=True)
class Marks:
    """The marks a table set (the caveats of report.caveats among them), for its footnotes."""

    approx: bool = False
    partial: bool = False
    not_ok: bool = False  # a cell reads OOM or n/a (format.OUTCOME_TEXT): the legend explains
    interference: str | None = None  # the subject ("cell", "ceiling", "share") when marked
    impossible: bool = False
    unstable: list[str] | None = None  # "<row> <precision>" of each cell marked unstable
    within_noise: bool = False  # a share above 100 % within both spreads is marked
    emulated: str | None = None  # the note naming the CPU, when a column is emulated
    # footnotes of the table's own (report.compare.no_verdict_note: comparisons withheld)
    extra_notes: list[str] | None = None
    seed_counts: list[int] = field(default_factory=list)  # each cell's seeds, for the seeds note

    def notes(self) -> list[str]:
        notes = [APPROX_NOTE] if self.approx else []
        notes += [PARTIAL_NOTE] if self.partial else []
        notes += [LEGEND] if self.not_ok else []
        notes += [C.interference_note(self.interference)] if self.interference else []
        notes += [C.IMPOSSIBLE_NOTE] if self.impossible else []
        notes += [C.unstable_note(self.unstable)] if self.unstable else []
        notes += [C.WITHIN_NOISE_NOTE] if self.within_noise else []
        notes += [self.emulated] if self.emulated else []
        return notes + list(self.extra_notes or [])


@dataclass(kw_only=True)
class Grid(Marks):
    """One model x precision table and what its footnotes need to say."""

    title: str
    header: list[str]
    rows: list[list[str]]


def grid_cell(
    seeds: list[dict[str, Any]],
    value: str,
    fmt: Any,
    marks: Marks,
    name: str,
    *,
    status: str = "status",
    mark_extrapolated: bool = True,
    caveats: str = "cell",
    interval: tuple[str, str] | None = None,
    unstable: bool = False,
    not_measured: str | None = None,
) -> str:
    """One table cell: the mean of ``value`` ± its 95 % confidence interval over the ``seeds``
    (rows of runs.csv) whose ``status`` is ok, with every mark that applies, set in ``marks``
    for the footnotes (``name`` names the cell there).

    ``caveats``: ``cell``, ``ceiling`` or ``share`` (:func:`nettebench.report.caveats.
    cell_caveat`). ``interval``: a cell of one seed shows its own interval (``146 [140-152]``).
    ``unstable``: unstable steps are marked. ``not_measured``: the text of a cell whose finished
    seeds have no value.
    """
    ok = [seed for seed in seeds if seed[status] == STATUS_OK]
    summary = stats.summarize([seed[value] for seed in ok])
    within = C.seed_interval(ok[0], interval) if summary.n == 1 and interval else None
    text = T.outcome_cell(
        [seed[status] for seed in seeds],
        summary.mean,
        lambda _mean: (
            stats.with_ci(summary, fmt)
            if within is None
            else f"{fmt(summary.mean)} [{fmt(within[0])}-{fmt(within[1])}]"
        ),
        approx=mark_extrapolated and any(T.as_bool(seed["extrapolated"]) for seed in ok),
    )
    marks.seed_counts += [summary.n] if summary.n else []
    marks.approx |= text.startswith(T.APPROX_MARK)
    marks.partial |= text.endswith(T.PARTIAL_MARK)
    marks.not_ok |= text in T.OUTCOME_TEXT.values()
    if not ok or T.is_missing(summary.mean):
        not_found = not_measured and not text and ok
        return not_measured if not_found and all(T.is_missing(s[value]) for s in ok) else text
    withheld, mark = C.cell_caveat(ok, caveats)
    marks.interference = caveats if mark else marks.interference
    marks.impossible |= withheld
    if withheld:
        return C.IMPOSSIBLE_MARK
    text += mark
    if caveats == "share" and C.exceeded(ok):
        text += C.WITHIN_NOISE_MARK
        marks.within_noise = True
    if unstable and C.unstable_reasons(ok):
        text += C.UNSTABLE_MARK
        marks.unstable = [*(marks.unstable or []), name]
    return text


def model_precision_grids(
    runs: pd.DataFrame,
    value: str,
    fmt: Any,
    *,
    status: str = "status",
    require: str | None = None,
    **cell: Any,
) -> list[Grid]:
    """Matrix cells as model x precision tables, one per (dataset, epochs, device type, setup),
    of :func:`grid_cell` cells (``cell`` its options). ``require``: a table is left out unless a
    cell has a value in that column.
    """
    grids = []
    for title, table in matrix_groups(runs):
        if require is not None and table[require].map(T.is_missing).all():
            continue
        labels = mark_apex_fallback(table, T.row_labels(table, row_keys(runs)))
        precisions = T.sort_precisions(table["precision"])
        records = table.to_dict("records")  # once per table: slow on a frame this wide
        is_ok = table[status] == STATUS_OK
        of_precision = {precision: table["precision"] == precision for precision in precisions}
        headers = [
            C.emulated_header(p, _pick(records, is_ok & of_precision[p])) for p in precisions
        ]
        grid = Grid(title=title, header=["model", *headers], rows=[])
        for label in labels.unique():
            of_label = labels == label
            grid.rows.append([label])
            for precision in precisions:
                seeds = _pick(records, of_label & of_precision[precision])
                name = f"{label} {precision}"
                grid.rows[-1].append(
                    grid_cell(seeds, value, fmt, grid, name, status=status, **cell)
                )
        grid.emulated = C.emulated_note(_pick(records, is_ok)) if headers != precisions else None
        grids.append(grid)
    return grids


def _pick(records: list[dict[str, Any]], mask: pd.Series) -> list[dict[str, Any]]:
    """The records of the rows ``mask`` selects, given the records of all rows (in order).

    The same dictionaries as ``frame[mask].to_dict("records")``, without converting a frame
    once per table cell: on the wide runs frame each conversion took tens of milliseconds.
    """
    return list(compress(records, mask.tolist()))


def no_matrix(runs: pd.DataFrame) -> str:
    """What a model x precision document says when it has no table to show."""
    return NO_CELLS_NOTE if runs.empty else "No matrix cells in the study yet."


def grid_sections(grids: list[Grid], level: int) -> list[T.Block]:
    """Each grid as a section: its title, its table, its notes."""
    return [
        block
        for g in grids
        for block in T.section(
            g.title,
            T.table(g.header, g.rows, "l" + "r" * (len(g.header) - 1)),
            notes=g.notes(),
            level=level,
        )
    ]


# What tells two rows of one label apart, in the order a reader looks for it: the seed, the
# machine label (or, unlabelled, the setup: device and software), the host.
TELL_APART = ("seed", "machine", "setup", "env_host")
_TELL_APART_NAMES = {"env_host": "host", "device_name": ""}


def tell_apart(
    labels: pd.Series, frame: pd.DataFrame, columns: Sequence[str] = TELL_APART
) -> pd.Series:
    """``labels`` (one per row of ``frame``) with what tells rows of a repeated label apart:
    the ``columns`` whose values differ among such rows, added to every row's label alike (so
    a table reads one way: ``resnet18 O0 · seed 1, machine t4``). The setup is left out where
    the machine label already differs (it names it); nothing is added when no label repeats."""
    differing: list[str] = []
    for _, group in frame.groupby(labels, sort=False):
        if len(group) < 2:
            continue
        for column in columns:
            values = group[column].map(T.fmt_value) if column in group else None
            if values is not None and values.nunique() > 1 and column not in differing:
                differing.append(column)
    if "machine" in differing and "setup" in differing:
        differing.remove("setup")
    differing = [c for c in columns if c in differing]
    if not differing:
        return labels.copy()
    found = labels.copy()
    for index, row in frame.iterrows():
        parts = [f"{_TELL_APART_NAMES.get(c, c)} {T.fmt_value(row[c])}".strip() for c in differing]
        found[index] = f"{labels[index]} · {', '.join(parts)}"
    return found
