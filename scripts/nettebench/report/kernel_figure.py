"""The category figure: where each profiled cell's training step spends its time.

One panel per dataset and time source, one stacked bar per profiled cell (ordered by model, batch
size and precision), one colour per category, bar length = milliseconds per step. Set side by
side, O0 and O3 of the same model show why mixed precision helps: the convolution and GEMM
segments shrink on tensor cores while elementwise work and copies (casts) do not. On a CPU-only
run the bars are CPU operators' self time, which the panel title says.

Reads only ``kernel_categories.csv`` (``python -m nettebench report kernel-tables``); an empty
file gives a figure that says there is nothing profiled. Deterministic SVG, like the study's
other figures.

Usage::

    python -m nettebench report kernel-figure --categories results/tables/kernel_categories.csv \\
        --out-dir results/figures
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib as mpl
import pandas as pd
import seaborn as sns
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from nettebench.profiling import SOURCE_CPU, SOURCE_GPU
from nettebench.profiling.categories import CATEGORIES
from nettebench.report.plotting import save, style
from nettebench.vocabulary import commands
from nettebench.vocabulary.record_keys import STATUS_OK

FIGURE_NAME = "kernel_categories"
_TITLES = {
    SOURCE_GPU: "GPU time per training step, by kernel category",
    SOURCE_CPU: "CPU operator self time per training step, by category (no GPU)",
}


def category_colors() -> dict[str, tuple]:
    """One fixed colour per category, in every figure."""
    palette = sns.color_palette("colorblind", len(CATEGORIES))
    return dict(zip(CATEGORIES, palette, strict=True))


def read_categories(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: no such table (run python -m nettebench report kernel-tables)"
        )
    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        frame = pd.DataFrame()
    if frame.empty or "status" not in frame.columns:
        return pd.DataFrame(columns=["dataset", "source", "label", "category", "ms_per_step"])
    frame = frame[frame["status"] == STATUS_OK].copy()
    frame["ms_per_step"] = pd.to_numeric(frame["ms_per_step"], errors="coerce").fillna(0.0)
    return frame


def plot_categories(frame: pd.DataFrame) -> Figure:
    """Stacked horizontal bars of ms per step by category; one panel per dataset and source."""
    facets = list(frame.groupby(["dataset", "source"], sort=False)) if not frame.empty else []
    heights = [max(1.6, 0.45 * group["label"].nunique() + 1.2) for _, group in facets] or [2.0]
    fig = Figure(figsize=(9.0, sum(heights) + 0.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(heights), 1, squeeze=False, height_ratios=heights).ravel()
    if not facets:
        axes[0].text(0.5, 0.5, "No profiled cells", ha="center", va="center", color="0.35")
        axes[0].set_axis_off()
        fig.suptitle("Time per training step by kernel category")
        return fig
    colors = category_colors()
    for ax, ((dataset, source), group) in zip(axes, facets, strict=True):
        labels = list(dict.fromkeys(group["label"]))  # aggregate's order: model, batch, precision
        table = (
            group.pivot_table(
                index="label", columns="category", values="ms_per_step", aggfunc="sum"
            )
            .reindex(index=labels, columns=list(CATEGORIES))
            .fillna(0.0)
        )
        left = pd.Series(0.0, index=table.index)
        for category in CATEGORIES:
            ax.barh(
                table.index,
                table[category],
                left=left,
                color=colors[category],
                label=category,
                edgecolor="white",
                linewidth=0.5,
            )
            left += table[category]
        for y, total in enumerate(left):
            ax.text(total, y, f"  {total:,.1f} ms", va="center", fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, max(left.max(), 1e-9) * 1.18)
        ax.set_xlabel("ms per training step")
        ax.set_title(f"{dataset}: {_TITLES.get(source, source)}", fontsize=10)
    # One legend for the figure, above the panels, in rows of three: a single row of six
    # entries is wider than the figure (its last entries were cut), and with many profiles
    # a legend over the first panel took the space constrained layout needed, so it gave up.
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, ncols=3, loc="outside upper center", frameon=False, fontsize=8)
    return fig


def make_figure(categories_csv: str | Path, out_dir: str | Path) -> list[Path]:
    frame = read_categories(categories_csv)
    with mpl.rc_context(style()):
        return save(plot_categories(frame), out_dir, FIGURE_NAME)


def main(argv: Sequence[str] | None = None) -> int:
    parser = commands.Parser(
        prog="python -m nettebench report kernel-figure",
        description="Draw the kernel category figure from kernel_categories.csv.",
    )
    parser.add_argument("--categories", required=True, type=Path)
    parser.add_argument("--out-dir", required=True, type=Path)
    return commands.run(parser, _figure, argv, errors=(FileNotFoundError,))


def _figure(args: argparse.Namespace) -> list[str]:
    mpl.use("Agg")
    written = make_figure(args.categories, args.out_dir)
    return [f"wrote {', '.join(str(p) for p in written)}"]


if __name__ == "__main__":  # run as python -m nettebench report kernel-figure
    sys.exit(commands.moved(__spec__.name))
