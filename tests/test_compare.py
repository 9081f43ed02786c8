"""Comparisons that say whether the noise allows them: a single-seed speed-up carries the
within-cell interval of its steady rates and a verdict; a cell's img/s its own interval; an
unstable cell its mark and cause (report/compare.py, report/grids.py, report/tables)."""

from __future__ import annotations

import math

import pandas as pd
import record_factory as F

from nettebench.report import caveats as C
from nettebench.report import stats
from nettebench.report.aggregate import aggregate
from nettebench.report.collect import read_cells, runs_frame
from nettebench.report.compare import (
    block_rates,
    ceiling_drift,
    cells_speedup,
    cells_speedup_text,
    ratio_text,
    speedup_grids,
    speedup_text,
)

STEADY = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8, 100.1, 99.9]


def _tables(tmp_path, paths):
    written = aggregate(paths, tmp_path / "tables")
    return pd.read_csv(written["runs"]), {n: p.read_text() for n, p in written.items()}


def _cell(tmp_path, precision, blocks, **summary):
    return F.make_cell(
        tmp_path,
        precision=precision,
        train_img_s=sum(blocks) / len(blocks),
        summary_extra={"train_block_img_s": blocks, **summary},
    )


def _speedups(text):
    return text["time_by_model_precision"].split("## Speed-up over O0")[1]


def test_a_single_seed_speedup_carries_its_interval_and_verdict(tmp_path):
    faster = [1.5 * r for r in STEADY]  # O1: 1.5x
    same = [r * (1 + (-1) ** i * 0.08) for i, r in enumerate(STEADY)]  # O2: noise around 1x
    paths = [_cell(tmp_path, "O0", STEADY), _cell(tmp_path, "O1", faster)]
    paths.append(_cell(tmp_path, "O2", same))
    _, text = _tables(tmp_path, paths)
    table = _speedups(text)
    found = stats.ratio_interval(faster, STEADY)
    assert f"{found.ratio:.2f}x [{found.low:.2f}-{found.high:.2f}] |" in table  # supported
    noise = stats.ratio_interval(same, STEADY)
    assert noise.low < 1 < noise.high
    assert f"[{noise.low:.2f}-{noise.high:.2f}] {stats.NOT_SUPPORTED_MARK}" in table
    assert f"x {stats.UNTESTED_MARK}" not in table  # one seed a side, yet tested in the cells
    assert "95 % Welch interval" in text["time_by_model_precision"]


def test_records_without_step_times_still_say_n_1(tmp_path):
    paths = [F.make_cell(tmp_path, precision=p) for p in ("O0", "O1")]
    _, text = _tables(tmp_path, paths)
    assert f"x {stats.UNTESTED_MARK}" in _speedups(text)


def test_a_cells_img_s_shows_its_interval_and_an_unstable_cell_its_cause(tmp_path):
    why = "unstable: its 42 steady steps spread 14% (sd / mean >= 10%); timed under interference"
    paths = [
        _cell(tmp_path, "O0", STEADY, train_img_s_low=96.4, train_img_s_high=103.6),
        _cell(tmp_path, "O1", STEADY, train_img_s_low=90.0, train_img_s_high=110.0, unstable=why),
    ]
    _, text = _tables(tmp_path, paths)
    rates = text["throughput"].split("## Training throughput")[1].split("## Time waiting")[0]
    assert "| 100 [96-104] |" in rates
    assert f"100 [90-110]{C.UNSTABLE_MARK} |" in rates
    assert f"{C.UNSTABLE_MARK} unstable" in rates and f"resnet18 O1: {why}" in rates
    assert "order-statistic (binomial) 95 % interval of the median" in text["throughput"]


def _cpu_cell(tmp_path, precision, loader, blocks, env=None):
    return F.make_cell(
        tmp_path,
        precision=precision,
        device_type="cpu",
        env=env,
        extra_cell={"loader": loader},
        train_img_s=sum(blocks) / len(blocks),
        summary_extra={"train_block_img_s": blocks},
    )


def test_the_front_page_answers_in_words_only_what_the_data_support(tmp_path):
    emulated = {"cpu_capability": "AVX2", "bf16_native": False}
    cached = [1.1 * r for r in STEADY]
    bf16 = [0.18 * r for r in STEADY]
    paths = [
        _cpu_cell(tmp_path, "O0", "pil", STEADY, emulated),
        _cpu_cell(tmp_path, "O0", "cached", cached, emulated),
        _cpu_cell(tmp_path, "bf16", "pil", bf16, emulated),
    ]
    _, text = _tables(tmp_path, paths)
    front = text["headline"]
    speedup = stats.ratio_interval(cached, STEADY)
    assert (
        f"On a CPU ({F.CPU_MODEL}), <code>cached</code> trains resnet18 (precision O0) "
        f"{speedup.ratio:.2f}x faster than <code>pil</code> (95 % interval "
        f"{speedup.low:.2f}-{speedup.high:.2f}x over their steady steps)."
    ) in front
    assert f"On a CPU ({F.CPU_MODEL}), bf16 is emulated: 0.18x O0 on resnet18 (loader pil)" in front
    assert front.index('<p class="answer">') < front.index('<p class="caveats">')


