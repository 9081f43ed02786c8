"""Figures say what the tables say ([4/5] item 3): the speed-up figure draws the time table's
speed-up (the processes' steady rates, never a ratio of seconds) with its mark and its
family's verdict, and the accuracy curves never average cells the tables keep apart (two
loaders), marking partial epochs as the time-to-accuracy table says it. Expected values are
computed here from the raw records."""

from __future__ import annotations

import math

import record_factory as F

from nettebench.report import draw
from nettebench.report import format as T
from nettebench.report.aggregate import aggregate
from nettebench.report.figures.accuracy import plot_accuracy
from nettebench.report.figures.speedup import plot_speedup

STEADY = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8, 100.1, 99.9]
LOADED = F.window(0.6, reasons=("other processes took 60 % of the job's CPUs",))


def _geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _cell(root, precision, blocks, **kwargs):
    return F.make_cell(
        root,
        precision=precision,
        device_type="cpu",
        train_img_s=sum(blocks) / len(blocks),
        summary_extra={"train_block_img_s": blocks},
        **kwargs,
    )


def _marks(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def test_the_speedup_bar_is_the_tables_rate_ratio_with_its_mark(tmp_path):
    """bf16's seconds say 0.5x (twice the seconds: validation, start-up) while its processes'
    steady steps ran at 1.01x: the table states the rates' ratio, and so must the bar, with the
    table's mark (a disturbed side: no verdict)."""
    rates = [99.0, 100.0, 101.0]
    paths = [
        _cell(tmp_path / "runs", "O0", [r], time_for_epochs_s=100.0, seed=s)
        for s, r in enumerate(rates)
    ]
    paths += [
        _cell(tmp_path / "runs", "bf16", [1.01 * r], time_for_epochs_s=200.0, seed=s,
              conditions=LOADED)
        for s, r in enumerate(rates)
    ]  # fmt: skip
    out = aggregate(paths, tmp_path / "tables")
    runs = draw.read_table(out["runs"], draw.RUN_COLUMNS)
    fig = plot_speedup(runs)
    (bar,) = [p for p in fig.axes[0].patches if p.get_height() > 0]
    expected = _geomean([1.01 * r for r in rates]) / _geomean(rates)
    assert math.isclose(bar.get_height(), expected, rel_tol=1e-9), bar.get_height()
    table = out["time_by_model_precision"].read_text().split("## Speed-up over O0")[1]
    row = next(x for x in table.splitlines() if x.startswith("| resnet18"))
    mark = row.split("|")[2].strip().split("] ", 1)[1]  # what follows the interval
    assert mark == "‡ (no verdict)" and mark in _marks(fig)


def test_the_speedup_figure_states_the_tables_holm_corrected_verdicts(tmp_path):
    """Three precisions against O0, one at a raw p between 0.05 / 3 and 0.05: the table says
    ``(ns)`` after Holm's correction over its three comparisons, and so does the bar."""
    base = [96.0, 100.0, 104.0]
    others = {"O1": [1.12 * r for r in base], "O2": base, "O3": base[::-1]}
    paths = [_cell(tmp_path / "runs", "O0", [r], seed=s) for s, r in enumerate(base)]
    for precision, values in others.items():
        paths += [_cell(tmp_path / precision, precision, [r], seed=s) for s, r in enumerate(values)]
    out = aggregate(paths, tmp_path / "tables")
    table = out["time_by_model_precision"].read_text().split("## Speed-up over O0")[1]
    row = next(x for x in table.splitlines() if x.startswith("| resnet18"))
    assert row.split("|")[2].strip().endswith("(ns)")  # O1: raw p < 0.05, not after Holm
    fig = plot_speedup(draw.read_table(out["runs"], draw.RUN_COLUMNS))
    assert _marks(fig).count("(ns)") == 3


def test_accuracy_curves_keep_loaders_apart_and_mark_partial_epochs(tmp_path):
    root = tmp_path / "runs"
    paths = [
        F.make_cell(root, precision="O0", extra_cell={"loader": "pil"}),
        F.make_cell(root, precision="O0", extra_cell={"loader": "cached"}, seed=1),
        F.make_cell(root, precision="bf16", extra_cell={"loader": "pil"}, max_steps=4),
    ]
    out = aggregate(paths, tmp_path / "tables")
    runs = draw.read_table(out["runs"], draw.RUN_COLUMNS)
    epochs = draw.read_table(out["epochs"], draw.EPOCH_COLUMNS)
    fig = plot_accuracy(epochs, runs)
    titles = [ax.get_title() for ax in fig.axes]
    assert len(fig.axes) == 2 and any("cached" in t for t in titles), titles
    for ax in fig.axes:
        line = next(ln for ln in ax.get_lines() if ln.get_linestyle() == "-")  # O0 top-1
        cached = "cached" in ax.get_title()
        seed = 1 if cached else 0  # each panel one cell: its own curve, never a mean of two
        expected = [F.top1_for("resnet18", "O0", seed, e) for e in range(1, F.STUDY_EPOCHS + 1)]
        assert list(line.get_ydata()) == expected, (ax.get_title(), list(line.get_ydata()))
    legend = [t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts()]
    assert "bf16 (partial epochs)" in legend and "O0 (partial epochs)" not in legend
    assert not any(T.APPROX_MARK in text for text in legend)  # ~ is an extrapolated time
