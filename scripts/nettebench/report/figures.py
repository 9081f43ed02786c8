"""Draw the study's figures from the aggregate tables (runs.csv and epochs.csv) only.

Figures read nothing but the two CSVs that :mod:`nettebench.report.aggregate` writes, so a figure
can always be redrawn, restyled or checked without the cell directories. Each figure is written as
PNG (for the report and quick looks) and SVG (for papers), under fixed names:

- ``time_by_model_precision``: seconds for all epochs by model, one bar per precision;
- ``speedup_over_O0``: how many times faster each precision is than O0 (pure fp32);
- ``accuracy_curves``: validation top-1 (solid) and top-5 (dashed) after each epoch;
- ``throughput``: steady-state training img/s, CPU baselines beside the matrix cells, and the
  compute ceiling (img/s with no input pipeline) as a dashed outline over a bar where measured;
- ``time_to_accuracy``: seconds until validation top-1 first reached the config's
  ``target_top1``, one bar per precision, ``not reached`` where no seed got there.

Every figure draws one panel per setup (machine label and environment,
:mod:`nettebench.report.setups`), so two machines are never averaged as seeds; bars are means
over seeds with their 95 % confidence interval as whiskers. A figure says what its table says:
over each bar the marks its table gives that cell (``~``, ``†``, ``‡``, ``§``, ...), in a bar's
place the table's word for it (``OOM``, ``✗``, ``not reached``), and under the panels the
table's own notes for every mark drawn (:func:`nettebench.report.plotting.finish`), kept clear
of the bars, their whiskers and each other.

A partial study must never break the workflow, so every figure renders something: an empty or
missing input gives a panel saying "no data" instead of an exception. Cells that did not run are
marked ``OOM`` / ``n/a`` where their bar would be: a bar that is missing for a reason should not
look like a bar nobody asked for.

SVGs are deterministic (fixed ``svg.hashsalt``, no date), so rerunning the workflow does not churn
files under version control. Figures are drawn on :class:`matplotlib.figure.Figure` objects with
the Agg canvas directly (helpers: :mod:`nettebench.report.plotting`), never through pyplot's
global state, so importing this module does not
change the backend of whoever imports it. No torch.

Usage::

    python -m nettebench report figures --runs results/tables/runs.csv \\
        --epochs results/tables/epochs.csv --out-dir results/figures
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from nettebench.records.spread import INTERVAL_NAME
from nettebench.report import facets as F
from nettebench.report import format as T
from nettebench.report import stats
from nettebench.report.energy_figure import plot_energy
from nettebench.report.frames.runs import EPOCH_ID_COLUMNS
from nettebench.report.grids import LEGEND, row_keys
from nettebench.report.plotting import (
    bar_width,
    empty_figure,
    finish,
    grouped_bars,
    new_figure,
    precision_colors,
    read_table,
    save,
    style,
)
from nettebench.report.scaling_figure import plot_scaling
from nettebench.report.setups import SETUP_COLUMNS
from nettebench.report.speedup_figure import plot_speedup
from nettebench.report.tables import time_to_accuracy as tta
from nettebench.report.tables.time import time_grids
from nettebench.vocabulary import commands, outputs

FIGURE_NAMES = outputs.FIGURE_NAMES


# Keys the bar figures put on the x axis, the hue or the facet title rather than in row labels
# (max_steps is how a cell was timed, not what was timed).
# Columns the figures use; a CSV without them (an empty study) gets them as all-missing.
_RUN_COLUMNS = (
    "dataset",
    "model",
    "precision",
    "batch_size",
    "epochs",
    "seed",
    "kind",
    "status",
    "cell_id",
    "device_type",
    "device_name",
    "extrapolated",
    "time_for_epochs_s",
    "epoch_s_median",
    "train_img_s",
    "ceiling_status",
    "ceiling_img_s",
    # caveats (report.caveats): marks over a bar whose number cannot be taken at face value
    "interference",
    "ceiling_interference",
    "above_ceiling",
    "setup",
    "target_top1",
    "time_to_target_s",
    "path",
    "j_per_img",  # the energy figure (report.energy_figure)
    "j_per_img_low",
    "j_per_img_high",
    *SETUP_COLUMNS,
)


_EPOCH_COLUMNS = (*EPOCH_ID_COLUMNS, "epoch", "val_top1", "val_top5")
NOT_REACHED = tta.NOT_REACHED  # what the time-to-accuracy figure writes where no seed got there


def plot_time(runs: pd.DataFrame) -> Figure:
    """Seconds for all epochs of each matrix cell, by model, one bar per precision; over each
    bar its time table cell's marks (``~`` extrapolated, ``†``, ``‡``), under the panels the
    table's footnotes for them."""
    title = "Time for all epochs by model and precision"
    facets = F.matrix_facets(runs)
    if not facets:
        return empty_figure(title, "no data: no matrix cells in runs.csv")
    # the time table's grids (tables.time): its marks and footnotes, cell for cell
    grids = time_grids(runs)
    marks = F.grid_marks(facets, grids)
    fig, panels = F.precision_bar_panels(runs, facets, "time_for_epochs_s", marks=marks)
    for ax, _frame in panels:
        ax.set_ylabel(f"seconds (mean ± {stats.LEVEL} CI over seeds)")
    fig.suptitle(title)
    return finish(fig, F.grid_notes(grids))


