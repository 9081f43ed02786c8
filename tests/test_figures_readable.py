"""Every figure stays readable from 1 to 50 cells, checked on the drawn artists.

A figure is readable when every text it draws (titles, tick labels, legend entries, notes)
lies inside the figure, its colours have a legend, a bar axis never runs below zero, and
matplotlib's constrained layout did apply (it warns and gives up when decorations do not fit,
and then labels are cut). Checked on fake studies of 1 and 20 cells, the kernel figure with 1,
5 and 20 profiles, and throughput bars whose error bars reach below zero or rise above their
own ceiling.
"""

from __future__ import annotations

import warnings

import matplotlib as mpl
import pandas as pd
import pytest
import record_factory as rf

from nettebench.profiling.categories import CATEGORIES
from nettebench.report import aggregate as agg
from nettebench.report import caveats as C
from nettebench.report import draw
from nettebench.report.figures import plotting
from nettebench.report.figures.accuracy import plot_accuracy
from nettebench.report.figures.kernels import plot_categories
from nettebench.report.figures.speedup import plot_speedup
from nettebench.report.figures.throughput import plot_throughput
from nettebench.report.figures.time import plot_time
from nettebench.report.figures.time_to_accuracy import plot_time_to_accuracy

MODELS = ("resnet18", "resnet34", "resnet50", "mobilenet_v3_small", "efficientnet_b0")
PRECISIONS = ("O0", "O1", "O2", "O3")


