"""Every table's caption states the formula of the number it shows: one cell of each table is
computed here from the records (record_factory's deterministic values) by that formula, by hand
(mean, Student's t half-width with t(0.975, 1) = 12.706, ratios, geometric means), and found in
the table; the speed-up's caption names both of its forms (their formulas are in
docs/honest-numbers.md) and no example reads like a result; no caption runs past 90 words."""

from __future__ import annotations

import math
import statistics

import pytest
import record_factory as F
from test_aggregate import as_dict, md_tables

from nettebench.report.aggregate import aggregate

T_975_1 = 12.7062  # Student's t, 0.975 quantile, 1 degree of freedom (two seeds)
SEEDS = F.STUDY_SEEDS
EPOCHS = F.STUDY_EPOCHS
LABEL = "resnet18 (batch 256)"


def _ci(values, fmt):
    """``mean ± half-width`` of two seeds' values in ``fmt``."""
    half = T_975_1 * statistics.stdev(values) / math.sqrt(len(values))
    return f"{fmt(statistics.fmean(values))} ± {fmt(half)}"


def _one(x):
    return f"{x:.1f}"


def _rate(x):
    return f"{round(x):,}"


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("captions")
    paths = F.make_study(root / "cells", ceilings=True)
    written = aggregate(paths, root / "tables", target_top1=60.0)
    return {name: path.read_text() for name, path in written.items() if path.suffix == ".md"}


def _table(text, heading):
    return as_dict(next(rows for title, rows in md_tables(text) if title == heading))


def _seconds(precision, model="resnet18"):
    return [F.time_for(model, precision, seed, EPOCHS) for seed in SEEDS]


H200 = f"{F.DATASET}, {EPOCHS} epochs, cuda ({F.GPU_NAME})"


def test_time_is_the_mean_of_the_seeds_summed_epoch_seconds(study):
    text = study["time_by_model_precision"]
    assert "sum of per-epoch wall times, `summary.time_for_epochs_s`" in text
    assert "mean ± 95 % confidence interval over seeds" in text
    assert _table(text, H200)[LABEL]["O0"] == _ci(_seconds("O0"), _one)


def _geomean(values):
    return math.exp(statistics.fmean(map(math.log, values)))


def test_a_speedup_is_the_ratio_of_geometric_mean_process_rates(study):
    """The fakes' steady rate is images / (0.8 x seconds per epoch) in every process, so the
    ratio of the geometric means of the rates is that of the seconds (geometric, not mean
    seconds over mean seconds)."""
    text = study["time_by_model_precision"]
    assert "the ratio of steady training rates over the processes (seeds)" in text
    assert "Holm's correction" in text and "docs/honest-numbers.md" in text
    speedups = text.split("## Speed-up over O0")[1]
    ratio = _geomean(_seconds("O0")) / _geomean(_seconds("O1"))
    assert _table(speedups, H200)[LABEL]["O1"].startswith(f"{ratio:.2f}x [")


def test_a_speedup_of_one_process_a_side_states_no_verdict_from_its_steps(tmp_path):
    base = [100.0, 104.0, 98.0, 101.0, 99.0, 102.0, 97.0, 100.0, 103.0, 100.0]
    fast = [1.3 * r * (1 + 0.01 * (i % 3)) for i, r in enumerate(base)]
    paths = [
        F.make_cell(tmp_path, precision=p, train_img_s=statistics.fmean(b),
                    summary_extra={"train_block_img_s": b})
        for p, b in (("O0", base), ("O1", fast))
    ]  # fmt: skip
    text = aggregate(paths, tmp_path / "t")["time_by_model_precision"].read_text()
    speedups = text.split("## Speed-up over O0")[1]
    cell = _table(speedups, H200)["resnet18"]["O1"]
    ratio = statistics.fmean(fast) / statistics.fmean(base)
    assert cell == f"{ratio:.2f}x (n=1)"  # tight steps, yet one process a side: untested


def test_accuracy_is_the_mean_top1_after_each_epoch(study):
    text = study["accuracy_by_epoch"]
    assert "Validation accuracy (%) after each epoch (columns = epoch), top-1 and top-5" in text
    heading = f"resnet18, batch 256, {F.DATASET}, {EPOCHS} epochs, cuda ({F.GPU_NAME})"
    top1 = [F.top1_for("resnet18", "O1", seed, 2) for seed in SEEDS]
    assert _table(text, heading)["O1 Top1"]["2"] == _ci(top1, _one)


def _img_s(precision, model="resnet18"):
    """summary.train_img_s of the fake cells: images / (0.8 x the epoch's seconds)."""
    return [F.TRAIN_IMAGES / (0.8 * s / EPOCHS) for s in _seconds(precision, model)]


