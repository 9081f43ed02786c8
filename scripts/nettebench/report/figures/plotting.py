"""Drawing helpers every figure uses: the look, colours, panels, bars, their marks and notes,
saving as PNG and a deterministic SVG."""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from nettebench.report import caveats as C
from nettebench.report import format as T
from nettebench.report import stats

FORMATS = ("png", "svg")
SVG_SALT = {"svg.hashsalt": "nettebench"}  # stable element ids, whatever the caller's style
DPI = 150
MARK_COLOR = "firebrick"  # caveat marks over bars (interference, impossible)
MARK_GID = "nettebench-mark"  # a bar's mark (its table's), kept inside the axes by fit_marks
NOTE_COLOR = "0.2"
NOTE_SIZE = 6.5  # points: the footnote that explains a figure's marks
CHARS_PER_INCH = 18  # of the footnote at NOTE_SIZE, to wrap it to the figure's width
REFERENCE_COLOR = "0.15"
CEILING_EDGE = "0.1"
CEILING_LABEL = "compute ceiling"  # legend entry of the dashed outline over a throughput bar
CEILING_LOOK = {"fill": False, "edgecolor": CEILING_EDGE, "linestyle": "--"}  # bar and legend
CPU_HATCH = "//"


def style() -> dict[str, Any]:
    """seaborn's whitegrid look plus what makes the SVG bytes reproducible."""
    return {
        **sns.axes_style("whitegrid"),
        **sns.plotting_context("notebook", font_scale=0.8),
        **SVG_SALT,
        "svg.fonttype": "path",  # glyphs as paths: no dependence on installed fonts
        "figure.dpi": DPI,
    }


def precision_colors(names: Sequence[str]) -> dict[str, Any]:
    """One colour per precision, fixed by its place in the display order, in every figure."""
    palette = sns.color_palette("colorblind", 10)
    ranked = T.sort_precisions([*T.PRECISION_ORDER, *names])
    return {name: palette[i % len(palette)] for i, name in enumerate(ranked)}