def drawn(plot, *args):
    """The figure ``plot`` draws, laid out as saving lays it out; a layout warning fails."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with mpl.rc_context(plotting.style()):
            fig = plot(*args)
            fig.canvas.draw()
    return fig


def _inside(extent, box) -> bool:
    return (
        extent.x0 >= box.x0 - 1
        and extent.y0 >= box.y0 - 1
        and extent.x1 <= box.x1 + 1
        and extent.y1 <= box.y1 + 1
    )


def _cut_texts(ax, renderer, box) -> list[str]:
    """The drawn texts of ``ax`` outside ``box``: title, axis labels, tick labels in view,
    legend entries, annotations."""
    texts = [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
    for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        low, high = min(low, high), max(low, high)
        for tick in axis.get_major_ticks() + axis.get_minor_ticks():
            if low <= tick.get_loc() <= high:
                texts.append(tick.label1)
    if ax.get_legend():
        texts += [ax.get_legend().get_title(), *ax.get_legend().get_texts()]
    return [
        t.get_text()
        for t in texts
        if t.get_visible()
        and t.get_text().strip()
        and not _inside(t.get_window_extent(renderer), box)
    ]


def assert_readable(fig, *, bars: bool = True):
    """Every drawn text inside the figure, a legend where colours mean something, bar axes
    from zero up."""
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    figure_texts = [*fig.texts, fig._suptitle, fig._supxlabel, fig._supylabel]
    figure_texts += [t for legend in fig.legends for t in legend.get_texts()]
    for text in figure_texts:
        if text is not None and text.get_visible() and text.get_text().strip():
            extent = text.get_window_extent(renderer)
            assert _inside(extent, box), f"{text.get_text()!r} is cut: {extent} outside {box}"
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        cut = _cut_texts(ax, renderer, box)
        assert not cut, f"panel {ax.get_title()!r}: {cut} cut at the figure's edge"
        if not ax.has_data():
            continue
        if len(ax.patches) > 1 or len(ax.lines) > 1:
            assert ax.get_legend() is not None or fig.legends, f"no legend: {ax.get_title()!r}"
        if bars and ax.patches and ax.get_yscale() == "linear":
            assert ax.get_ylim()[0] >= 0, f"{ax.get_title()!r}: y axis below zero"


def _study(root, cells):
    paths = []
    for index in range(cells):
        model = MODELS[index // len(PRECISIONS) % len(MODELS)]
        precision = PRECISIONS[index % len(PRECISIONS)]
        path = rf.make_cell(root, model=model, precision=precision, seed=0)
        rf.make_ceiling(path)
        paths.append(path)
    paths.append(rf.make_cell(root, kind="cpu_baseline", max_steps=5, **rf.CPU_BASELINE))
    tables = agg.aggregate(paths, root / "tables", target_top1=50.0)
    runs = draw.read_table(tables["runs"], draw.RUN_COLUMNS)
    epochs = draw.read_table(tables["epochs"], draw.EPOCH_COLUMNS)
    return runs, epochs


@pytest.fixture(scope="module", params=[1, 20], ids=lambda n: f"{n}-cells")
def study(request, tmp_path_factory):
    return _study(tmp_path_factory.mktemp(f"study{request.param}"), request.param)


@pytest.mark.parametrize(
    "plot",
    [plot_time, plot_speedup, plot_throughput, plot_time_to_accuracy],
    ids=lambda plot: plot.__name__,
)
def test_bar_figures_are_readable(study, plot):
    runs, _ = study
    assert_readable(drawn(plot, runs))


def test_accuracy_curves_are_readable(study):
    _, epochs = study
    assert_readable(drawn(plot_accuracy, epochs), bars=False)


def _categories(profiles: int) -> pd.DataFrame:
    rows = []
    for index in range(profiles):
        model = MODELS[index % len(MODELS)]
        label = f"{model} (machine site-{index % 2}) {PRECISIONS[index % 4]} · seed {index // 10}"
        for rank, category in enumerate(CATEGORIES):
            rows.append(
                {
                    "dataset": "imagenette2-320",
                    "source": "gpu",
                    "label": label,
                    "category": category,
                    "ms_per_step": 10.0 + rank + index,
                }
            )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("profiles", [1, 5, 20])
def test_the_kernel_figure_keeps_its_legend_and_labels(profiles):
    fig = drawn(plot_categories, _categories(profiles))
    assert_readable(fig)
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)
    entries = {t.get_text() for legend in legends for t in legend.get_texts()}
    assert set(CATEGORIES) <= entries
    ticks = {t.get_text() for ax in fig.axes for t in ax.get_yticklabels()}
    assert len(ticks) == profiles  # every profile's label whole, none cut to "net_v3_small O0"


def _throughput_runs(tmp_path, times, ceiling):
    """Two seeds of one cell whose img/s differ so much that the 95 % interval reaches below
    zero, with a ceiling below their mean (a bar above its own ceiling)."""
    paths = []
    for seed, img_s in enumerate(times):
        path = rf.make_cell(tmp_path, seed=seed, train_img_s=img_s)
        rf.make_ceiling(path, img_s=ceiling)
        paths.append(path)
    tables = agg.aggregate(paths, tmp_path / "tables")
    return draw.read_table(tables["runs"], draw.RUN_COLUMNS)


def test_throughput_axis_never_goes_below_zero(tmp_path):
    runs = _throughput_runs(tmp_path, (20.0, 220.0), ceiling=400.0)
    fig = drawn(plot_throughput, runs)
    assert fig.axes[0].get_ylim()[0] >= 0
    assert_readable(fig)


def test_a_bar_beyond_its_own_ceiling_is_withheld_as_its_table_withholds_it(tmp_path):
    """128 and 129.4 img/s against a ceiling of 100 (its fast end 100 / 0.97): beyond both
    spreads, so the share table shows ✗ for the cell and no number; the figure draws the
    ceiling's outline, ✗ in the bar's place and no bar, and says why under the panel."""
    runs = _throughput_runs(tmp_path, (128.0, 129.4), ceiling=100.0)
    fig = drawn(plot_throughput, runs)
    (ax,) = [ax for ax in fig.axes if ax.get_visible()]
    assert [p.get_height() for p in ax.patches if p.get_fill()] == []  # no bar
    assert [round(p.get_height(), 3) for p in ax.patches if not p.get_fill()] == [100.0]
    assert [t.get_text() for t in ax.texts] == [C.IMPOSSIBLE_MARK]
    assert C.IMPOSSIBLE_NOTE in " ".join(fig._supxlabel.get_text().split())
    assert_readable(fig)