def test_throughput_sections_follow_their_captions(study):
    text = study["throughput"]
    assert "(`summary.train_img_s`: the median per-step rate over the steady steps" in text
    rates = text.split("## Training throughput (img/s)")[1].split("## Time waiting")[0]
    assert _table(rates, H200)[LABEL]["O1"] == _ci(_img_s("O1"), _rate)
    wait = text.split("## Time waiting for data")[1].split("## Share")[0]
    assert _table(wait, H200)[LABEL]["O0"] == _ci([100 * 0.25] * 2, _one)
    share = text.split("## Share of the compute ceiling (%)")[1].split("## Compute ceiling")[0]
    assert "Training img/s of the cell as a percentage of its compute ceiling" in share
    ceiling = F.ceiling_for("resnet18", "O3", 256)
    assert _table(share, H200)[LABEL]["O3"] == _ci([100 * r / ceiling for r in _img_s("O3")], _one)
    ceilings = text.split("## Compute ceiling (img/s)")[1]
    assert (
        _table(ceilings, H200)[LABEL]["O0"] == f"{_rate(F.ceiling_for('resnet18', 'O0', 256))} ± 0"
    )


def test_cpu_vs_gpu_speedup_is_cpu_seconds_per_epoch_over_device_seconds(study):
    text = study["cpu_vs_gpu"]
    assert "speed-up = CPU seconds per epoch / device seconds per epoch" in text
    ((_, rows),) = md_tables(text)
    row = dict(zip(rows[0], rows[1], strict=True))
    cpu = F.time_for("resnet34", "fp32", 0, 1, "cpu_baseline")  # one epoch
    o0 = statistics.fmean(_seconds("O0", "resnet34")) / EPOCHS
    assert row["O0 speed-up"] == f"{cpu / o0:.1f}x"
    assert row["O0 s/epoch"] == _ci([s / EPOCHS for s in _seconds("O0", "resnet34")], _one)


def test_time_to_accuracy_is_the_seconds_until_top1_first_reached_the_target(study):
    text = study["time_to_accuracy"]
    assert "(epoch wall times summed) until validation top-1 first reached 60 %" in text
    # resnet18 O0 reaches 60 % at epoch 2 (50.2, 62.2, ...): two epochs' wall seconds
    found = [2 * s / EPOCHS for s in _seconds("O0")]
    assert _table(text, H200)[LABEL]["O0"] == _ci(found, _one)


def test_timing_conditions_give_others_share_of_the_jobs_cpus(tmp_path):
    path = F.make_cell(tmp_path, conditions=F.window(0.37))
    text = aggregate([path], tmp_path / "t")["timing_conditions"].read_text()
    assert "*Others' CPU*: other processes' share of the job's CPUs" in text
    ((_, rows),) = md_tables(text)
    row = dict(zip(rows[0], rows[1], strict=True))
    assert row["others' CPU %"] == "37.0"


def test_timing_conditions_say_how_each_cells_openmp_threads_waited(tmp_path):
    policies = ["PASSIVE", "PASSIVE", "default"]
    paths = [
        F.make_cell(tmp_path, seed=seed, env={"omp_wait_policy": policy}, conditions=F.window())
        for seed, policy in enumerate(policies)
    ]
    text = aggregate(paths, tmp_path / "t")["timing_conditions"].read_text()
    assert "OMP_WAIT_POLICY): PASSIVE (2 of 3 cells), default (1 of 3 cells)." in text
    # a record from before the policy was recorded: no sentence rather than a guess
    older = F.make_cell(tmp_path / "older", conditions=F.window())
    text = aggregate([older], tmp_path / "u")["timing_conditions"].read_text()
    assert "OMP_WAIT_POLICY" not in text


def test_machines_and_versions_speedups_are_geometric_mean_seconds_without_rates(tmp_path):
    """Records without a steady rate are compared by their seconds: the first's geometric mean
    over this one's."""
    times = {"2.14.1": [100.0, 102.0], "2.15.0": [50.0, 51.0]}
    paths = [
        F.make_cell(tmp_path / v, seed=s, time_for_epochs_s=t, env={"torch": v},
                    summary_extra={"train_img_s": None})
        for v, ts in times.items()
        for s, t in enumerate(ts)
    ]  # fmt: skip
    written = aggregate(paths, tmp_path / "t")
    ratio = _geomean(times["2.14.1"]) / _geomean(times["2.15.0"])
    for name in ("time_by_machine", "time_by_library_version"):
        text = written[name].read_text()
        assert "over the first version" in text or "over the first setup" in text, name
        cells = [c for _, rows in md_tables(text) for row in rows[1:] for c in row]
        assert any(c.startswith(f"{ratio:.2f}x [") for c in cells), name


CAPTION_WORDS = 90  # what a reader takes in beside a table; formulas live in the docs


def captions(text: str) -> list[str]:
    """Every paragraph that opens a table's section: the first block after a heading that is
    not itself a table (the marks' footnotes below a table name cells, so they are not)."""
    blocks = [block.strip() for block in text.split("\n\n") if block.strip()]
    found = []
    for before, block in zip(blocks, blocks[1:], strict=False):
        if before.splitlines()[-1].startswith("#") and not block.startswith(("|", "#")):
            found.append(block)
    return found


def test_no_caption_runs_past_ninety_words(study):
    long = {
        name: len(caption.split())
        for name, text in study.items()
        for caption in captions(text)
        if len(caption.split()) > CAPTION_WORDS
    }
    assert long == {}