def new_figure(panels: int, *, panel_width: float, panel_height: float = 3.6) -> tuple:
    """A figure with ``panels`` axes, two per row at most."""
    panels = max(panels, 1)
    ncols = min(panels, 2)
    nrows = math.ceil(panels / ncols)
    fig = Figure(figsize=(panel_width * ncols, panel_height * nrows + 0.4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[panels:]:
        ax.set_visible(False)
    return fig, list(axes[:panels])


def empty_figure(title: str, text: str) -> Figure:
    """One panel titled ``title`` saying ``text`` (why there is nothing to draw)."""
    fig, (ax,) = new_figure(1, panel_width=6.0)
    look = {"ha": "center", "va": "center", "fontsize": 11, "color": "0.35", "wrap": True}
    ax.text(0.5, 0.5, text, transform=ax.transAxes, **look)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title)
    return fig


def bar_panels(panels: list[tuple], colors: dict[str, Any], ylabel: str, **options) -> tuple:
    """A figure of :func:`grouped_bars` panels, one per (title, bars, hues), each as wide as
    the widest needs; ``options`` go to every panel. The figure and its axes."""
    widths = [0.32 * bars["label"].nunique() * max(len(hues), 1) for _, bars, hues in panels]
    fig, axes = new_figure(len(panels), panel_width=max(5.0, max(widths) + 2.0))
    for ax, (title, bars, hues) in zip(axes, panels, strict=True):
        categories = list(bars["label"].unique())
        grouped_bars(ax, bars, categories=categories, hues=hues, colors=colors, **options)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(ylabel)
    return fig, axes


def grouped_bars(
    ax,
    frame: pd.DataFrame,
    *,
    categories: Sequence[str],
    hues: Sequence[str],
    colors: dict[str, Any],
    hatched: Sequence[str] = (),
    outcomes: dict[str, str] | None = None,
    reference: tuple[float, str] | None = None,
) -> None:
    """Bars of the mean ``value`` per (``label``, ``hue``) of ``frame`` (columns label, hue,
    status, value: one row per seed), whiskers as :func:`own_interval`, standing on zero.

    A (label, hue) with rows but none finished gets its outcome (``OOM``, ``n/a``, or the text
    ``outcomes`` gives a status of its own, such as ``not reached``) in the bar's place. Optional
    columns: ``outline`` (the compute ceiling, its mean over the seeds that have one) drawn as a
    dashed unfilled bar with a legend entry; ``mark``, the bar's mark as its table writes it,
    above the whisker (:func:`mark_bar`), a bar marked ``✗`` withheld with its mark in its
    place. ``reference`` (y, legend label): a dashed line across the panel at y.
    """
    width = 0.8 / max(len(hues), 1)
    looks = {h: {"hatch": CPU_HATCH, "edgecolor": "0.2"} for h in hatched}  # CPU baselines
    outlined = False
    for j, hue in enumerate(hues):
        offsets = np.arange(len(categories)) - 0.4 + width * (j + 0.5)
        for i, category in enumerate(categories):
            seeds = frame[(frame["label"] == category) & (frame["hue"] == hue)]
            if seeds.empty:
                continue
            outline = seeds["outline"].dropna() if "outline" in seeds else pd.Series(dtype=float)
            if len(outline):
                outlined = True
                # over the filled bar (zorder), so it shows where the bar is taller
                ax.bar(offsets[i], outline.mean(), width, **CEILING_LOOK, linewidth=0.9, zorder=3)
            values = seeds.loc[seeds["status"] == "ok", "value"].dropna()
            marks = "".join(dict.fromkeys(seeds["mark"].dropna())) if "mark" in seeds else ""
            if marks == C.IMPOSSIBLE_MARK:  # withheld, as in its table
                in_place(ax, offsets[i], marks, color=MARK_COLOR, fontsize=9)
                continue
            if not len(values):
                statuses = list(seeds["status"])
                text = T.outcome_cell(statuses, None, str) or next(
                    (t for s, t in (outcomes or {}).items() if s in statuses), ""
                )
                if text:
                    in_place(ax, offsets[i], text)
                continue
            summary = stats.summarize(values)
            whisker = own_interval(seeds, summary)
            ax.bar(
                offsets[i],
                summary.mean,
                width,
                yerr=whisker,
                capsize=2,
                color=colors[hue],
                linewidth=0.6,
                error_kw={"elinewidth": 0.8, "ecolor": "0.2"},
                **looks.get(hue, {"edgecolor": "white"}),
            )
            if marks:  # over the whisker or the ceiling, whichever is higher
                top = summary.mean + (whisker[1][0] if whisker is not None else 0.0)
                mark_bar(ax, offsets[i], max(top, outline.mean() if len(outline) else 0.0), marks)
    ax.set_xticks(range(len(categories)), categories, rotation=20, ha="right")
    ax.set_xlim(-0.6, len(categories) - 0.4)
    ax.set_ylim(bottom=0)
    handles = [
        Patch(facecolor=colors[h], label=h, **looks.get(h, {"edgecolor": "white"})) for h in hues
    ]
    if outlined:
        handles.append(Patch(**CEILING_LOOK, label=CEILING_LABEL))
    if reference is not None:
        handles.append(reference_line(ax, *reference))
    side_legend(ax, handles)


def side_legend(ax, handles: list, title: str | None = "precision") -> None:
    """The panel's legend beside it, never over a bar or a curve."""
    look = {"fontsize": 7, "title_fontsize": 8, "loc": "upper left", "bbox_to_anchor": (1.01, 1.0)}
    ax.legend(handles=handles, title=title, **look)


def in_place(ax, x: float, text: str, *, color: str = "0.2", fontsize: float = 7) -> None:
    """``text`` standing where a bar at ``x`` would be (``OOM``, ``n/a``, ``✗``, ...)."""
    where = {"transform": ax.get_xaxis_transform()}  # x in data, y in axes fraction
    look = {"ha": "center", "va": "bottom", "fontsize": fontsize, "color": color}
    ax.text(x, 0.02, text, **where, rotation=90 if len(text) > 2 else 0, **look)


def mark_bar(ax, x: float, top: float, text: str) -> None:
    """A bar's mark just above ``top`` (its whisker's end), kept in the panel by
    :func:`fit_marks` (turned upright where wider than its bar, the axis raised to hold it)."""
    place = {"xytext": (0, 2), "textcoords": "offset points", "ha": "center", "va": "bottom"}
    look = {"fontsize": 8, "fontweight": "bold", "color": MARK_COLOR, "gid": MARK_GID}
    ax.annotate(text, (x, top), **place, **look)


def reference_line(ax, y: float, label: str) -> Line2D:
    """A dashed line across the panel at ``y`` (1 on a ratio's axis), named ``label`` in the
    legend, the axis raised to hold it with room to spare; the line."""
    line = ax.axhline(y, color=REFERENCE_COLOR, linewidth=1.0, linestyle="--", zorder=3)
    line.set_label(label)
    low, high = ax.get_ylim()
    if ax.get_yscale() == "linear" and high < 1.1 * y:
        ax.set_ylim(low, 1.1 * y)
    return line


def fit_marks(fig: Figure, *, pad: float = 3.0) -> None:
    """Keep every bar mark (:func:`mark_bar`) clear of its neighbours and inside its panel: a
    mark wider than its bar stands upright, then each y axis (linear or log) is raised until its
    highest mark ends ``pad`` pixels below the top, measured on the laid-out figure until the
    layout settles (a raised axis can change it a little)."""
    marked = [(ax, t) for ax in fig.axes for t in ax.texts if t.get_gid() == MARK_GID]
    if not marked:
        return
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    for ax, text in marked:
        if text.get_window_extent(renderer).width > _bar_pixels(ax, text.xy[0]):
            text.set_rotation(90)
    for _ in range(3):
        fig.draw_without_rendering()
        raised = False
        for ax in dict.fromkeys(ax for ax, _ in marked):
            scale = ax.yaxis.get_transform()
            low, high = ax.get_ylim()
            low_s = scale.transform([low])[0]
            height = ax.bbox.height
            needed = high
            for text in (t for a, t in marked if a is ax):
                anchor = ax.transData.transform(text.xy)[1]
                above = text.get_window_extent(renderer).y1 - anchor + pad
                share = max(0.2, (height - above) / height)
                value_s = scale.transform([text.xy[1]])[0]
                top_s = low_s + (value_s - low_s) / share
                needed = max(needed, scale.inverted().transform([top_s])[0])
            if needed > high * (1 + 1e-6):
                ax.set_ylim(low, needed)
                raised = True
        if not raised:
            return


def _bar_pixels(ax, x: float) -> float:
    """The width on screen of the bar centred at ``x`` (infinite where none is)."""
    for patch in ax.patches:
        if hasattr(patch, "get_width") and math.isclose(
            patch.get_x() + patch.get_width() / 2, x, abs_tol=1e-9
        ):
            left, right = patch.get_x(), patch.get_x() + patch.get_width()
            (x0, _), (x1, _) = ax.transData.transform([(left, 0), (right, 0)])
            return abs(x1 - x0)
    return math.inf


def finish(fig: Figure, notes: Iterable[str] = ()) -> Figure:
    """Write ``notes`` (each once, in order: what the figure's marks mean, as its tables say
    it) under the figure's panels, wrapped to its width, then fit every mark (:func:`fit_marks`)."""
    notes = list(dict.fromkeys(n for n in notes if n))
    if notes:
        width = max(40, int(fig.get_figwidth() * CHARS_PER_INCH))
        text = "\n".join(textwrap.fill(note, width, break_on_hyphens=False) for note in notes)
        lines = text.count("\n") + 1  # the figure grows by the note: its panels keep their size
        fig.set_figheight(fig.get_figheight() + lines * NOTE_SIZE * 1.25 / 72 + 0.1)
        look = {"ha": "left", "multialignment": "left", "fontsize": NOTE_SIZE, "color": NOTE_COLOR}
        fig.supxlabel(text, x=0.01, **look)
    fit_marks(fig)
    return fig


def own_interval(seeds: pd.DataFrame, summary) -> Any:
    """The whisker: the 95 % CI over seeds (:func:`nettebench.report.stats.summarize`), or with
    one seed its own interval (columns ``low``/``high``), never below zero; None without one."""
    if summary.n != 1 or "low" not in seeds:
        whisker = summary.half_width or 0.0  # clipped at zero: an axis never runs below it
        return [[min(whisker, max(summary.mean, 0.0))], [whisker]]
    ok = seeds[seeds["status"] == "ok"]
    low, high = ok["low"].iloc[0], ok["high"].iloc[0]
    if pd.isna(low) or pd.isna(high):
        return None
    return [[max(summary.mean - low, 0.0)], [max(high - summary.mean, 0.0)]]


def save(fig: Figure, out_dir: str | os.PathLike, name: str) -> list[Path]:
    """Write ``fig`` as ``<name>.png`` and ``<name>.svg`` (the SVG without a date, its ids
    from a fixed salt)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    with mpl.rc_context(SVG_SALT):
        for fmt in FORMATS:
            path = out / f"{name}.{fmt}"
            metadata = {"Date": None} if fmt == "svg" else None
            fig.savefig(path, format=fmt, dpi=DPI, metadata=metadata)
            paths.append(path)
    return paths
