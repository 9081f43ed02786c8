"""The front page's sentences (report/answers.py), each branch read as a reader reads it: a
difference stated only where the processes support it (Welch's test between one steady rate per
process, Holm-corrected over the front page's comparisons), in the direction they show; one
process a side is never tested. Every expected number is computed here from the raw
per-process values (other's rates over the reference's, or the reference's seconds over
other's where a record has no steady rate), by hand, not by the functions under test."""

from __future__ import annotations

import math
import statistics

import pandas as pd
import record_factory as F

from nettebench.report import answers as A
from nettebench.report.compare import Family, speedup
from nettebench.report.frames.runs import read_cells, runs_frame
from nettebench.report.grids import device_title

STEADY = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8, 100.1, 99.9]
# Three processes a side, the same spread of logs on both sides: Welch's degrees of freedom are
# exactly 2 (n - 1), whose 97.5 % t quantiles the tables give as 4.303 (df 2) and 2.776 (df 4).
BASE = [96.0, 100.0, 104.0]
T_975 = {2: 4.303, 4: 2.776}
WHERE = f"On a GPU ({F.GPU_NAME}), "


def _runs(paths):
    return runs_frame(read_cells(paths))


def _rates(root, rates, *, precision="O0", loader=None, **options):
    """One record per process (seed) of a cell, each with its own steady rate."""
    extra = {"loader": loader} if loader else None
    return [
        F.make_cell(root, precision=precision, seed=seed, train_img_s=rate, extra_cell=extra,
                    **options)
        for seed, rate in enumerate(rates)
    ]  # fmt: skip


def _seconds(root, times, *, precision="O0", **options):
    """One record per process with its seconds for the epochs and no steady rate (a record
    written before the rate was kept)."""
    return [
        F.make_cell(root, precision=precision, seed=seed, time_for_epochs_s=t,
                    summary_extra={"train_img_s": None}, **options)
        for seed, t in enumerate(times)
    ]  # fmt: skip


def _t_p(t, df):
    """Student's two-sided p in closed form: 1 - |t| / sqrt(2 + t^2) for df 2, and
    1 - 3x/2 + x^3/2 with x = |t| / sqrt(4 + t^2) for df 4."""
    if df == 2:
        return 1 - abs(t) / math.sqrt(2 + t * t)
    x = abs(t) / math.sqrt(4 + t * t)
    return 1 - 1.5 * x + 0.5 * x**3


def _welch_by_hand(faster, slower):
    """``faster`` over ``slower`` (rates: other over reference; seconds: reference over other)
    as the ratio of geometric means, its 95 % interval and Welch's p on the logs, for n a side
    with equal log spreads (df = 2 (n - 1))."""
    a, b = [math.log(x) for x in faster], [math.log(x) for x in slower]
    n = len(a)
    assert len(b) == n and math.isclose(statistics.stdev(a), statistics.stdev(b))
    df = 2 * (n - 1)
    se = math.sqrt(statistics.variance(a) / n + statistics.variance(b) / n)
    diff = statistics.mean(a) - statistics.mean(b)
    half = T_975[df] * se
    return math.exp(diff), math.exp(diff - half), math.exp(diff + half), _t_p(diff / se, df)


def _how(faster, slower, digits=2):
    _, low, high, p = _welch_by_hand(faster, slower)
    n = len(faster)
    ends = f"{low:.{digits}f}-{high:.{digits}f}"
    return f"95 % interval {ends}x between {n} and {n} processes, Welch's p = {p:.2g}"


def _only(runs) -> str:
    (found,) = A.answer_sentences(runs)
    return found


def test_three_processes_a_side_faster_says_faster_with_the_interval_between_them(tmp_path):
    fast = [1.5 * r for r in BASE]
    ratio, low, _, p = _welch_by_hand(fast, BASE)
    text = _only(_runs(_rates(tmp_path, BASE) + _rates(tmp_path, fast, precision="O1")))
    assert text == f"{WHERE}O1 trains resnet18 {ratio:.2f}x faster than O0 ({_how(fast, BASE)})."
    assert ratio > 1.4 and low > 1 and p < 0.05
    assert "Holm" not in text  # a family of one: nothing to correct