def test_a_difference_within_the_noise_is_not_stated_as_one(tmp_path):
    same = [r * (1 + (-1) ** i * 0.08) for i, r in enumerate(STEADY)]
    paths = [_cpu_cell(tmp_path, "O0", "pil", STEADY), _cpu_cell(tmp_path, "O0", "cached", same)]
    _, text = _tables(tmp_path, paths)
    assert "faster than" not in text["headline"] and "slower than" not in text["headline"]
    assert "at speeds the noise cannot tell apart" in text["headline"]


def test_a_loader_comparison_is_widened_by_the_drift_its_identical_ceilings_show(tmp_path):
    """Both O0 cells' ceilings measure the same steps; 12 % apart, they say the machine drifted
    between the two jobs by that much, so a 10 % difference is no longer supported."""
    cached = [1.1 * r for r in STEADY]
    pil = _cpu_cell(tmp_path, "O0", "pil", STEADY)
    F.make_ceiling(pil, img_s=200.0)
    fast = _cpu_cell(tmp_path, "O0", "cached", cached)
    F.make_ceiling(fast, img_s=224.0)
    _, text = _tables(tmp_path, [pil, fast])
    front = text["headline"]
    assert "faster than" not in front and "noise cannot tell apart" in front
    assert "widened by the 12% their identical ceilings differed" in front
    # the same cells with agreeing ceilings: the 10 % stands
    (tmp_path / "b").mkdir()
    pil = _cpu_cell(tmp_path / "b", "O0", "pil", STEADY)
    F.make_ceiling(pil, img_s=200.0)
    fast = _cpu_cell(tmp_path / "b", "O0", "cached", cached)
    F.make_ceiling(fast, img_s=201.0)
    _, text = _tables(tmp_path / "b", [pil, fast])
    assert "1.10x faster than <code>pil</code>" in text["headline"]


def _pair(tmp_path, faster, *, other_env=None, other_device=None, loader=("pil", "pil")):
    """Two single-seed O0 cells, the second ``faster`` times the first, ceilings 2x apart."""
    base = F.make_cell(tmp_path, precision="O0", extra_cell={"loader": loader[0]},
                       train_img_s=100.0, summary_extra={"train_block_img_s": STEADY})  # fmt: skip
    F.make_ceiling(base, img_s=200.0)
    other = F.make_cell(
        tmp_path / "other", precision="O0", extra_cell={"loader": loader[1]}, env=other_env,
        device_name=other_device, train_img_s=100.0 * faster,
        summary_extra={"train_block_img_s": [faster * r for r in STEADY]},
    )  # fmt: skip
    F.make_ceiling(other, img_s=400.0)
    runs = runs_frame(read_cells([base, other]))
    return runs.iloc[[0]], runs.iloc[[1]]


def test_two_machines_or_two_versions_are_not_widened_by_their_ceilings_difference(tmp_path):
    """Another GPU, or another torch, has another ceiling: that is the comparison's result, not
    drift between two jobs, so a real 1.5x speed-up stays supported (no "(ns)")."""
    expected = stats.ratio_interval([1.5 * r for r in STEADY], STEADY)
    for name, options in [
        ("device", {"other_device": "NVIDIA A100-SXM4-80GB"}),
        ("torch", {"other_env": {"torch": "2.15.0"}}),
    ]:
        reference, other = _pair(tmp_path / name, 1.5, **options)
        assert ceiling_drift(reference, other) is None, name
        found = cells_speedup(reference, other)
        assert (found.ratio, found.low, found.high) == (expected.ratio, expected.low, expected.high)
        assert found.supported is True
        text = cells_speedup_text(reference, other)
        assert text == f"{expected.ratio:.2f}x [{expected.low:.2f}-{expected.high:.2f}]", name


def test_a_loader_comparison_on_one_setup_is_widened_by_its_ceilings_drift(tmp_path):
    reference, other = _pair(tmp_path, 1.5, loader=("pil", "cached"))
    assert ceiling_drift(reference, other) == math.log(2)  # 200 vs 400: the machine drifted 2x
    found = cells_speedup(reference, other)
    plain = stats.ratio_interval([1.5 * r for r in STEADY], STEADY)
    assert found.low == plain.low / 2 and found.high == plain.high * 2  # log margin log 2
    assert found.supported is False  # 2x drift swallows a 1.5x difference


def _frame(paths):
    return runs_frame(read_cells(paths))


def test_speedup_text_is_mean_reference_seconds_over_mean_other_seconds():
    assert speedup_text([100.0, 104.0, 96.0], [50.0, 52.0]) == "1.96x"  # 100 / 51, unequal n
    assert speedup_text([90.0], [30.0]) == f"3.00x {stats.UNTESTED_MARK}"
    assert speedup_text([90.0], [30.0], approx=True).startswith("~3.00x")
    assert speedup_text([], [30.0]) == "" and speedup_text([30.0], ["n/a"]) == ""


