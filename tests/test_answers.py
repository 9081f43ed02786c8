"""The front page's sentences (report/answers.py), each branch read as a reader reads it: a
difference stated only where the data support it, in the direction they show, with the ratio
computed here from the records (reference seconds over other seconds, or other's steady rate
over the reference's)."""

from __future__ import annotations

import pandas as pd
import record_factory as F

from nettebench.report import answers as A
from nettebench.report import stats
from nettebench.report.collect import read_cells, runs_frame

STEADY = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8, 100.1, 99.9]
WHERE = f"On a GPU ({F.GPU_NAME}), "


def _runs(paths):
    return runs_frame(read_cells(paths))


def _one_seed(root, precision, blocks):
    return F.make_cell(root, precision=precision, train_img_s=sum(blocks) / len(blocks),
                       summary_extra={"train_block_img_s": blocks})  # fmt: skip


def _seeds(root, precision, times):
    return [F.make_cell(root, precision=precision, seed=seed, time_for_epochs_s=t)
            for seed, t in enumerate(times)]  # fmt: skip


def _only(runs) -> str:
    (found,) = A.answer_sentences(runs)
    return found


def _within(other, reference=STEADY):
    return stats.ratio_interval(other, reference)


def test_one_seed_a_side_faster_says_faster_with_its_interval(tmp_path):
    fast = [1.5 * r for r in STEADY]
    found = _within(fast)
    text = _only(_runs([_one_seed(tmp_path, "O0", STEADY), _one_seed(tmp_path, "O1", fast)]))
    assert text == (
        f"{WHERE}O1 trains resnet18 {found.ratio:.2f}x faster than O0 (95 % interval "
        f"{found.low:.2f}-{found.high:.2f}x over their steady steps)."
    )
    assert found.ratio > 1.4


def test_one_seed_a_side_slower_says_slower(tmp_path):
    slow = [0.6 * r for r in STEADY]
    found = _within(slow)
    text = _only(_runs([_one_seed(tmp_path, "O0", STEADY), _one_seed(tmp_path, "O1", slow)]))
    assert text == (
        f"{WHERE}O1 trains resnet18 slower than O0: {found.ratio:.2f}x its speed (95 % "
        f"interval {found.low:.2f}-{found.high:.2f}x over their steady steps)."
    )
    assert "faster" not in text and found.ratio < 0.65


def test_one_seed_a_side_within_the_noise_is_not_a_difference(tmp_path):
    same = [r * (1 + (-1) ** i * 0.08) for i, r in enumerate(STEADY)]
    found = _within(same)
    text = _only(_runs([_one_seed(tmp_path, "O0", STEADY), _one_seed(tmp_path, "O1", same)]))
    assert text == (
        f"{WHERE}O1 and O0 train resnet18 at speeds the noise cannot tell apart: "
        f"{found.ratio:.2f}x (95 % interval {found.low:.2f}-{found.high:.2f}x over their steady "
        "steps, which holds 1)."
    )


def test_too_few_steps_for_an_interval_is_untested_not_a_difference(tmp_path):
    paths = [_one_seed(tmp_path, "O0", [100.0]), _one_seed(tmp_path, "O1", [150.0])]
    text = _only(_runs(paths))
    assert text == f"{WHERE}O1 against O0 on resnet18: 1.50x (too few steps for an interval)."


def test_one_seed_each_without_step_times_is_untested(tmp_path):
    paths = [*_seeds(tmp_path, "O0", [100.0]), *_seeds(tmp_path, "O1", [40.0])]
    text = _only(_runs(paths))
    assert (
        text
        == f"{WHERE}O1 against O0 on resnet18: 2.50x (one seed each and no step times: untested)."
    )
    assert "faster" not in text and "slower" not in text


def test_several_seeds_faster_is_reference_seconds_over_other_seconds(tmp_path):
    base, fast = [100.0, 102.0, 98.0], [50.0, 51.0, 49.0]
    tested = stats.welch(base, fast)
    text = _only(_runs([*_seeds(tmp_path, "O0", base), *_seeds(tmp_path, "O1", fast)]))
    assert text == (
        f"{WHERE}O1 trains resnet18 2.00x faster than O0 (Welch's t-test over 3 and 3 seeds, "
        f"p = {tested.p:.2g})."
    )


def test_several_seeds_slower(tmp_path):
    base, slow = [100.0, 102.0, 98.0], [200.0, 204.0, 196.0]
    tested = stats.welch(base, slow)
    text = _only(_runs([*_seeds(tmp_path, "O0", base), *_seeds(tmp_path, "O1", slow)]))
    assert text == (
        f"{WHERE}O1 trains resnet18 slower than O0: 0.50x its speed (Welch's t-test over 3 and "
        f"3 seeds, p = {tested.p:.2g})."
    )


def test_several_seeds_within_the_noise(tmp_path):
    base, other = [100.0, 110.0, 90.0], [98.0, 112.0, 92.0]  # means 100 and 100.67
    tested = stats.welch(base, other)
    text = _only(_runs([*_seeds(tmp_path, "O0", base), *_seeds(tmp_path, "O1", other)]))
    assert tested.supported is False
    assert text == (
        f"{WHERE}O1 and O0 train resnet18 at speeds the noise cannot tell apart: "
        f"{100 / (302 / 3):.2f}x (Welch's t-test over 3 and 3 seeds, p = {tested.p:.2g}, which "
        "holds 1)."
    )


