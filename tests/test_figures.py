"""Figures drawn from the aggregate CSVs of fake studies: full, empty, and without O0."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import record_factory as rf

from nettebench.report import aggregate as agg
from nettebench.report import draw
from nettebench.report.figures import plotting
from nettebench.report.figures.speedup import plot_speedup
from nettebench.report.figures.throughput import plot_throughput
from nettebench.report.figures.time import plot_time
from nettebench.report.frames import runs as collect
from nettebench.vocabulary import outputs

EXPECTED_FILES = sorted(f"{name}.{fmt}" for name in outputs.FIGURE_NAMES for fmt in ("png", "svg"))


def texts(fig) -> list[str]:
    """Every piece of text on a figure's axes (SVG glyphs are paths, so look before saving)."""
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def check_written(written, out_dir) -> None:
    assert sorted(written) == sorted(outputs.FIGURE_NAMES)
    assert sorted(p.name for p in out_dir.iterdir()) == EXPECTED_FILES
    for path in out_dir.iterdir():
        data = path.read_bytes()
        assert len(data) > 1000, path
        if path.suffix == ".png":
            assert data.startswith(b"\x89PNG")
        else:
            assert b"<svg" in data and b"<dc:date>" not in data


@pytest.fixture(scope="module")
def study_tables(tmp_path_factory):
    root = tmp_path_factory.mktemp("figures")
    written = agg.aggregate(rf.make_study(root / "cells"), root / "tables")
    return written["runs"], written["epochs"], root


def test_full_study_writes_all_figures_deterministically(study_tables):
    runs_csv, epochs_csv, root = study_tables
    out = root / "figures"
    written = draw.make_figures(runs_csv, epochs_csv, out)
    check_written(written, out)
    first = (out / "time_by_model_precision.svg").read_bytes()
    draw.make_figures(runs_csv, epochs_csv, out)
    assert (out / "time_by_model_precision.svg").read_bytes() == first


def test_bars_mark_cells_that_did_not_run(study_tables):
    runs = draw.read_table(study_tables[0], ())
    assert {"OOM", "n/a"} <= set(texts(plot_time(runs)))
    throughput = plot_throughput(runs)
    legend = [t.get_text() for t in throughput.axes[0].get_legend().get_texts()]
    assert legend == ["O0", "O1", "O3", "CPU fp32"]


def ceiling_outlines(fig) -> list:
    """The unfilled dashed bars that mark compute ceilings on the throughput figure."""
    return [p for ax in fig.axes for p in ax.patches if not p.get_fill()]


def test_throughput_without_ceilings_has_no_outlines(study_tables):
    runs = draw.read_table(study_tables[0], draw.RUN_COLUMNS)
    fig = plot_throughput(runs)
    assert ceiling_outlines(fig) == []
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert plotting.CEILING_LABEL not in legend


def test_throughput_outlines_the_ceiling_over_each_measured_bar(tmp_path):
    tables = agg.aggregate(rf.make_study(tmp_path / "cells", ceilings=True), tmp_path / "tables")
    runs = draw.read_table(tables["runs"], draw.RUN_COLUMNS)
    fig = plot_throughput(runs)
    ok = runs[runs["ceiling_status"] == "ok"]
    expected = ok.groupby(["model", "batch_size", "precision"])["ceiling_img_s"].mean()
    heights = sorted(round(p.get_height(), 3) for p in ceiling_outlines(fig))
    assert heights == sorted(round(v, 3) for v in expected)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["O0", "O1", "O3", "CPU fp32", plotting.CEILING_LABEL]
    png, svg = plotting.save(fig, tmp_path / "figures", "throughput")
    assert png.read_bytes().startswith(b"\x89PNG") and b"<svg" in svg.read_bytes()

    old_csv = tmp_path / "old_runs.csv"  # a runs.csv from before ceilings were aggregated
    runs.drop(columns=list(collect.CEILING_COLUMNS)).to_csv(old_csv, index=False)
    old = plot_throughput(draw.read_table(old_csv, ()))
    assert ceiling_outlines(old) == []


def test_speedup_is_the_time_tables_speedup(study_tables):
    """Two processes (seeds) a side: the table's speed-up is the ratio of the geometric means of
    the processes' steady rates (computed here from runs.csv's per-seed ``train_img_s``), and
    the figure draws exactly that, not a mean of per-seed ratios nor a ratio of seconds."""
    runs = draw.read_table(study_tables[0], ())
    fig = plot_speedup(runs)
    heights = sorted(round(p.get_height(), 6) for p in fig.axes[0].patches)
    table = pd.read_csv(study_tables[0])
    table = table[(table["kind"] == "matrix") & (table["status"] == "ok")]

    def geomean(model, precision):
        rates = table[(table["model"] == model) & (table["precision"] == precision)]
        logs = [math.log(r) for r in rates["train_img_s"]]
        return math.exp(sum(logs) / len(logs))

    expected = [
        geomean(model, precision) / geomean(model, "O0")
        for model in ("resnet18", "resnet34", "resnet50")
        for precision in ("O1", "O3")
        if (model, precision) != ("resnet34", "O3")
    ]
    assert heights == sorted(round(v, 6) for v in expected)


def test_empty_inputs_still_render(tmp_path):
    tables = agg.aggregate([], tmp_path / "tables")  # header-only CSVs
    out = tmp_path / "figures"
    check_written(draw.make_figures(tables["runs"], tables["epochs"], out), out)
    runs = draw.read_table(tables["runs"], draw.RUN_COLUMNS)
    assert any("no data" in t for t in texts(plot_time(runs)))

    blank_runs, blank_epochs = tmp_path / "runs.csv", tmp_path / "epochs.csv"
    blank_runs.write_text("")
    blank_epochs.write_text("")
    out = tmp_path / "figures_blank"
    check_written(draw.make_figures(blank_runs, blank_epochs, out), out)


def test_study_without_o0(tmp_path):
    paths = [
        rf.make_cell(tmp_path / "cells", model=model, precision=precision)
        for model in ("resnet18", "resnet50")
        for precision in ("O1", "O3")
    ]
    tables = agg.aggregate(paths, tmp_path / "tables")
    runs = draw.read_table(tables["runs"], ())
    assert "no O0 cells to compare against" in texts(plot_speedup(runs))
    out = tmp_path / "figures"
    check_written(draw.make_figures(tables["runs"], tables["epochs"], out), out)


def test_cli(study_tables, tmp_path, capsys):
    runs_csv, epochs_csv, _ = study_tables
    args = ["--runs", str(runs_csv), "--epochs", str(epochs_csv), "--out-dir", str(tmp_path)]
    assert draw.main(args) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == EXPECTED_FILES
    capsys.readouterr()
    assert draw.main(["--runs", str(tmp_path / "nope.csv"), *args[2:]]) == 1  # FAILED
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ") and "nope.csv" in line
