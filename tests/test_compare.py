"""Comparisons whose spread is the one between processes: a speed-up is the ratio of the two
cells' per-process steady rates with Welch's interval over their processes (seeds), one process
a side is never tested, and a table's verdicts are Holm-corrected as one family
(report/compare.py, report/stats.py, report/tables). Every expected number is computed here
from the raw per-process values, by hand, not by the functions under test."""

from __future__ import annotations

import math
import statistics

import pandas as pd
import record_factory as F

from nettebench.report import caveats as C
from nettebench.report import stats
from nettebench.report.aggregate import aggregate
from nettebench.report.compare import Family, speedup, speedup_grids
from nettebench.report.frames.runs import read_cells, runs_frame

STEADY = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8, 100.1, 99.9]
# Three processes a side, the same spread of logs on both sides (so Welch's degrees of freedom
# are exactly 2 (n - 1) = 4, whose 97.5 % t quantile the tables give as 2.776).
BASE_RATES = [96.0, 100.0, 104.0]
T_975_DF4 = 2.776


def _tables(tmp_path, paths):
    written = aggregate(paths, tmp_path / "tables")
    return pd.read_csv(written["runs"]), {n: p.read_text() for n, p in written.items()}


def _frame(paths):
    return runs_frame(read_cells(paths))


def _seeds(tmp_path, rates, *, precision="O0", loader=None, **options):
    """One record per process (seed) of a cell, each with its own steady rate."""
    extra = {"loader": loader} if loader else None
    return [
        F.make_cell(tmp_path, precision=precision, seed=seed, train_img_s=rate, extra_cell=extra,
                    summary_extra={"train_block_img_s": [rate] * 10}, **options)
        for seed, rate in enumerate(rates)
    ]  # fmt: skip


def _welch_by_hand(other, reference):
    """Ratio of geometric means and the 95 % interval for equal log spreads and n = 3 a side."""
    a, b = [math.log(x) for x in other], [math.log(x) for x in reference]
    assert math.isclose(statistics.stdev(a), statistics.stdev(b))
    se = math.sqrt(statistics.variance(a) / 3 + statistics.variance(b) / 3)
    diff = statistics.mean(a) - statistics.mean(b)
    return math.exp(diff), math.exp(diff - T_975_DF4 * se), math.exp(diff + T_975_DF4 * se)


def _speedups(text):
    return text["time_by_model_precision"].split("## Speed-up over O0")[1]


def test_a_speedup_is_the_ratio_of_process_rates_with_the_interval_between_processes(tmp_path):
    faster = [1.5 * r for r in BASE_RATES]
    paths = _seeds(tmp_path, BASE_RATES) + _seeds(tmp_path, faster, precision="O1")
    _, text = _tables(tmp_path, paths)
    ratio, low, high = _welch_by_hand(faster, BASE_RATES)
    assert f"{ratio:.2f}x [{low:.2f}-{high:.2f}] |" in _speedups(text)  # supported: no mark
    assert (
        "Holm's correction over the 1 tested; n=3 processes a side"
        in (text["time_by_model_precision"])
    )


def test_the_steps_of_one_process_never_make_a_verdict(tmp_path):
    """One process a side with tight steps (the old within-process interval called this 1.5x
    supported): now nothing is tested, and the table says so."""
    paths = [
        F.make_cell(tmp_path, precision=p, train_img_s=100.0 * k,
                    summary_extra={"train_block_img_s": [k * r for r in STEADY]})
        for p, k in (("O0", 1.0), ("O1", 1.5))
    ]  # fmt: skip
    runs, text = _tables(tmp_path, paths)
    assert f"1.50x {stats.UNTESTED_MARK}" in _speedups(text)
    frame = _frame(paths)
    found = speedup(frame[frame["precision"] == "O0"], frame[frame["precision"] == "O1"])
    assert found.p is None and found.supported is None and found.n == (1, 1)
    assert "one process a side, not tested" in found.how()


def test_records_without_a_steady_rate_are_compared_by_their_seconds(tmp_path):
    paths = [
        F.make_cell(tmp_path, precision=p, seed=s, time_for_epochs_s=t)
        for p, times in (("O0", (100.0, 104.0, 96.0)), ("O1", (50.0, 52.0, 48.0)))
        for s, t in enumerate(times)
    ]
    frame = _frame(paths)
    found = speedup(frame[frame["precision"] == "O0"], frame[frame["precision"] == "O1"])
    logs = [math.log(t) for t in (100.0, 104.0, 96.0)], [math.log(t) for t in (50.0, 52.0, 48.0)]
    assert math.isclose(found.ratio, math.exp(statistics.mean(logs[0]) - statistics.mean(logs[1])))
    assert found.n == (3, 3) and found.supported is True