def test_verdict_is_other_against_reference_and_none_without_a_finished_side(tmp_path):
    runs = _runs([*_seeds(tmp_path, "O0", [100.0, 90.0]), *_seeds(tmp_path, "O1", [50.0, 45.0])])
    base, other = runs[runs["precision"] == "O0"], runs[runs["precision"] == "O1"]
    ratio, how, supported, disturbed = A.verdict(base, other)
    assert ratio == 2.0 and supported is True and how.startswith("Welch's t-test over 2 and 2")
    assert disturbed is None  # records without conditions count as quiet
    assert A.verdict(other, base)[0] == 0.5  # the other way round: inverted
    assert A.verdict(base, other.iloc[0:0]) is None


def test_an_emulated_precision_says_so_first(tmp_path):
    env = {"cpu_capability": "AVX2", "bf16_native": False}
    paths = [
        F.make_cell(tmp_path, precision=p, device_type="cpu", env=env, time_for_epochs_s=t)
        for p, t in (("O0", 100.0), ("bf16", 400.0))
    ]
    text = _only(_runs(paths))
    assert text == (
        f"On a CPU ({F.CPU_MODEL}), bf16 is emulated: 0.25x O0 on resnet18 "
        "(one seed each and no step times: untested)."
    )


def test_a_loader_comparison_names_the_loaders_against_pil(tmp_path):
    fast = [1.2 * r for r in STEADY]
    paths = [
        F.make_cell(tmp_path, extra_cell={"loader": name}, train_img_s=sum(b) / len(b),
                    summary_extra={"train_block_img_s": b})
        for name, b in (("cached", fast), ("pil", STEADY))
    ]  # fmt: skip
    found = _within(fast)
    text = _only(_runs(paths))
    assert text.startswith(f"{WHERE}`cached` trains resnet18 {found.ratio:.2f}x faster than `pil`")


def test_without_pil_the_first_loader_is_the_reference(tmp_path):
    fast = [1.5 * r for r in STEADY]
    paths = [
        F.make_cell(tmp_path, extra_cell={"loader": name}, train_img_s=sum(b) / len(b),
                    summary_extra={"train_block_img_s": b})
        for name, b in (("cached", STEADY), ("streaming", fast))
    ]  # fmt: skip
    runs = _runs(paths)
    first, second = list(dict.fromkeys(runs["loader"]))
    text = _only(runs)
    assert f"`{second}` trains" in text and f"than `{first}`" in text


def test_a_loader_sentence_names_the_drift_its_ceilings_widened_it_by(tmp_path):
    fast = [1.1 * r for r in STEADY]
    paths = []
    for name, blocks, ceiling in (("pil", STEADY, 200.0), ("cached", fast, 224.0)):
        path = F.make_cell(tmp_path, extra_cell={"loader": name}, train_img_s=sum(blocks) / 10,
                           summary_extra={"train_block_img_s": blocks})  # fmt: skip
        F.make_ceiling(path, img_s=ceiling)
        paths.append(path)
    text = _only(_runs(paths))
    assert "over their steady steps, widened by the 12% their identical ceilings differed" in text
    assert "noise cannot tell apart" in text


def test_where_names_the_device_kind_and_its_models():
    def where(types, names):
        return A._where(pd.DataFrame({"device_type": types, "device_name": names}))

    assert where(["cuda"], ["NVIDIA H200"]) == "a GPU (NVIDIA H200)"
    assert where(["cpu", "cpu"], ["B", "A"]) == "a CPU (A; B)"
    assert where(["cuda"], [None]) == "a GPU"
    assert where(["cuda", "cpu"], ["H", "E"]) == "cpu, cuda (E; H)"  # mixed: the grid's title


def test_an_empty_study_has_no_sentences_and_labels_name_what_else_varies():
    assert A.answer_sentences(pd.DataFrame()) == []
    assert A._label({"model": "resnet18"}) == "resnet18"
    assert A._label({"model": "resnet18", "loader": "pil"}) == "resnet18 (loader pil)"


def test_pil_is_the_reference_wherever_it_sits_and_o0_is_never_compared_with_itself(tmp_path):
    fast = [1.5 * r for r in STEADY]
    paths = [
        F.make_cell(tmp_path, extra_cell={"loader": name}, train_img_s=sum(b) / len(b),
                    summary_extra={"train_block_img_s": b})
        for name, b in (("aaa", fast), ("pil", STEADY))
    ]  # fmt: skip
    runs = _runs(paths)
    assert list(dict.fromkeys(runs["loader"]))[0] == "aaa"  # pil is not first
    assert "`aaa` trains resnet18" in _only(runs) and "than `pil`" in _only(runs)
    precisions = [_one_seed(tmp_path / "p", p, STEADY) for p in ("O0", "O2")]
    assert _only(_runs(precisions)).startswith(f"{WHERE}O2 ")