def test_three_processes_a_side_slower_says_slower(tmp_path):
    slow = [0.6 * r for r in BASE]
    ratio, _, high, _ = _welch_by_hand(slow, BASE)
    text = _only(_runs(_rates(tmp_path, BASE) + _rates(tmp_path, slow, precision="O1")))
    assert text == (
        f"{WHERE}O1 trains resnet18 slower than O0: {ratio:.2f}x its speed ({_how(slow, BASE)})."
    )
    assert "faster" not in text and ratio < 0.65 and high < 1


def test_a_difference_within_the_spread_between_processes_is_not_one(tmp_path):
    same = [1.02 * r for r in BASE[::-1]]
    ratio, low, high, p = _welch_by_hand(same, BASE)
    text = _only(_runs(_rates(tmp_path, BASE) + _rates(tmp_path, same, precision="O1")))
    assert low < 1 < high and p >= 0.05
    assert text == (
        f"{WHERE}O1 and O0 train resnet18 at speeds their processes cannot tell apart: "
        f"{ratio:.2f}x ({_how(same, BASE)})."
    )


def test_the_tight_steps_of_one_process_a_side_no_longer_make_a_verdict(tmp_path):
    """One process a side whose steady steps spread 1 % (the old interval over the steps of one
    process called this 1.50x faster): one process a side is not tested."""
    paths = [
        F.make_cell(tmp_path, precision=p, train_img_s=sum(blocks) / len(blocks),
                    summary_extra={"train_block_img_s": blocks})
        for p, blocks in (("O0", STEADY), ("O1", [1.5 * r for r in STEADY]))
    ]  # fmt: skip
    text = _only(_runs(paths))
    assert text == (
        f"{WHERE}O1 against O0 on resnet18: 1.50x (n=1 and 1 processes: one process a side, "
        "not tested)."
    )
    assert "faster" not in text and "interval" not in text


def test_one_process_on_one_side_is_untested_whatever_the_other_has(tmp_path):
    fast = [1.5 * r for r in BASE]
    geomean = math.exp(statistics.mean(math.log(r) for r in fast))
    text = _only(_runs(_rates(tmp_path, [100.0]) + _rates(tmp_path, fast, precision="O1")))
    assert text == (
        f"{WHERE}O1 against O0 on resnet18: {geomean / 100.0:.2f}x (n=1 and 3 processes: one "
        "process a side, not tested)."
    )


def test_one_process_each_without_steady_rates_is_untested(tmp_path):
    paths = [*_seconds(tmp_path, [100.0]), *_seconds(tmp_path, [40.0], precision="O1")]
    text = _only(_runs(paths))
    assert text == (
        f"{WHERE}O1 against O0 on resnet18: 2.50x (n=1 and 1 processes: one process a side, "
        "not tested)."
    )
    assert "faster" not in text and "slower" not in text


def test_processes_without_steady_rates_faster_is_reference_seconds_over_other_seconds(tmp_path):
    base, fast = [100.0, 102.0, 98.0], [50.0, 51.0, 49.0]
    ratio, low, _, _ = _welch_by_hand(base, fast)  # seconds: the reference's over other's
    text = _only(_runs([*_seconds(tmp_path, base), *_seconds(tmp_path, fast, precision="O1")]))
    assert math.isclose(ratio, 2.0) and low > 1
    assert text == f"{WHERE}O1 trains resnet18 2.00x faster than O0 ({_how(base, fast)})."


def test_processes_without_steady_rates_slower(tmp_path):
    base, slow = [100.0, 102.0, 98.0], [200.0, 204.0, 196.0]
    ratio, _, high, _ = _welch_by_hand(base, slow)
    text = _only(_runs([*_seconds(tmp_path, base), *_seconds(tmp_path, slow, precision="O1")]))
    assert math.isclose(ratio, 0.5) and high < 1
    assert text == (
        f"{WHERE}O1 trains resnet18 slower than O0: 0.50x its speed ({_how(base, slow)})."
    )