def test_holm_adjusts_by_rank_and_keeps_the_running_maximum():
    # sorted 0.01, 0.03, 0.04: 3 x 0.01 = 0.03; 2 x 0.03 = 0.06; 1 x 0.04 = 0.04 -> max 0.06
    assert stats.holm([0.01, 0.04, 0.03]) == [0.03, 0.06, 0.06]
    assert stats.holm([0.5, 0.9]) == [1.0, 1.0]  # capped at 1
    assert stats.holm([]) == [] and stats.holm([0.02]) == [0.02]


def test_a_raw_difference_is_not_supported_once_the_family_is_corrected(tmp_path):
    """Three precisions against O0; one differs at p between 0.05 / 3 and 0.05: alone it would
    be supported, among the table's three comparisons it is not (Holm)."""
    rates = {"O1": [r * 1.12 for r in BASE_RATES], "O2": BASE_RATES, "O3": BASE_RATES[::-1]}
    paths = _seeds(tmp_path, BASE_RATES)
    for precision, values in rates.items():
        paths += _seeds(tmp_path / precision, values, precision=precision)
    frame = _frame(paths)
    base = frame[frame["precision"] == "O0"]
    alone = speedup(base, frame[frame["precision"] == "O1"])
    assert 0.05 / 3 < alone.p < 0.05 and alone.supported is True
    (grid,), family = speedup_grids(frame)
    assert family.size == 3
    ratio, low, high = _welch_by_hand(rates["O1"], BASE_RATES)
    assert low > 1  # the raw interval excludes 1 ...
    assert grid.rows[0][1] == f"{ratio:.2f}x [{low:.2f}-{high:.2f}] {stats.NOT_SUPPORTED_MARK}"
    member = family.members[0]  # the smallest p of the three: multiplied by 3
    assert member.p == min(m.p for m in family.members)
    assert math.isclose(member.p_corrected, 3 * member.p) and member.p_corrected >= 0.05


def test_the_comparisons_csv_keeps_the_raw_and_the_corrected_p(tmp_path):
    paths = _seeds(tmp_path, BASE_RATES, loader="pil", device_type="cpu")
    paths += _seeds(tmp_path / "c", [1.12 * r for r in BASE_RATES], loader="cached",
                    device_type="cpu")  # fmt: skip
    paths += _seeds(tmp_path / "b", BASE_RATES, loader="pil", precision="bf16", device_type="cpu")
    _, text = _tables(tmp_path, paths)
    csv = pd.read_csv(tmp_path / "tables" / "comparisons.csv")
    assert list(csv["family_size"]) == [2, 2]
    cached, bf16 = (csv[csv["compared"] == name].iloc[0] for name in ("cached", "bf16"))
    assert cached["p"] < bf16["p"]  # the smaller p of two is multiplied by 2
    assert math.isclose(cached["p_holm"], 2 * cached["p"])
    assert cached["p"] < 0.05 <= cached["p_holm"] and not cached["supported"]
    assert "Holm-corrected" in text["comparisons"] and "| 3 / 3 |" in text["comparisons"]


def test_the_front_page_answers_in_words_only_what_the_processes_support(tmp_path):
    emulated = {"cpu_capability": "AVX2", "bf16_native": False}
    cached = [2.0 * r for r in BASE_RATES]
    paths = _seeds(tmp_path, BASE_RATES, loader="pil", device_type="cpu", env=emulated)
    paths += _seeds(tmp_path / "c", cached, loader="cached", device_type="cpu", env=emulated)
    paths += _seeds(tmp_path / "b", [0.18 * r for r in BASE_RATES], precision="bf16",
                    loader="pil", device_type="cpu", env=emulated)  # fmt: skip
    _, text = _tables(tmp_path, paths)
    front = text["headline"]
    ratio, low, high = _welch_by_hand(cached, BASE_RATES)
    assert (
        f"On a CPU ({F.CPU_MODEL}), <code>cached</code> trains resnet18 (precision O0) "
        f"{ratio:.2f}x faster than <code>pil</code> (95 % interval {low:.2f}-{high:.2f}x "
        "between 3 and 3 processes"
    ) in front
    assert "Holm-corrected" in front
    assert f"On a CPU ({F.CPU_MODEL}), bf16 is emulated: 0.18x O0 on resnet18 (loader pil)" in front
    assert front.index('<p class="answer">') < front.index('<p class="caveats">')


