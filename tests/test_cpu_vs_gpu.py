"""``cpu_vs_gpu.md`` through the real aggregate (fake cells): the matrix side averages only the
seeds of one measurement (never pil with cached, two image sizes, workers, lr or package
environments), and two machines' baselines are told apart by a machine column."""

from __future__ import annotations

import math
import statistics

import pytest
import record_factory as rf
from test_aggregate import md_tables

from nettebench.report import aggregate as agg
from nettebench.report import format as T
from nettebench.report import stats

EPOCHS = 3


# Three processes a side with the same spread of logs: Welch's degrees of freedom are exactly
# 2 (n - 1) = 4, whose 97.5 % t quantile the tables give as 2.776.
BASE_RATES = [96.0, 100.0, 104.0]
T_975_DF4 = 2.776


def _welch_by_hand(other, reference):
    """other / reference as the ratio of geometric means, and its 95 % interval (Welch on the
    logs, equal spreads, three processes a side), computed here from the raw rates."""
    a, b = [math.log(x) for x in other], [math.log(x) for x in reference]
    assert len(a) == len(b) == 3 and math.isclose(statistics.stdev(a), statistics.stdev(b))
    se = math.sqrt(statistics.variance(a) / 3 + statistics.variance(b) / 3)
    diff = statistics.mean(a) - statistics.mean(b)
    return math.exp(diff), math.exp(diff - T_975_DF4 * se), math.exp(diff + T_975_DF4 * se)


def _processes(root, precision, seconds, rates, conditions=None):
    """One matrix record per process (seed): its seconds for the epochs and its steady rate."""
    return [
        rf.make_cell(root, precision=precision, seed=seed, time_for_epochs_s=seconds,
                     train_img_s=rate, conditions=None if conditions is None else conditions(seed))
        for seed, rate in enumerate(rates)
    ]  # fmt: skip


def _matrix(root, per_epoch, *, seed=0, extra=None, env=None, precision="O0", device_name=None):
    return rf.make_cell(
        root,
        precision=precision,
        device_name=device_name,
        seed=seed,
        time_for_epochs_s=per_epoch * EPOCHS,
        extra_cell=extra,
        env=env,
    )


def _baseline(root, seconds=200.0, *, extra=None, env=None, device_name=None):
    return rf.make_cell(
        root,
        kind="cpu_baseline",
        precision="fp32",
        epochs=1,
        time_for_epochs_s=seconds,
        extra_cell=extra,
        env=env,
        device_name=device_name,
    )


def _rows(paths, out):
    text = agg.aggregate(paths, out)["cpu_vs_gpu"].read_text()
    ((_, rows),) = md_tables(text)
    return [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]


def _seeds(*per_epoch):
    return stats.with_ci(stats.summarize(per_epoch), T.fmt_seconds)


def test_pil_and_cached_cells_are_never_averaged_as_seeds(tmp_path):
    """The issue's numbers: 4.27 s (pil) and 4.71 s (cached) made one ``4.5 ± 2.8``."""
    paths = [
        _matrix(tmp_path / "m", 4.27, extra={"loader": "pil"}),
        _matrix(tmp_path / "m", 4.71, extra={"loader": "cached"}),
        _baseline(tmp_path / "c", extra={"loader": "pil"}),
        _baseline(tmp_path / "c", extra={"loader": "cached"}),
    ]
    rows = {row["model"]: row for row in _rows(paths, tmp_path / "out")}
    assert set(rows) == {"resnet18 (loader pil)", "resnet18 (loader cached)"}
    assert rows["resnet18 (loader pil)"]["O0 s/epoch"] == _seeds(4.27)
    assert rows["resnet18 (loader cached)"]["O0 s/epoch"] == _seeds(4.71)
    assert all("±" not in row["O0 s/epoch"] for row in rows.values())


def test_seeds_of_one_cell_are_averaged_and_other_parameters_are_not(tmp_path):
    paths = [
        _matrix(tmp_path / "m", 10.0, seed=0),
        _matrix(tmp_path / "m", 11.0, seed=1),
        _matrix(tmp_path / "m", 2.0, extra={"image_size": 128}),
        _matrix(tmp_path / "m", 3.0, extra={"workers": 8}),
        _matrix(tmp_path / "m", 4.0, extra={"lr": 0.5}),
        _matrix(tmp_path / "m", 5.0, extra={"environment": "new"}),
        _matrix(tmp_path / "pillow", 6.0, env={"pillow": "12.3.0"}),
        _baseline(tmp_path / "c"),
    ]
    (row,) = _rows(paths, tmp_path / "out")
    # like for like: the baseline's own image size, workers, lr and environment
    assert row["precision"] == "O0"
    assert row["O0 s/epoch"] == row["s/epoch"] != _seeds(10.0, 11.0, 2.0, 3.0, 4.0, 5.0, 6.0)
    assert row["s/epoch"] in (_seeds(10.0, 11.0), _seeds(6.0))