def test_processes_without_steady_rates_within_their_spread(tmp_path):
    base = [100.0, 110.0, 90.0]
    other = [1.01 * t for t in base[::-1]]
    ratio, low, high, _ = _welch_by_hand(base, other)
    text = _only(_runs([*_seconds(tmp_path, base), *_seconds(tmp_path, other, precision="O1")]))
    assert low < 1 < high and math.isclose(ratio, 1 / 1.01)
    assert text == (
        f"{WHERE}O1 and O0 train resnet18 at speeds their processes cannot tell apart: "
        f"{ratio:.2f}x ({_how(base, other)})."
    )


def test_the_front_page_corrects_its_verdicts_as_one_family(tmp_path):
    """cached 1.10x and O1 1.11x pil O0: each alone would be supported (0.025 < p < 0.05),
    but the front page states both, and Holm over the two (the smaller p times 2, the larger
    times 1, the running maximum kept) leaves neither below 0.05."""
    cached, o1 = [1.10 * r for r in BASE], [1.11 * r for r in BASE]
    paths = _rates(tmp_path, BASE, loader="pil") + _rates(tmp_path, cached, loader="cached")
    paths += _rates(tmp_path, o1, loader="pil", precision="O1")
    r_cached, low_cached, _, p_cached = _welch_by_hand(cached, BASE)
    r_o1, _, _, p_o1 = _welch_by_hand(o1, BASE)
    assert 0.025 < p_o1 < p_cached < 0.05
    # cached's interval starts just above 1: at two decimals it would print as 1.00 and read as
    # holding 1, so its ends are printed with a third
    assert round(low_cached, 2) == 1.0 < round(low_cached, 3)
    holm = max(2 * p_o1, p_cached)  # both end at 2 x the smaller p, above 0.05
    assert holm >= 0.05
    loader, precision = A.answer_sentences(_runs(paths))
    assert loader == (
        f"{WHERE}`cached` and `pil` train resnet18 (precision O0) at speeds their processes "
        f"cannot tell apart: {r_cached:.2f}x ({_how(cached, BASE, 3)}, Holm-corrected "
        f"{holm:.2g} over 2)."
    )
    assert precision == (
        f"{WHERE}O1 and O0 train resnet18 (loader pil) at speeds their processes cannot tell "
        f"apart: {r_o1:.2f}x ({_how(o1, BASE)}, Holm-corrected {holm:.2g} over 2)."
    )


def test_verdict_is_other_against_reference_and_none_without_a_finished_side(tmp_path):
    base, fast = [100.0, 90.0], [50.0, 45.0]  # seconds, two processes a side: df 2
    runs = _runs([*_seconds(tmp_path, base), *_seconds(tmp_path, fast, precision="O1")])
    reference, other = runs[runs["precision"] == "O0"], runs[runs["precision"] == "O1"]
    family = Family()
    found = speedup(reference, other, family=family)
    ratio, low, high, p = _welch_by_hand(base, fast)
    assert math.isclose(found.ratio, ratio) and math.isclose(ratio, 2.0)
    assert found.supported is True and p < 0.05 and low > 1
    assert found.how() == (
        f"95 % interval {low:.2f}-{high:.2f}x between 2 and 2 processes, Welch's p = {p:.2g}"
    )
    assert found.disturbed is None  # records without conditions count as quiet
    assert family.members == [found] and found.n == (2, 2)
    assert math.isclose(speedup(other, reference).ratio, 0.5)  # the other way round: inverted
    assert speedup(reference, other.iloc[0:0]) is None


