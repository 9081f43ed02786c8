"""Records of several machines and environments aggregated together (fake cells, no training):
two machines' copies of one cell stay apart in every table and figure, machines side by side,
speed-ups with what the seeds support, time to accuracy, package versions as columns."""

from __future__ import annotations

import math
import shutil

import pandas as pd
import pytest
import record_factory as rf
from test_aggregate import as_dict, md_tables

from nettebench.report import aggregate as agg
from nettebench.report import draw, stats
from nettebench.report import format as T
from nettebench.report.figures.accuracy import plot_accuracy
from nettebench.report.figures.throughput import plot_throughput
from nettebench.report.figures.time import plot_time
from nettebench.report.figures.time_to_accuracy import plot_time_to_accuracy

T4 = {"gpu_name": "Tesla T4", "driver": "470.82.01", "cudnn": "8902", "cuda": "12.1"}
A100 = {
    "gpu_name": "NVIDIA A100-SXM4-80GB",
    "driver": "535.104.05",
    "cudnn": "8902",
    "cuda": "12.1",
}


def copy_of_one_cell(root, gpu, seconds, seed=0, extra=None):
    """The same cell (same parameters, same cell_id) as measured on one GPU, in its own tree."""
    return rf.make_cell(
        root,
        model="resnet50",
        precision="O1",
        batch_size=128,
        seed=seed,
        time_for_epochs_s=seconds,
        device_name=gpu["gpu_name"],
        env=gpu,
        extra_cell=extra,
    )


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """What a user did by hand: copies of one cell from a T4 and an A100, two seeds each, put
    in subfolders, none labelled; then aggregated together."""
    root = tmp_path_factory.mktemp("hostile")
    paths = [
        copy_of_one_cell(root / "t4", T4, 1440.0, seed=0),
        copy_of_one_cell(root / "t4", T4, 1460.0, seed=1),
        copy_of_one_cell(root / "a100", A100, 380.0, seed=0),
        copy_of_one_cell(root / "a100", A100, 384.0, seed=1),
    ]
    written = agg.aggregate(paths, root / "tables", target_top1=60.0)
    return {"paths": paths, "written": written, "root": root}


def test_the_copies_share_a_cell_id_and_keep_their_setups(hostile):
    runs = pd.read_csv(hostile["written"]["runs"])
    # the same cell, as far as its parameters go: each seed's two copies share their cell_id
    assert runs.groupby("seed")["cell_id"].nunique().eq(1).all()
    assert sorted(runs["setup"].unique()) == [
        "NVIDIA A100-SXM4-80GB, driver 535.104.05",
        "Tesla T4, driver 470.82.01",
    ]
    assert runs.groupby("setup")["setup_id"].nunique().eq(1).all()
    assert runs["setup_id"].nunique() == 2


def test_time_table_never_averages_two_machines(hostile):
    text = hostile["written"]["time_by_model_precision"].read_text()
    tables = dict(md_tables(text))
    t4 = as_dict(tables[f"{rf.DATASET}, 3 epochs, cuda (Tesla T4) · driver 470.82.01"])
    a100 = as_dict(
        tables[f"{rf.DATASET}, 3 epochs, cuda (NVIDIA A100-SXM4-80GB) · driver 535.104.05"]
    )
    ci = lambda values: stats.with_ci(stats.summarize(values), T.fmt_seconds)  # noqa: E731
    assert t4["resnet50"]["O1"] == ci([1440.0, 1460.0])
    assert a100["resnet50"]["O1"] == ci([380.0, 384.0])
    assert "Tesla T4; " not in text and "; Tesla T4" not in text  # no merged device title


def test_accuracy_and_throughput_keep_them_apart(hostile):
    accuracy = hostile["written"]["accuracy_by_epoch"].read_text()
    tables = dict(md_tables(accuracy))
    assert len(tables) == 2
    for rows in tables.values():  # each table holds its own two seeds, not four
        assert f"{T.SEEDS_TEXT} (n=2)" in accuracy
        expected = [rf.top1_for("resnet50", "O1", s, 1) for s in (0, 1)]
        assert as_dict(rows)["O1 Top1"]["1"] == stats.with_ci(
            stats.summarize(expected), T.fmt_accuracy
        )
    throughput = [h for h, _ in md_tables(hostile["written"]["throughput"].read_text())]
    assert sum("Tesla T4" in h for h in throughput) == sum("A100" in h for h in throughput) == 2


def test_machines_side_by_side_with_the_speed_up(hostile):
    text = hostile["written"]["time_by_machine"].read_text()
    tables = dict(md_tables(text))
    side = as_dict(tables[f"{rf.DATASET}, 3 epochs"])
    a100, t4 = "NVIDIA A100-SXM4-80GB, driver 535.104.05", "Tesla T4, driver 470.82.01"
    row = side["resnet50 O1"]
    assert row[a100] == stats.with_ci(stats.summarize([380.0, 384.0]), T.fmt_seconds)
    assert row[t4] == stats.with_ci(stats.summarize([1440.0, 1460.0]), T.fmt_seconds)
    ratio = _geomean([380.0, 384.0]) / _geomean([1440.0, 1460.0])  # seconds: rates inverted
    speedup = row[f"{t4}: speed-up over {a100}"]
    assert speedup.startswith(f"{ratio:.2f}x [") and speedup.endswith("]")  # supported
    setups = as_dict(tables["Setups"])
    assert setups[t4]["device"] == "Tesla T4" and setups[t4]["matrix cells"] == "2"
    assert "Welch" in text and "Holm" in text