def _cell_labels(runs: pd.DataFrame | None) -> tuple[dict, set]:
    """Per cell directory (``path``): its row label as the tables write it (every parameter
    that varies: loader, environment, batch, ...), and the directories of extrapolated cells
    (``~``: partial epochs, their accuracy from ``max_steps`` steps an epoch)."""
    if runs is None or runs.empty or "path" not in runs:
        return {}, set()
    matrix = runs[runs["kind"] == "matrix"]
    labels = T.row_labels(matrix, row_keys(runs)) if len(matrix) else pd.Series(dtype=object)
    partial = set(matrix.loc[matrix["extrapolated"].map(T.as_bool), "path"].map(str))
    return dict(zip(matrix["path"].map(str), labels, strict=True)), partial


def plot_accuracy(epochs: pd.DataFrame, runs: pd.DataFrame | None = None) -> Figure:
    """Validation top-1 (solid) and top-5 (dashed) against epoch, one panel per row of the
    accuracy table: cells that differ in any parameter (``runs``: the loader, the environment,
    ...) are never averaged, only their seeds; a precision whose cells ran partial epochs is
    marked ``~`` in the legend, as the tables mark it."""
    title = "Validation accuracy by epoch"
    matrix = epochs[(epochs["kind"] == "matrix") & epochs["epoch"].notna()]
    if matrix.empty:
        return empty_figure(title, "no data: no epochs of matrix cells in epochs.csv")
    # One record per directory (two machines' copies of a cell share a cell_id); an epochs.csv
    # from before `path` was a column falls back to the cell_id.
    key = "path" if matrix["path"].notna().any() else "cell_id"
    cells = matrix.drop_duplicates(key)
    labels = T.row_labels(cells, ["batch_size", "epochs"])
    by_path, partial = _cell_labels(runs) if key == "path" else ({}, set())
    labels = [by_path.get(str(p), label) for p, label in zip(cells[key], labels, strict=True)]
    matrix = matrix.assign(
        label=matrix[key].map(dict(zip(cells[key], labels, strict=True))),
        partial=matrix[key].map(str).isin(partial),
    )
    several_datasets = matrix["dataset"].nunique() > 1
    several_setups = matrix["setup"].nunique() > 1
    panels = list(matrix.groupby(["dataset", "setup", "label"], sort=False, dropna=False))
    colors = precision_colors(matrix["precision"].dropna().astype(str))
    fig, axes = new_figure(len(panels), panel_width=5.0)
    for ax, ((dataset, setup, label), frame) in zip(axes, panels, strict=True):
        precisions = T.sort_precisions(frame["precision"])
        for precision in precisions:
            per_epoch = frame[frame["precision"] == precision].groupby("epoch")
            for column, dashes in (("val_top1", "-"), ("val_top5", "--")):
                band = per_epoch[column].agg(["mean", "min", "max"]).dropna()
                if band.empty:
                    continue
                ax.plot(
                    band.index,
                    band["mean"],
                    dashes,
                    color=colors[precision],
                    marker="o",
                    markersize=3,
                    linewidth=1.4 if dashes == "-" else 1.0,
                )
                ax.fill_between(
                    band.index,
                    band["min"],
                    band["max"],
                    color=colors[precision],
                    alpha=0.15,
                    linewidth=0,
                )
        lines = [str(label)]
        lines += [str(dataset)] if several_datasets else []
        lines += [str(setup)] if several_setups else []
        ax.set_title("\n".join(lines), fontsize=9)
        ax.set_xlabel("epoch")
        ax.set_ylabel("validation accuracy (%)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        handles = [
            Line2D([], [], color=colors[p], label=_partial_label(p, frame)) for p in precisions
        ]
        handles += [
            Line2D([], [], color="0.3", linestyle="-", label="top-1"),
            Line2D([], [], color="0.3", linestyle="--", label="top-5"),
        ]
        # beside the panel, never over a curve or its band
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"{title}\n(mean over seeds, band = min-max)")
    return finish(fig, [tta.PARTIAL_NOTE] if matrix["partial"].any() else [])