def test_a_match_unlike_the_baseline_names_what_differs(tmp_path):
    paths = [
        _matrix(tmp_path / "m", 2.0, extra={"image_size": 128}),
        _matrix(tmp_path / "m", 2.5, extra={"image_size": 128}, seed=1),
        _matrix(tmp_path / "m", 9.0, extra={"image_size": 160}),
        _baseline(tmp_path / "c"),
    ]
    (row,) = _rows(paths, tmp_path / "out")
    assert row["precision"] == "O0 (image_size 128)"
    assert row["s/epoch"] == _seeds(2.0, 2.5)


def test_two_machines_baselines_are_told_apart_by_a_machine_column(tmp_path):
    """Two unlabelled machines with the same CPU model and one GPU each: their baselines were
    two identical rows; the machine column names each one's setup."""
    t4 = {"gpu_name": "Tesla T4", "driver": "470.82.01"}
    paths = [
        _matrix(tmp_path / "h200", 5.0),
        _matrix(tmp_path / "t4", 20.0, env=t4, device_name="Tesla T4"),
        _baseline(tmp_path / "h200-cpu", 200.0),
        _baseline(tmp_path / "t4-cpu", 200.0, env=t4),
    ]
    rows = _rows(paths, tmp_path / "out")
    assert len({row["machine"] for row in rows}) == 2
    # each machine's CPU against its own GPU (same host CPU, driver and libraries)
    assert {row["machine"]: row["device"] for row in rows} == {
        rows[0]["machine"]: "NVIDIA H200" if "580" in rows[0]["machine"] else "Tesla T4",
        rows[1]["machine"]: "NVIDIA H200" if "580" in rows[1]["machine"] else "Tesla T4",
    }
    assert {row["O0 speed-up"] for row in rows} == {T.fmt_speedup(40.0), T.fmt_speedup(10.0)}
    assert "machine" not in _rows(paths[:1] + paths[2:3], tmp_path / "one")[0]


def test_the_quick_starts_shape_an_extrapolated_bf16_cell_keeps_its_full_o0_twin(tmp_path):
    """As in profiles/quickstart: O0 and bf16 in three processes each (seeds), bf16 timed over a
    few steps, here beside a baseline timed over a few steps (the quick start has none on a
    CPU) and an O0 `cached` cell (`loader: [pil, cached]` adds it). The O0 column is the pil O0
    processes' own seconds (it was the mean of pil and cached), and bf16's verdict comes from
    the two cells' processes, three a side."""
    pil = {"loader": "pil"}
    o0_per_epoch = [4.27, 4.31, 4.23]
    bf16_rates = [0.75 * r for r in BASE_RATES[::-1]]
    paths = [
        *(
            rf.make_cell(tmp_path / "m", seed=seed, time_for_epochs_s=per_epoch * EPOCHS,
                         train_img_s=rate, extra_cell=pil)
            for seed, (per_epoch, rate) in enumerate(zip(o0_per_epoch, BASE_RATES, strict=True))
        ),
        _matrix(tmp_path / "m", 4.71, extra={"loader": "cached"}),
        *(
            rf.make_cell(tmp_path / "m", precision="bf16", seed=seed, max_steps=4,
                         time_for_epochs_s=3.0 * EPOCHS, train_img_s=rate, extra_cell=pil)
            for seed, rate in enumerate(bf16_rates)
        ),
        rf.make_cell(
            tmp_path / "c",
            kind="cpu_baseline",
            precision="fp32",
            epochs=1,
            max_steps=3,
            time_for_epochs_s=9.0,
            extra_cell=pil,
        ),
    ]  # fmt: skip
    assert _welch_by_hand(bf16_rates, BASE_RATES)[2] < 1  # its processes: slower than O0
    (row,) = _rows(paths, tmp_path / "out")
    assert row["precision"] == "bf16 (slower than O0 by its processes' steady rates)"
    assert row["s/epoch"] == T.APPROX_MARK + _seeds(3.0, 3.0, 3.0)
    assert row["O0 s/epoch"] == _seeds(*o0_per_epoch)
    assert row["O0 speed-up"] == T.fmt_speedup(9.0 / statistics.mean(o0_per_epoch))


