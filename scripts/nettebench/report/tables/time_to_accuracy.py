"""Time to accuracy: seconds until validation top-1 first reached the config's ``target_top1``.

MLPerf scores training by the time to a target accuracy, not by speed alone: a precision that is
faster per epoch but learns worse needs more epochs, and only this table shows it. Laid out
like the time table beside it (model x precision, one table per setup); ``not reached`` where
no seed of a cell got there within its epochs.
"""

from __future__ import annotations

import pandas as pd

from nettebench.report import format as T
from nettebench.report import stats
from nettebench.report.grids import LEGEND, matrix_groups, no_matrix, row_keys
from nettebench.vocabulary.record_keys import STATUS_OK

NOT_REACHED = "not reached"
PARTIAL = "partial epochs"
PARTIAL_NOTE = (
    f"{PARTIAL}: the cell trained only `max_steps` steps of each epoch, so its accuracy is not "
    "that of a full epoch and it has no time to accuracy."
)
NOT_REACHED_NOTE = f"{NOT_REACHED}: no seed of the cell reached it within its epochs."
SOME_NOTE = "(k/n): only k of the n finished seeds reached the target; mean over those that did."
_NO_TARGET = (
    "No target set: add `target_top1: 75` (validation top-1 in %) to the config, or "
    "`--config target_top1=75`, to see how long each cell takes to reach it. Only the tables "
    "are rebuilt; nothing is trained again."
)


def target_of(runs: pd.DataFrame) -> float | None:
    """The config's ``target_top1`` (%) the cells were run with, None without one."""
    targets = stats.finite(runs["target_top1"]) if "target_top1" in runs else []
    return targets[0] if targets else None


def cell_text(seeds: pd.DataFrame) -> str:
    """One cell of the table: mean ± CI of the seeds that reached the target, ``(k/n)`` when
    only some did, ``not reached`` when none did, the outcome when none finished."""
    ok = seeds[seeds["status"] == STATUS_OK]
    if ok.empty:
        return T.outcome_cell(list(seeds["status"]), None, str)
    ok = ok[~ok["extrapolated"].map(T.as_bool)]
    if ok.empty:
        return PARTIAL
    reached = ok[ok["time_to_target_s"].map(lambda v: not T.is_missing(v))]
    if reached.empty:
        return NOT_REACHED
    text = stats.with_ci(stats.summarize(reached["time_to_target_s"]), T.fmt_seconds)
    if len(reached) < len(ok):
        text += f" ({len(reached)}/{len(ok)})"
    return text


def time_to_accuracy_markdown(runs: pd.DataFrame) -> T.Document:
    """Seconds to the target top-1, model x precision, one table per dataset, epochs and setup."""
    target = target_of(runs)
    title = "Time to accuracy"
    if target is None:
        return T.document(title, _NO_TARGET, [], empty=no_matrix(runs) if runs.empty else "")
    note = (
        f"Seconds of training and validation (epoch wall times summed) until validation top-1 "
        f"first reached {target:g} % (`target_top1`; `time_to_target_s` and `target_epoch` in "
        f"runs.csv), {T.SEEDS_TEXT}. {NOT_REACHED_NOTE} Beside the time table: a precision that "
        "is faster per epoch but learns worse shows it here."
    )
    sections, counts = [], []
    for heading, table in matrix_groups(runs):
        labels = T.row_labels(table, row_keys(runs))
        precisions = T.sort_precisions(table["precision"])
        rows, partial, some, not_ok = [], False, False, False
        for label in labels.unique():
            row = [label]
            for precision in precisions:
                seeds = table[(labels == label) & (table["precision"] == precision)]
                text = cell_text(seeds)
                reached = seeds["time_to_target_s"].map(lambda v: not T.is_missing(v)).sum()
                counts += [int(reached)] if reached else []
                partial |= text == PARTIAL
                some |= text.endswith(")")
                not_ok |= text in T.OUTCOME_TEXT.values()
                row.append(text)
            rows.append(row)
        marked = ((PARTIAL_NOTE, partial), (SOME_NOTE, some), (LEGEND, not_ok))
        notes = [line for line, shown in marked if shown]
        body = T.table(["model", *precisions], rows, "l" + "r" * len(precisions))
        sections += T.section(heading, body, notes=notes, level=2)
    note = note.replace(T.SEEDS_TEXT, T.seeds_note(counts))
    return T.document(title, note, sections, empty=no_matrix(runs))