def _partial_label(precision: str, frame: pd.DataFrame) -> str:
    """``bf16 (partial epochs)`` where that precision's cells in the panel ran ``max_steps``
    steps an epoch (the time-to-accuracy table's words; ``~`` is an extrapolated time)."""
    partial = frame.loc[frame["precision"] == precision, "partial"].any()
    return f"{precision} ({tta.PARTIAL})" if partial else precision


def plot_throughput(runs: pd.DataFrame) -> Figure:
    """Training img/s by model and precision; CPU baselines as grey hatched bars beside them.

    Where a cell has a compute ceiling (``ceiling_img_s``: img/s with the batch already on the
    device), a dashed outline shows it over the cell's bar, so the gap is the input pipeline's.
    """
    title = "Training throughput (steady state, warm-up excluded)"
    wanted = runs[runs["kind"].isin(["matrix", "cpu_baseline"])]
    if wanted.empty:
        return empty_figure(title, "no data: no cells in runs.csv")
    wanted = wanted.assign(
        hue=np.where(
            wanted["kind"] == "cpu_baseline",
            "CPU " + wanted["precision"].astype(str),
            wanted["precision"].astype(str),
        )
    )
    label_keys = row_keys(runs)
    cpu_hues = sorted(set(wanted.loc[wanted["kind"] == "cpu_baseline", "hue"]))
    colors = precision_colors(wanted.loc[wanted["kind"] == "matrix", "precision"].astype(str))
    greys = np.linspace(0.8, 0.45, max(len(cpu_hues), 2))  # light greys, so the hatch shows
    colors.update({hue: str(round(grey, 2)) for hue, grey in zip(cpu_hues, greys, strict=False)})

    facets = []
    matrix = wanted[wanted["kind"] == "matrix"]
    for dataset, frame in wanted.groupby("dataset", sort=False, dropna=False):
        # One panel per device type and setup the dataset's matrix ran on, each with the CPU
        # baselines of the same run (machine label).
        is_cpu = frame["kind"] == "cpu_baseline"
        setups = frame.loc[~is_cpu, ["device_type", "setup"]].drop_duplicates()
        for device_type, setup in list(setups.itertuples(index=False)) or [(None, None)]:
            on_device = (~is_cpu) & F.equal(frame["device_type"], device_type)
            on_device &= F.equal(frame["setup"], setup)
            if on_device.any():
                machine = frame.loc[on_device, "machine"].iloc[0]
                part = frame[(is_cpu & F.equal(frame["machine"], machine)) | on_device]
            else:
                part = frame[is_cpu]
            part = part.sort_values(["model", "batch_size"], kind="stable")
            part = part.assign(label=T.row_labels(part, label_keys))
            facets.append((F.facet_title(dataset, None, part[~is_cpu[part.index]], matrix), part))
    widest = max(bar_width(f["label"].nunique(), f["hue"].nunique()) for _, f in facets)
    fig, axes = new_figure(len(facets), panel_width=widest)
    notes = []
    for ax, (facet_title, frame) in zip(axes, facets, strict=True):
        matrix_hues = T.sort_precisions(frame.loc[frame["kind"] == "matrix", "precision"])
        hues = matrix_hues + sorted(set(frame["hue"]) - set(matrix_hues))
        bars = F.bar_frame(
            frame,
            "train_img_s",
            hue="hue",
            outline="ceiling_img_s",
            interval=("train_img_s_low", "train_img_s_high"),
        )
        if "mark" in bars:
            notes += F.caveat_notes(frame, bars["mark"], hue="hue")
        grouped_bars(
            ax,
            bars,
            categories=list(frame["label"].unique()),
            hues=hues,
            colors=colors,
            hatched=cpu_hues,
        )
        ok = pd.to_numeric(frame.loc[frame["status"] == "ok", "train_img_s"], errors="coerce")
        if "ceiling_img_s" in frame:  # the log scale decision and limits include the ceilings
            ceilings = pd.to_numeric(frame["ceiling_img_s"], errors="coerce").dropna()
            ok = pd.Series([*ok, *ceilings], dtype=float)
        ok = ok[ok > 0]
        if len(ok) and ok.max() / ok.min() > 30:  # CPU next to GPU: keep both readable
            ax.set_yscale("log")
            ax.set_ylim(bottom=ok.min() / 3)  # bars start at the axis, so the smallest shows
        scale = " (log scale)" if ax.get_yscale() == "log" else ""
        ax.set_ylabel(f"training images / s{scale}")
        ax.set_title(facet_title, fontsize=9)
        if {t.get_text() for t in ax.texts} & set(T.OUTCOME_TEXT.values()):
            notes.append(LEGEND)  # an outcome written in a bar's place
    fig.suptitle(title)
    return finish(fig, [THROUGHPUT_BARS, *notes])


