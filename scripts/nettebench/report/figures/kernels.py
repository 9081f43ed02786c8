"""The category figure: where each profiled cell's training step spends its time, from
``kernel_categories.csv`` (:mod:`nettebench.report.kernel_figure`, the command).

One panel per dataset and time source, one stacked bar of milliseconds per step per profiled
cell, one colour per category: side by side, O0 and O3 of a model show the convolution and GEMM
segments shrink on tensor cores while elementwise work and copies (casts) do not. On a CPU-only
run the bars are CPU operators' self time, which the panel title says.
"""

from __future__ import annotations

import pandas as pd
import seaborn as sns
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from nettebench.profiling import SOURCE_CPU, SOURCE_GPU
from nettebench.profiling.categories import CATEGORIES

_TITLES = {
    SOURCE_GPU: "GPU time per training step, by kernel category",
    SOURCE_CPU: "CPU operator self time per training step, by category (no GPU)",
}


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
    palette = sns.color_palette("colorblind", len(CATEGORIES))  # one fixed colour a category
    colors = dict(zip(CATEGORIES, palette, strict=True))
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
            look = {"color": colors[category], "label": category, "edgecolor": "white"}
            ax.barh(table.index, table[category], left=left, **look, linewidth=0.5)
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
