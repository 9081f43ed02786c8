"""The inference tables, the latency-throughput figure and the front page's sentence."""

from __future__ import annotations

import json

import matplotlib.colors
import pandas as pd

from nettebench.report import front_page, inference_figure, inference_tables
from nettebench.report.figures.inference import plot_inference
from nettebench.report.figures.plotting import style
from nettebench.report.frames import inference as frames
from nettebench.report.tables import inference as table


def record(precision="fp32", batch=1, img_s=100.0, unstable=False, status="ok", device="cpu"):
    latency = {
        "median": 9.0,
        "median_low": 8.5,
        "median_high": 9.5,
        "p90": 11.0,
        "p90_low": 10.0,
        "p90_high": 12.0,
        "p99": 20.0,
        "p99_low": 15.0,
        "p99_high": 25.0,
        "unstable": False,
    }
    return {
        "status": status,
        "message": None if status == "ok" else "precision O3 cannot run on cpu",
        "cell": {
            "dataset": "d",
            "model": "resnet18",
            "precision": precision,
            "batch_size": batch,
            "image_size": 224,
            "compile": False,
        },
        "channels_last": precision == "bf16",
        "device": {"type": "cpu", "name": device, "threads": 2},
        "environment": {"cpu_capability": "AVX2"},
        "precision_emulated": None,
        "offline": None
        if status != "ok"
        else {
            "img_s": img_s,
            "img_s_low": img_s * 0.9,
            "img_s_high": img_s * 1.1,
            "batch_ms": {"median": 1000 * batch / img_s, "unstable": unstable},
            "batches": 50,
            "compile_s": None,
        },
        "pipeline": None
        if status != "ok"
        else {"img_s": img_s / 2, "data_wait_share": 0.4, "batch_ms": {"unstable": False}},
        "single_stream": {"queries": 1024, "capped": False, "latency_ms": latency}
        if batch == 1 and status == "ok"
        else None,
        "conditions": {"interference": False, "loadavg_end": 1.0},
        "peak_mem_mb": 700.0,
        "peak_mem_kind": "cpu_max_rss",
    }


ACCURACY = {
    "model": "resnet18",
    "trained_cell": {"dataset": "d", "precision": "O0", "seed": 0},
    "trained_final_top1": 80.0,
    "device": {"name": "cpu"},
    "status": "ok",
    "rows": [
        {
            "precision": "fp32",
            "channels_last": False,
            "compile": False,
            "status": "ok",
            "top1": 80.0,
            "top5": 99.0,
            "images": 100,
        },
        {
            "precision": "bf16",
            "channels_last": True,
            "compile": False,
            "status": "ok",
            "top1": 79.0,
            "top5": 99.0,
            "images": 100,
            "top1_diff": -1.0,
            "top5_diff": 0.0,
            "changed_share": 0.02,
        },
    ],
}


def test_the_table_shows_medians_intervals_and_marks_and_a_refused_cell():
    cells = frames.cells_frame(
        [
            ("a/inference.json", record()),
            ("b/inference.json", record(batch=8, img_s=400.0, unstable=True)),
            ("c/inference.json", record(precision="O3", status="unsupported")),
        ]
    )
    text = table.inference_markdown(cells).markdown()
    assert "## cpu, 2 threads, AVX2" in text
    assert "| resnet18 | fp32 | 1 | 100 [90.0-110] |" in text
    # std >= 10 % of the mean: the mark every table gives unstable timings, one meaning each
    assert "400 [360-440]§" in text and "≈" not in text
    assert "§: unstable (standard deviation 10 % of the mean or more" in text
    assert "9.00 [8.50-9.50] / 11.00 [10.00-12.00] / 20.00 [15.00-25.00]" in text
    assert "| resnet18 | O3 | 1 | unsupported |" in text and "cannot run on cpu" in text


def test_accuracy_table_and_headline_give_the_difference_from_fp32():
    scores = frames.accuracy_frame([("x/accuracy.json", ACCURACY)])
    text = table.accuracy_markdown(scores).markdown()
    assert (
        "| resnet18 | O0 | 0 | bf16 (channels_last) | 79.0 | 99.0 | -1.00 | +0.00 | 2.0 |" in text
    )
    cells = frames.cells_frame([("a/inference.json", record())])
    line = table.headline(cells, scores)
    assert "at most 100 img/s" in line and "p99 20.00 ms" in line
    assert "-1.00 points, 2.0 % of predictions changed" in line  # the table's -1.00 and 2.0
    assert table.headline(frames.cells_frame([]), scores) == ""


def test_write_then_draw_from_the_csv_alone(tmp_path):
    paths = []
    for index, batch in enumerate((1, 8, 32)):
        path = tmp_path / f"{index}.json"
        path.write_text(json.dumps(record(batch=batch, img_s=100.0 * batch**0.5)))
        paths.append(str(path))
    written = inference_tables.write(paths, [], tmp_path / "tables")
    assert "No accuracy was evaluated" in written["accuracy_table"].read_text()
    cells = pd.read_csv(written["cells"])
    fig = plot_inference(cells)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and len(ax.lines) == 2  # device batch and pipeline
    assert list(ax.lines[0].get_xdata()) == sorted(cells["batch_ms"])
    assert (
        inference_figure.main(["--cells", str(written["cells"]), "--out-dir", str(tmp_path)]) == 0
    )
    assert (tmp_path / f"{inference_figure.NAME}.svg").is_file()


def test_the_figure_of_a_study_without_inference_cells_has_the_reports_style(tmp_path):
    """The empty figure too is drawn in every figure's style (seaborn's whitegrid: light grey
    axes edges), not matplotlib's default black frame."""
    empty = tmp_path / "inference.csv"
    empty.write_text("")
    assert inference_figure.main(["--cells", str(empty), "--out-dir", str(tmp_path)]) == 0
    svg = (tmp_path / f"{inference_figure.NAME}.svg").read_text()
    edge = matplotlib.colors.to_hex(style()["axes.edgecolor"])
    assert edge != "#000000" and f"stroke: {edge}" in svg


def test_the_front_page_carries_the_sentence_before_the_figure():
    page = front_page.compose("<table/>", b"png", caption="c", extras=("<p>inference</p>",))
    assert page.index("<table/>") < page.index("<p>inference</p>") < page.index("<figure>")
