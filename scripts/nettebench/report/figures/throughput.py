"""The throughput figure: steady-state training img/s, CPU baselines beside the matrix cells,
the compute ceiling (img/s with no input pipeline) as a dashed outline over a bar where
measured, and the throughput table's marks over each bar."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from nettebench.records.spread import INTERVAL_NAME
from nettebench.report import format as T
from nettebench.report import stats
from nettebench.report.figures import facets as F
from nettebench.report.figures.plotting import bar_panels, empty_figure, finish, precision_colors
from nettebench.report.grids import LEGEND, row_keys


def plot_throughput(runs: pd.DataFrame) -> Figure:
    """Training img/s by model and precision, CPU baselines as grey hatched bars beside them;
    the gap between a bar and its ceiling's outline is the input pipeline's."""
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

    panels, frames = [], []  # a panel's (title, bars, hues) and its rows
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
            matrix_hues = T.sort_precisions(part.loc[part["kind"] == "matrix", "precision"])
            hues = matrix_hues + sorted(set(part["hue"]) - set(matrix_hues))
            bars = F.bar_frame(
                part,
                "train_img_s",
                hue="hue",
                outline="ceiling_img_s",
                interval=("train_img_s_low", "train_img_s_high"),
            )
            panel_title = F.facet_title(dataset, None, part[~is_cpu[part.index]], matrix)
            panels.append((panel_title, bars, hues))
            frames.append(part)
    ylabel = "training images / s"
    fig, axes = bar_panels(panels, colors, ylabel, hatched=cpu_hues)
    notes = []
    for ax, frame, (_, bars, _) in zip(axes, frames, panels, strict=True):
        if "mark" in bars:
            notes += F.caveat_notes(frame, bars["mark"], hue="hue")
        ok = pd.to_numeric(frame.loc[frame["status"] == "ok", "train_img_s"], errors="coerce")
        if "ceiling_img_s" in frame:  # the log scale decision and limits include the ceilings
            ceilings = pd.to_numeric(frame["ceiling_img_s"], errors="coerce").dropna()
            ok = pd.Series([*ok, *ceilings], dtype=float)
        ok = ok[ok > 0]
        if len(ok) and ok.max() / ok.min() > 30:  # CPU next to GPU: keep both readable
            ax.set_yscale("log")
            ax.set_ylim(bottom=ok.min() / 3)  # bars start at the axis, so the smallest shows
            ax.set_ylabel(f"{ylabel} (log scale)")
        if {t.get_text() for t in ax.texts} & set(T.OUTCOME_TEXT.values()):
            notes.append(LEGEND)  # an outcome written in a bar's place
    fig.suptitle(title)
    return finish(fig, [THROUGHPUT_BARS, *notes])


# What a throughput bar and its whisker are, as the throughput table says it of its cells.
THROUGHPUT_BARS = (
    f"Bar: the mean over seeds, whisker its {stats.LEVEL} confidence interval; a cell of one "
    f"seed: its median step rate, whisker the {INTERVAL_NAME} over its steps."
)