# What a throughput bar and its whisker are, as the throughput table says it of its cells.
THROUGHPUT_BARS = (
    f"Bar: the mean over seeds, whisker its {stats.LEVEL} confidence interval; a cell of one "
    f"seed: its median step rate, whisker the {INTERVAL_NAME} over its steps."
)


def plot_time_to_accuracy(runs: pd.DataFrame) -> Figure:
    """Seconds until validation top-1 first reached ``target_top1``, by model and precision."""
    targets = pd.to_numeric(runs["target_top1"], errors="coerce").dropna()
    title = "Time to accuracy"
    if targets.empty:
        return empty_figure(title, "no target: set target_top1 in the config")
    target = float(targets.iloc[0])
    title = f"Time to {target:g} % validation top-1"
    facets = F.matrix_facets(runs)
    if not facets:
        return empty_figure(title, "no data: no matrix cells in runs.csv")
    # Each bar as its table cell (tables.time_to_accuracy.cell_text): the mean over the seeds
    # that reached the target, "(k/n)" over it where only some did; else the cell's text in
    # the bar's place (not reached, partial epochs, OOM, n/a).
    texts = [_target_texts(frame) for _, frame in facets]
    reached = pd.to_numeric(runs["time_to_target_s"], errors="coerce").notna()
    reached &= (runs["status"] == "ok") & ~runs["extrapolated"].map(T.as_bool)
    facets = [
        (t, f.assign(target_status=_target_status(text, reached[f.index])))
        for (t, f), text in zip(facets, texts, strict=True)
    ]
    marks = [text.map(lambda t: t.rsplit(" ", 1)[1] if t.endswith(")") else "") for text in texts]
    fig, panels = F.precision_bar_panels(
        runs,
        facets,
        "time_to_target_s",
        status="target_status",
        outcomes={"not_reached": NOT_REACHED, "partial": tta.PARTIAL},
        marks=marks,
    )
    for ax, _frame in panels:
        ax.set_ylabel(f"seconds to target (mean ± {stats.LEVEL} CI)")
    fig.suptitle(title)
    shown = {t for text in texts for t in text}
    notes = [tta.PARTIAL_NOTE] if tta.PARTIAL in shown else []
    notes += [tta.NOT_REACHED_NOTE] if NOT_REACHED in shown else []
    notes += [tta.SOME_NOTE] if any(t.endswith(")") for t in shown) else []
    notes += [LEGEND] if shown & set(T.OUTCOME_TEXT.values()) else []
    return finish(fig, notes)