def test_an_extrapolated_single_seed_speedup_keeps_its_interval_and_its_mark(tmp_path):
    fast = [1.5 * r for r in STEADY]
    paths = [
        F.make_cell(tmp_path, precision=p, max_steps=3, train_img_s=100.0,
                    summary_extra={"train_block_img_s": b})
        for p, b in (("O0", STEADY), ("O1", fast))
    ]  # fmt: skip
    runs = _frame(paths)
    base, other = runs[runs["precision"] == "O0"], runs[runs["precision"] == "O1"]
    found = stats.ratio_interval(fast, STEADY)
    expected = f"~{found.ratio:.2f}x [{found.low:.2f}-{found.high:.2f}]"
    assert cells_speedup_text(base, other, approx=True) == expected
    (grid,) = speedup_grids(runs)
    assert grid.approx is True and grid.rows[0][1] == expected


def test_ceiling_drift_needs_one_finished_seed_a_side_and_positive_ceilings():
    def side(ceiling, n=1):
        return pd.DataFrame(
            {"status": ["ok"] * n, "ceiling_img_s": [ceiling] * n, "model": ["resnet18"] * n}
        )

    assert ceiling_drift(side(0.5), side(1.0)) == math.log(2)  # small rates are rates too
    assert ceiling_drift(side(0.5, n=2), side(1.0)) is None
    assert ceiling_drift(side(0.5), side(1.0, n=2)) is None
    assert ceiling_drift(side(0.0), side(1.0)) is None
    assert ceiling_drift(side(-1.0), side(1.0)) is None
    assert ceiling_drift(side(0.5).drop(columns="ceiling_img_s"), side(1.0)) is None


def test_speedup_grids_need_o0_and_another_precision_and_mark_only_what_applies(tmp_path):
    only_o0 = _frame([F.make_cell(tmp_path / "a", precision="O0")])
    assert speedup_grids(only_o0) == []
    no_o0 = _frame([F.make_cell(tmp_path / "b", precision=p) for p in ("O1", "O3")])
    assert speedup_grids(no_o0) == []
    runs = _frame(
        [
            F.make_cell(tmp_path / "c", precision="O0"),
            F.make_cell(tmp_path / "c", precision="O1"),
            F.make_cell(tmp_path / "c", precision="O3", status="oom"),
        ]
    )
    (grid,) = speedup_grids(runs)
    assert grid.approx is False and grid.not_ok is True and grid.rows[0][2] == "OOM"
    assert not grid.rows[0][1].startswith("~")
    # O0 out of memory, O1 extrapolated: no ratio, so nothing extrapolated is shown
    runs = _frame(
        [
            F.make_cell(tmp_path / "d", precision="O0", status="oom"),
            F.make_cell(tmp_path / "d", precision="O1", max_steps=3),
            F.make_cell(tmp_path / "d", model="resnet34", precision="O0"),
        ]
    )
    (grid,) = speedup_grids(runs)
    assert grid.approx is False and grid.not_ok is False
    assert [row[1] for row in grid.rows] == ["", ""]


def test_block_rates_and_ratio_text_read_what_runs_csv_holds():
    assert block_rates("not json") == [] and block_rates(None) == []
    assert block_rates("[1, 2.5]") == [1.0, 2.5] and block_rates([3, None]) == [3.0]
    assert ratio_text(stats.Ratio(None, None, None, None, None, None)) == ""
    untested = stats.Ratio(1.1, None, None, None, None, None)
    assert ratio_text(untested) == f"1.10x {stats.UNTESTED_MARK}"
    assert ratio_text(stats.Ratio(1.1, 1.04, 1.16, 9.0, 0.01, True)) == "1.10x [1.04-1.16]"
    noise = stats.Ratio(1.0, 0.9, 1.1, 9.0, 0.9, False)
    assert ratio_text(noise) == f"1.00x [0.90-1.10] {stats.NOT_SUPPORTED_MARK}"


def test_no_drift_between_cells_of_another_model_or_precision():
    def side(**values):
        row = {"status": "ok", "ceiling_img_s": 100.0, "model": "resnet18", "precision": "O0"}
        return pd.DataFrame([{**row, **values}])

    assert ceiling_drift(side(), side(ceiling_img_s=200.0)) == math.log(2)
    assert ceiling_drift(side(), side(ceiling_img_s=200.0, model="resnet50")) is None
    assert ceiling_drift(side(), side(ceiling_img_s=200.0, precision="O2")) is None


def test_speedup_text_reads_only_finite_values_of_any_sequence():
    assert speedup_text([10.0, None, "x", float("nan")], [5.0]) == f"2.00x {stats.UNTESTED_MARK}"
    assert speedup_text(pd.Series([10.0, 12.0]), pd.Series([5.0, 6.0])).startswith("2.00x")


def test_a_speedup_grid_is_titled_like_the_time_table_and_counts_its_seeds(tmp_path):
    paths = [F.make_cell(tmp_path, precision=p, seed=s) for p in ("O0", "O1") for s in (0, 1)]
    (grid,) = speedup_grids(_frame(paths))
    assert grid.title == f"{F.DATASET}, {F.STUDY_EPOCHS} epochs, cuda ({F.GPU_NAME})"
    assert grid.header == ["model", "O1"] and grid.seed_counts == [2, 2]