@pytest.mark.parametrize(
    ("factor", "side", "word", "front"),
    [
        (1.5, "above", "faster than O0", "bf16 trains resnet18 {ratio:.2f}x faster than O0 ("),
        (1.02, "holds", "O0 and it cannot be told apart",
         "bf16 and O0 train resnet18 at speeds their processes cannot tell apart: {ratio:.2f}x ("),
        (0.6, "below", "slower than O0 by its processes' steady rates",
         "bf16 trains resnet18 slower than O0: {ratio:.2f}x its speed ("),
    ],
)  # fmt: skip
def test_the_table_and_the_front_page_state_one_verdict_on_bf16_against_o0(
    tmp_path, factor, side, word, front
):
    """The quick start's case: bf16 has fewer seconds per epoch than O0 whatever its steady
    rates say. The table may not call it the fastest while the front page says the two cannot
    be told apart: both state report.answers.direction of the same cells, three processes a
    side, each a family of one comparison (the table's against O0, the front page's), so
    Holm's correction leaves both at the raw p."""
    bf16_rates = [factor * r for r in BASE_RATES[::-1]]
    ratio, low, high = _welch_by_hand(bf16_rates, BASE_RATES)
    assert side == ("above" if low > 1 else "below" if high < 1 else "holds")
    paths = [
        *_processes(tmp_path / "m", "O0", 12.8 * EPOCHS, BASE_RATES),
        *_processes(tmp_path / "m", "bf16", 12.7 * EPOCHS, bf16_rates),
        rf.make_cell(tmp_path / "c", kind="cpu_baseline", epochs=1, time_for_epochs_s=100.0),
    ]
    written = agg.aggregate(paths, tmp_path / "out")
    table = written["cpu_vs_gpu"].read_text()
    ((_, rows),) = md_tables(table)
    (row,) = [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]
    assert row["precision"] == f"bf16 ({word})"
    assert "Holm's correction over the 1 tested; n=3 processes a side." in table
    headline = written["headline"].read_text()
    assert f"On a GPU ({rf.GPU_NAME}), {front.format(ratio=ratio)}95 % interval " in headline
    assert "between 3 and 3 processes" in headline and "Holm-corrected" not in headline
    assert "fastest" not in table


def test_a_cpu_only_machine_states_no_speed_up_of_the_cpu_against_itself(tmp_path):
    """Every matrix cell on the CPU (no GPU visible): the baseline's row names no device and
    no ratio; a GPU cell beside them is the one compared."""
    cpu_cells = [
        rf.make_cell(tmp_path / "m", precision=p, device_type="cpu", time_for_epochs_s=t * EPOCHS)
        for p, t in (("O0", 150.0), ("bf16", 160.0))
    ]
    baseline = _baseline(tmp_path / "c", 200.0)
    (row,) = _rows([*cpu_cells, baseline], tmp_path / "out")
    assert row["device"] == "no GPU cell" and row["speed-up"] == row["O0 speed-up"] == ""
    assert "x" not in "".join(row[k] for k in ("speed-up", "O0 speed-up", "s/epoch"))
    text = agg.aggregate([*cpu_cells, baseline], tmp_path / "out2")["cpu_vs_gpu"].read_text()
    assert "every matrix cell ran on the CPU" in text
    gpu = _matrix(tmp_path / "g", 5.0)
    (row,) = _rows([*cpu_cells, gpu, baseline], tmp_path / "out3")
    assert row["device"] == rf.GPU_NAME and row["O0 speed-up"] == T.fmt_speedup(200.0 / 5.0)


def test_a_disturbed_bf16_has_no_verdict_against_o0_in_the_table_nor_the_front_page(tmp_path):
    """The same two cells, three processes a side, bf16 1.5x O0's steady rates (the processes
    would support it), but bf16's seed 0 ran while other processes took 60 % of the CPUs:
    neither the table's precision nor the front page may call it faster
    (docs/honest-numbers.md: a verdict needs quiet evidence)."""
    loaded = rf.window(0.6, reasons=("other processes took 60 % of the job's CPUs",))
    quiet = rf.window(0.01)
    bf16_rates = [1.5 * r for r in BASE_RATES]
    assert _welch_by_hand(bf16_rates, BASE_RATES)[1] > 1  # quiet, it would be faster
    paths = [
        *_processes(tmp_path / "m", "O0", 12.8 * EPOCHS, BASE_RATES, lambda seed: quiet),
        *_processes(tmp_path / "m", "bf16", 12.7 * EPOCHS, bf16_rates,
                    lambda seed: loaded if seed == 0 else quiet),
        rf.make_cell(tmp_path / "c", kind="cpu_baseline", epochs=1, time_for_epochs_s=100.0),
    ]  # fmt: skip
    written = agg.aggregate(paths, tmp_path / "out")
    ((_, rows),) = md_tables(written["cpu_vs_gpu"].read_text())
    (row,) = [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]
    assert row["precision"] == "bf16 (no verdict against O0: timed under interference ‡)"
    headline = written["headline"].read_text()
    assert "no verdict: bf16&#x27;s epochs (seed 0) timed under interference" in headline
    assert "faster than O0" not in headline