# The status a time-to-accuracy bar is drawn with, for a table cell without a number.
_TARGET_STATUS = {
    NOT_REACHED: "not_reached",
    tta.PARTIAL: "partial",
    **{text: status for status, text in T.OUTCOME_TEXT.items()},
}


def _target_status(texts: pd.Series, reached: pd.Series) -> pd.Series:
    """Per row: ok where its seed reached the target in a cell the table gives a number, else
    the status that writes the cell's text (:data:`_TARGET_STATUS`) in the bar's place."""
    numbered = np.where(reached, "ok", "not_reached")
    return pd.Series(
        [_TARGET_STATUS.get(t, n) for t, n in zip(texts, numbered, strict=True)],
        index=texts.index,
    )


def _target_texts(frame: pd.DataFrame) -> pd.Series:
    """On each row of a facet, its cell's text in the time-to-accuracy table."""
    found = pd.Series("", index=frame.index, dtype=object)
    for _, seeds in frame.groupby([frame["label"], frame["precision"].astype(str)], sort=False):
        found[seeds.index] = tta.cell_text(seeds)
    return found


def make_figures(
    runs_csv: str | os.PathLike, epochs_csv: str | os.PathLike, out_dir: str | os.PathLike
) -> dict[str, list[Path]]:
    """Draw all figures from the two aggregate CSVs; return {figure name: [png, svg]}."""
    runs = read_table(runs_csv, _RUN_COLUMNS)
    epochs = read_table(epochs_csv, _EPOCH_COLUMNS)
    written = {}
    with mpl.rc_context(style()):
        drawn = {
            "time_by_model_precision": plot_time(runs),
            "speedup_over_O0": plot_speedup(runs),
            "accuracy_curves": plot_accuracy(epochs, runs),
            "throughput": plot_throughput(runs),
            "time_to_accuracy": plot_time_to_accuracy(runs),
            "scaling": plot_scaling(runs),
            "energy_per_image": plot_energy(runs),
        }
        for name in FIGURE_NAMES:
            written[name] = save(drawn[name], out_dir, name)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = commands.Parser(
        prog="python -m nettebench report figures",
        description="Draw the study's figures from runs.csv and epochs.csv.",
    )
    parser.add_argument("--runs", required=True, type=Path, help="runs.csv from aggregate")
    parser.add_argument("--epochs", required=True, type=Path, help="epochs.csv from aggregate")
    parser.add_argument("--out-dir", required=True, type=Path, help="folder for the figures")
    return commands.run(parser, _figures, argv, errors=(FileNotFoundError,))


def _figures(args: argparse.Namespace) -> list[str]:
    mpl.use("Agg")  # a command-line run never needs a display, even where one exists
    written = make_figures(args.runs, args.epochs, args.out_dir)
    count = sum(len(paths) for paths in written.values())
    return [f"wrote {count} figure files to {args.out_dir}"]


if __name__ == "__main__":  # run as python -m nettebench report figures
    sys.exit(commands.moved(__spec__.name))