def test_an_emulated_precision_says_so_first(tmp_path):
    env = {"cpu_capability": "AVX2", "bf16_native": False}
    slow = [0.25 * r for r in BASE]
    paths = _rates(tmp_path, BASE, device_type="cpu", env=env)
    paths += _rates(tmp_path, slow, precision="bf16", device_type="cpu", env=env)
    ratio, _, high, _ = _welch_by_hand(slow, BASE)
    text = _only(_runs(paths))
    assert high < 1  # a supported difference, but an emulated one is not stated as slower
    assert text == (
        f"On a CPU ({F.CPU_MODEL}), bf16 is emulated: {ratio:.2f}x O0 on resnet18 "
        f"({_how(slow, BASE)})."
    )


def test_a_loader_comparison_names_the_loaders_against_pil(tmp_path):
    fast = [1.2 * r for r in BASE]
    paths = _rates(tmp_path, fast, loader="cached") + _rates(tmp_path, BASE, loader="pil")
    ratio, *_ = _welch_by_hand(fast, BASE)
    text = _only(_runs(paths))
    assert (
        text
        == f"{WHERE}`cached` trains resnet18 {ratio:.2f}x faster than `pil` ({_how(fast, BASE)})."
    )


def test_without_pil_the_first_loader_is_the_reference(tmp_path):
    fast = [1.5 * r for r in BASE]
    paths = _rates(tmp_path, BASE, loader="cached") + _rates(tmp_path, fast, loader="streaming")
    runs = _runs(paths)
    first, second = list(dict.fromkeys(runs["loader"]))
    ratio, *_ = _welch_by_hand(fast, BASE)
    assert (first, second) == ("cached", "streaming")
    assert _only(runs).startswith(
        f"{WHERE}`{second}` trains resnet18 {ratio:.2f}x faster than `{first}`"
    )


def test_identical_ceilings_that_differ_no_longer_widen_or_decide_a_verdict(tmp_path):
    """pil's and cached's ceilings (the same model) differ by 12 %, which once widened the
    interval until it held 1; the verdict is now the processes' alone."""
    fast = [1.2 * r for r in BASE]
    paths = []
    for name, rates, ceiling in (("pil", BASE, 200.0), ("cached", fast, 224.0)):
        for path in _rates(tmp_path, rates, loader=name):
            F.make_ceiling(path, img_s=ceiling)
            paths.append(path)
    ratio, low, _, _ = _welch_by_hand(fast, BASE)
    text = _only(_runs(paths))
    assert low > 1
    assert (
        text
        == f"{WHERE}`cached` trains resnet18 {ratio:.2f}x faster than `pil` ({_how(fast, BASE)})."
    )
    assert "widened" not in text and "ceiling" not in text


def test_where_names_the_device_kind_and_its_models():
    def where(types, names):
        frame = pd.DataFrame({"device_type": types, "device_name": names})
        return device_title(frame, spoken=True)

    assert where(["cuda"], ["NVIDIA H200"]) == "a GPU (NVIDIA H200)"
    assert where(["cpu", "cpu"], ["B", "A"]) == "a CPU (A; B)"
    assert where(["cuda"], [None]) == "a GPU"
    assert where(["cuda", "cpu"], ["H", "E"]) == "cpu, cuda (E; H)"  # mixed: the grid's title


def test_an_empty_study_has_no_sentences_and_labels_name_what_else_varies():
    assert A.answer_sentences(pd.DataFrame()) == []
    assert A._label({"model": "resnet18"}) == "resnet18"
    assert A._label({"model": "resnet18", "loader": "pil"}) == "resnet18 (loader pil)"


def test_pil_is_the_reference_wherever_it_sits_and_o0_is_never_compared_with_itself(tmp_path):
    fast = [1.5 * r for r in BASE]
    paths = _rates(tmp_path, fast, loader="aaa") + _rates(tmp_path, BASE, loader="pil")
    runs = _runs(paths)
    assert list(dict.fromkeys(runs["loader"]))[0] == "aaa"  # pil is not first
    assert "`aaa` trains resnet18" in _only(runs) and "than `pil`" in _only(runs)
    precisions = _rates(tmp_path / "p", BASE) + _rates(tmp_path / "p", fast, precision="O2")
    assert _only(_runs(precisions)).startswith(f"{WHERE}O2 trains resnet18 ")
