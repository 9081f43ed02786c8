"""Validation top-1 and top-5 by epoch, like the study's ResNet50 accuracy table."""

from __future__ import annotations

import pandas as pd

from nettebench.report import format as T
from nettebench.report import stats
from nettebench.report.frames.runs import cell_keys
from nettebench.report.grids import LEGEND, device_title, groups, no_matrix
from nettebench.report.setups import title_suffix
from nettebench.vocabulary.record_keys import STATUS_OK


def accuracy_markdown(runs: pd.DataFrame, epochs: pd.DataFrame) -> T.Document:
    """Validation top-1/top-5 after every epoch, one table per model configuration."""
    matrix = runs[runs["kind"] == "matrix"]
    # Grouped by setup, not by the machine label alone (two machines' copies of one cell, even
    # unlabelled, are two tables); epochs are matched to cells by their directory (`path`).
    keys = [k for k in cell_keys(runs) if k not in ("seed", "precision", "device", "machine")]
    shown = ("dataset", "model", "batch_size", "epochs")
    extra = T.varying_keys(matrix, [k for k in keys if k not in shown], within=shown)
    epochs = epochs[epochs["kind"] == "matrix"] if len(epochs) else epochs
    sections, counts = [], []
    for key, table in groups(matrix, [*keys, "device_type", "setup"]):
        params = dict(zip([*keys, "device_type", "setup"], key, strict=True))
        title = ", ".join(
            [
                str(params["model"]),
                f"batch {T.fmt_value(params['batch_size'])}",
                *(f"{k} {T.fmt_value(params[k])}" for k in extra),
                str(params["dataset"]),
                f"{T.fmt_value(params['epochs'])} epochs",
                device_title(table),
            ]
        ) + title_suffix(table, matrix)
        ok = table[table["status"] == STATUS_OK]
        ep = epochs[epochs["path"].isin(ok["path"])] if len(epochs) else epochs
        n_epochs = int(ep["epoch"].max()) if len(ep) else 0
        rows, notes = [], []
        for precision in T.sort_precisions(table["precision"]):
            pe = ep[ep["precision"] == precision] if len(ep) else ep
            seeds = table[table["precision"] == precision]
            if pe.empty:
                outcome = T.outcome_cell(list(seeds["status"]), None, str)
                notes.append(f"{precision} ({outcome or 'no epochs recorded'})")
                continue
            counts.append(pe["path"].nunique())
            by_epoch = dict(list(pe.groupby("epoch")))
            for column, name in (("val_top1", "Top1"), ("val_top5", "Top5")):
                rows.append(
                    [f"{precision} {name}"]
                    + [
                        stats.with_ci(stats.summarize(by_epoch[e][column]), T.fmt_accuracy)
                        if e in by_epoch
                        else ""
                        for e in range(1, n_epochs + 1)
                    ]
                )
        body = (
            T.table(["", *map(str, range(1, n_epochs + 1))], rows, "l" + "r" * n_epochs)
            if rows
            else T.Paragraph("No cell of this configuration finished.")
        )
        if notes:
            notes = ["Not shown: " + "; ".join(notes) + ". " + LEGEND]
        sections += T.section(title, body, notes=notes, level=2)
    note = (
        "Validation accuracy (%) after each epoch (columns = epoch), top-1 and top-5, "
        f"{T.seeds_note(counts)}."
    )
    return T.document("Accuracy by epoch", note, sections, empty=no_matrix(runs))