def test_machine_labels_split_identical_hardware_and_show_in_titles(tmp_path):
    paths = [
        copy_of_one_cell(tmp_path, T4, s, seed=i, extra={"machine": m})
        for m, times in (("site-a", (1440.0, 1450.0)), ("site-b", (1445.0, 1452.0)))
        for i, s in enumerate(times)
    ]
    written = agg.aggregate(paths, tmp_path / "tables")
    runs = pd.read_csv(written["runs"])
    assert sorted(runs["setup"].unique()) == ["site-a", "site-b"]
    headings = [h for h, _ in md_tables(written["time_by_model_precision"].read_text())]
    assert f"{rf.DATASET}, 3 epochs, cuda (Tesla T4) · machine site-a" in headings
    side = as_dict(
        dict(md_tables(written["time_by_machine"].read_text()))[f"{rf.DATASET}, 3 epochs"]
    )
    # 1445 vs 1448.5 s with these seeds: the seeds do not support a difference
    assert side["resnet50 O1"]["site-b: speed-up over site-a"].endswith(stats.NOT_SUPPORTED_MARK)
    assert "machine" not in "".join(side)  # the label is the column, never part of a row label


def test_cpu_capability_is_part_of_the_setup(tmp_path):
    paths = [
        rf.make_cell(tmp_path / cap, kind="cpu_baseline", epochs=1, env={"cpu_capability": cap})
        for cap in ("AVX2", "AVX512")
    ] + [
        rf.make_cell(tmp_path / cap, env={"cpu_capability": cap}, time_for_epochs_s=t)
        for cap, t in (("AVX2", 300.0), ("AVX512", 200.0))
    ]
    runs = pd.read_csv(agg.aggregate(paths, tmp_path / "out")["runs"])
    matrix = runs[runs["kind"] == "matrix"]
    assert sorted(matrix["setup"]) == ["NVIDIA H200, CPU AVX2", "NVIDIA H200, CPU AVX512"]


def test_an_identical_copy_of_a_record_is_one_run_not_two_seeds(tmp_path):
    original = rf.make_cell(tmp_path / "here")
    copy_dir = tmp_path / "merged" / "copy"
    shutil.copytree(original.parent, copy_dir)
    copies = []
    written = agg.aggregate([original, copy_dir / "metrics.json"], tmp_path / "out", copies=copies)
    assert len(pd.read_csv(written["runs"])) == 1
    assert copies == [(str(copy_dir / "metrics.json"), str(original))]
    assert f"{T.SEEDS_TEXT} (n=1)" in written["time_by_model_precision"].read_text()


def test_speed_up_over_O0_says_what_the_seeds_support(tmp_path):
    times = {"O0": (100.0, 101.0, 99.0), "O1": (60.0, 61.0, 59.5), "O3": (97.0, 104.0, 99.5)}
    paths = [
        rf.make_cell(tmp_path, precision=p, seed=i, time_for_epochs_s=t)
        for p, values in times.items()
        for i, t in enumerate(values)
    ]
    text = agg.aggregate(paths, tmp_path / "out")["time_by_model_precision"].read_text()
    (heading, rows) = md_tables(text)[1]
    speedup = as_dict(rows)["resnet18"]
    o1 = _geomean(times["O0"]) / _geomean(times["O1"])
    o3 = _geomean(times["O0"]) / _geomean(times["O3"])
    assert speedup["O1"].startswith(f"{o1:.2f}x [") and speedup["O1"].endswith("]")
    assert speedup["O3"].startswith(f"{o3:.2f}x [")
    assert speedup["O3"].endswith(f"] {stats.NOT_SUPPORTED_MARK}")
    assert "Speed-up over O0" in text and "Welch" in text


def test_time_to_accuracy_column_table_and_figure(hostile):
    runs = pd.read_csv(hostile["written"]["runs"])
    # fake cells: top-1 of epoch 1 is below 60 %, of epoch 2 above; three equal epochs
    assert (runs["target_epoch"] == 2).all()
    expected = runs["time_for_epochs_s"] * 2 / 3
    assert runs["time_to_target_s"].round(6).tolist() == expected.round(6).tolist()
    text = hostile["written"]["time_to_accuracy"].read_text()
    t4 = as_dict(
        dict(md_tables(text))[f"{rf.DATASET}, 3 epochs, cuda (Tesla T4) · driver 470.82.01"]
    )
    assert t4["resnet50"]["O1"] == stats.with_ci(
        stats.summarize([1440.0 * 2 / 3, 1460.0 * 2 / 3]), T.fmt_seconds
    )
    runs_table = draw.read_table(hostile["written"]["runs"], draw.RUN_COLUMNS)
    fig = plot_time_to_accuracy(runs_table)
    assert len(fig.axes) == 2  # one panel per setup
    assert "60 %" in fig.get_suptitle()