def test_a_difference_within_the_spread_between_processes_is_not_stated_as_one(tmp_path):
    paths = _seeds(tmp_path, BASE_RATES, loader="pil", device_type="cpu")
    paths += _seeds(tmp_path / "c", BASE_RATES[::-1], loader="cached", device_type="cpu")
    _, text = _tables(tmp_path, paths)
    assert "faster than" not in text["headline"] and "slower than" not in text["headline"]
    assert "at speeds their processes cannot tell apart" in text["headline"]


def test_an_extrapolated_speedup_keeps_its_interval_and_its_mark(tmp_path):
    fast = [1.5 * r for r in BASE_RATES]
    paths = _seeds(tmp_path, BASE_RATES, max_steps=3) + _seeds(
        tmp_path / "o1", fast, precision="O1", max_steps=3
    )
    runs = _frame(paths)
    base, other = runs[runs["precision"] == "O0"], runs[runs["precision"] == "O1"]
    ratio, low, high = _welch_by_hand(fast, BASE_RATES)
    expected = f"~{ratio:.2f}x [{low:.2f}-{high:.2f}]"
    assert speedup(base, other, approx=True, family=Family()).text() == expected
    (grid,), _ = speedup_grids(runs)
    assert grid.approx is True and grid.rows[0][1] == expected


def test_speedup_grids_need_o0_and_another_precision_and_mark_only_what_applies(tmp_path):
    only_o0 = _frame([F.make_cell(tmp_path / "a", precision="O0")])
    assert speedup_grids(only_o0)[0] == []
    no_o0 = _frame([F.make_cell(tmp_path / "b", precision=p) for p in ("O1", "O3")])
    assert speedup_grids(no_o0)[0] == []
    runs = _frame(
        [
            F.make_cell(tmp_path / "c", precision="O0"),
            F.make_cell(tmp_path / "c", precision="O1"),
            F.make_cell(tmp_path / "c", precision="O3", status="oom"),
        ]
    )
    (grid,), _ = speedup_grids(runs)
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
    (grid,), _ = speedup_grids(runs)
    assert grid.approx is False and grid.not_ok is False
    assert [row[1] for row in grid.rows] == ["", ""]


def test_a_speedup_grid_is_titled_like_the_time_table_and_counts_its_processes(tmp_path):
    paths = [F.make_cell(tmp_path, precision=p, seed=s) for p in ("O0", "O1") for s in (0, 1)]
    (grid,), family = speedup_grids(_frame(paths))
    assert grid.title == f"{F.DATASET}, {F.STUDY_EPOCHS} epochs, cuda ({F.GPU_NAME})"
    assert grid.header == ["model", "O1"] and grid.seed_counts == [2, 2]
    assert family.members[0].n == (2, 2)


def test_a_cells_img_s_shows_its_interval_and_an_unstable_cell_its_cause(tmp_path):
    why = "unstable: its 42 steady steps spread 14% (sd / mean >= 10%); timed under interference"
    paths = [
        F.make_cell(tmp_path, precision="O0", train_img_s=100.0,
                    summary_extra={"train_img_s_low": 96.4, "train_img_s_high": 103.6}),
        F.make_cell(tmp_path, precision="O1", train_img_s=100.0,
                    summary_extra={"train_img_s_low": 90.0, "train_img_s_high": 110.0,
                                   "unstable": why}),
    ]  # fmt: skip
    _, text = _tables(tmp_path, paths)
    rates = text["throughput"].split("## Training throughput")[1].split("## Time waiting")[0]
    assert "| 100 [96-104] |" in rates
    assert f"100 [90-110]{C.UNSTABLE_MARK} |" in rates
    assert f"{C.UNSTABLE_MARK} unstable" in rates and "holds: resnet18 O1 (" in rates
    # the cause is in the cell's row of the timing conditions table, not under the table
    assert why not in rates
    (row,) = [line for line in text["timing_conditions"].splitlines() if why in line]
    assert row.startswith("| resnet18 O1 | epochs |") and f"| {C.UNSTABLE_MARK} {why} |" in row