def test_a_target_nobody_reached(tmp_path):
    paths = [rf.make_cell(tmp_path, seed=s) for s in (0, 1)]
    written = agg.aggregate(paths, tmp_path / "out", target_top1=99.5)
    runs = pd.read_csv(written["runs"])
    assert runs["time_to_target_s"].isna().all() and runs["target_epoch"].isna().all()
    table = as_dict(md_tables(written["time_to_accuracy"].read_text())[0][1])
    assert table["resnet18"]["O0"] == "not reached"
    fig = plot_time_to_accuracy(draw.read_table(written["runs"], draw.RUN_COLUMNS))
    assert "not reached" in [t.get_text() for ax in fig.axes for t in ax.texts]
    untargeted = agg.aggregate(paths, tmp_path / "none")["time_to_accuracy"].read_text()
    assert "No target set" in untargeted


def test_figures_draw_one_panel_per_setup(hostile):
    runs = draw.read_table(hostile["written"]["runs"], draw.RUN_COLUMNS)
    epochs = draw.read_table(hostile["written"]["epochs"], draw.EPOCH_COLUMNS)
    assert len(plot_time(runs).axes) == 2
    assert len(plot_throughput(runs).axes) == 2
    accuracy = plot_accuracy(epochs)
    assert len(accuracy.axes) == 2
    assert {ax.get_title().splitlines()[-1] for ax in accuracy.axes} == set(runs["setup"])


def test_pinned_package_versions_are_columns(tmp_path):
    paths = []
    pins = (("pillow11", "11.3.0", (300.0, 302.0)), ("pillow12", "12.3.0", (250.0, 251.0)))
    for env, version, seconds in pins:
        for seed, t in enumerate(seconds):
            paths.append(
                rf.make_cell(
                    tmp_path,
                    seed=seed,
                    time_for_epochs_s=t,
                    extra_cell={"environment": env},
                    env={
                        "package_environment": env,
                        "packages": {"pillow": version},
                        "pillow": version,
                    },
                )
            )
    text = agg.aggregate(paths, tmp_path / "out")["time_by_library_version"].read_text()
    table = as_dict(dict(md_tables(text))[f"pillow: {rf.DATASET}, 3 epochs, cuda ({rf.GPU_NAME})"])
    old, new = "11.3.0 (env pillow11)", "12.3.0 (env pillow12)"
    assert table["resnet18 O0"][old] == stats.with_ci(
        stats.summarize([300.0, 302.0]), T.fmt_seconds
    )
    ratio = _geomean([300.0, 302.0]) / _geomean([250.0, 251.0])
    assert table["resnet18 O0"][f"{new}: speed-up over {old}"].startswith(f"{ratio:.2f}x [")


def test_two_machines_profiles_of_one_cell_keep_a_row_each():
    from nettebench.report.frames.kernels import cells_frame

    cell = {"dataset": "d", "model": "resnet18", "precision": "O3", "batch_size": 256}
    profiles = [
        {
            "record": {
                "status": "ok",
                "cell": cell,
                "backend": "torch",
                "window": {"steps_profiled": 20},
                "device": {"type": "cuda", "name": gpu},
            },
            "path": f"imports/{name}/profiles/d/x",
        }
        for name, gpu in (("t4", "Tesla T4"), ("a100", "NVIDIA A100-SXM4-80GB"))
    ]
    assert sorted(cells_frame(profiles)["label"]) == [
        "resnet18 O3 · NVIDIA A100-SXM4-80GB",
        "resnet18 O3 · Tesla T4",
    ]


def test_a_cell_of_partial_epochs_has_no_time_to_accuracy(tmp_path):
    """A `max_steps` cell trained part of each epoch: its top-1 is not that of its scaled epoch
    times, so it gets no time to accuracy, and the table says why."""
    paths = [rf.make_cell(tmp_path, precision="bf16", max_steps=3), rf.make_cell(tmp_path)]
    written = agg.aggregate(paths, tmp_path / "out", target_top1=60.0)
    runs = pd.read_csv(written["runs"]).set_index("precision")
    assert pd.isna(runs.loc["bf16", "time_to_target_s"])
    assert runs.loc["O0", "target_epoch"] == 2
    table = as_dict(md_tables(written["time_to_accuracy"].read_text())[0][1])
    assert table["resnet18"]["bf16"] == "partial epochs"
    fig = plot_time_to_accuracy(draw.read_table(written["runs"], draw.RUN_COLUMNS))
    assert "partial epochs" in [t.get_text() for ax in fig.axes for t in ax.texts]


def _geomean(values):
    """The geometric mean, by hand: the speed-up's mean of one value per process."""
    return math.exp(sum(math.log(v) for v in values) / len(values))
