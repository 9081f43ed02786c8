"""The variance benchmark's computation (tests/bench_variance.py): the records it reads, the
Kalibera-Jones components, the replicate counts and the command it takes from Snakemake's dry
run. No process is started."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests import bench_variance as B

EPOCHS_CSV = "epoch,train_loss,step_ms\n1,2.3,100.0 110.0\n2,2.1,90.0 100.0 100.0\n"

DRY_RUN = (
    "rule cell_train:\n"
    "Shell command: exec python -m nettebench benchmarks cell-job --ceiling r/O0/ceiling.json"
    " --weights r/O0/weights.pt --kind matrix --data d.json --out-dir r/O0 --threads 2"
    " --dataset q --model resnet18 --precision O0 --batch-size 32 --seed 0"
    " --depends-on d.json > results/logs/x.log 2>&1\n"
    "Shell command: exec python -m nettebench benchmarks cell-job --ceiling r/bf/ceiling.json"
    " --weights r/bf/weights.pt --kind matrix --data d.json --out-dir r/bf --threads 2"
    " --precision bf16 --max-steps 4 > results/logs/y.log 2>&1\n"
    "Shell command: exec python -m nettebench benchmarks cell-job --ceiling r/c/ceiling.json"
    " --weights r/c/weights.pt --kind matrix --data d.json --out-dir r/c --threads 2"
    " --store s/res~37 --precision O0 --loader cached > results/logs/z.log 2>&1\n"
)


def _process(rate, blocks, interference=False):
    return {
        "train_img_s": rate,
        "block_img_s": blocks,
        "block_geomean_img_s": math.exp(sum(map(math.log, blocks)) / len(blocks)),
        "step_cv": 0.05,
        "block_cv": B.cv(blocks),
        "interference": interference,
    }


def test_steps_and_one_process_from_its_records():
    steps = B.steady_steps(EPOCHS_CSV)
    assert steps == [100.0, 110.0, 90.0, 100.0, 100.0]
    metrics = {
        "status": "ok",
        "summary": {"train_img_s": 320.0, "train_block_img_s": [300.0, 330.0, 315.0]},
        "conditions": {
            "interference": True,
            "interference_reasons": ["others"],
            "loadavg_start": 1,
        },
    }
    found = B.process_numbers(metrics, steps)
    assert found["train_img_s"] == 320.0 and found["interference"] is True
    assert found["steps"] == 5 and found["step_cv"] == pytest.approx(0.0707, abs=1e-4)
    assert found["block_geomean_img_s"] == pytest.approx((300 * 330 * 315) ** (1 / 3))
    assert B.cv([1.0]) is None


def test_components_split_within_from_between():
    # two processes, two blocks each: ln blocks (0, 0.2) and (0.1, 0.3)
    processes = [
        _process(100.0, [1.0, math.exp(0.2)]),
        _process(110.0, [math.exp(0.1), math.exp(0.3)], interference=True),
    ]
    found = B.spread(processes)
    c = found["components"]
    assert c["s1_sq"] == pytest.approx(0.02)  # each process: variance of (0, 0.2) = 0.02
    assert c["s2_sq"] == pytest.approx(0.005)  # means 0.1 and 0.2
    assert c["t2_sq"] == 0.0  # 0.005 - 0.02 / 2 < 0: nothing left between processes
    assert found["between"]["train_img_s_cv"] == pytest.approx(math.sqrt(50) / 105)
    assert found["under_interference"] == 1
    assert B.spread(processes[:1]) == {"processes": 1}


def test_replicates_from_the_between_process_spread():
    # r = 2, df 2: t(0.975, 2) = 4.303; half = 4.303 * sqrt(2 / 2) * 0.05
    assert B.half_width(0.05, 2, 2) == pytest.approx(math.exp(4.3027 * 0.05) - 1, abs=1e-4)
    needed = B.replicates_needed(0.05, 0.10)
    assert B.half_width(0.05, needed, 2 * (needed - 1)) <= 0.10
    assert B.half_width(0.05, needed - 1, 2 * (needed - 2)) > 0.10
    assert B.replicates_needed(0.05, 0.10, lambda r: r - 1) >= needed
    assert B.detectable_ratio(0.05, 2) > B.detectable_ratio(0.05, 3) > B.detectable_ratio(0.05, 5)
    # r = 5, df 8: t(0.975) 2.306 + t(0.80) 0.889
    assert B.detectable_ratio(0.05, 5) == pytest.approx(
        math.exp(3.195 * math.sqrt(0.4) * 0.05), 1e-3
    )


def test_welch_ratio_and_between_runs():
    found = B.welch_ratio([100.0, 110.0, 105.0], [200.0, 220.0, 210.0])
    assert found["ratio"] == pytest.approx(2.0) and found["low"] < 2.0 < found["high"]
    assert found["p"] < 0.001
    same = B.between_runs([100.0, 110.0], [110.0, 100.0])
    assert same["ratio"] == pytest.approx(1.0) and same["s3_sq"] == pytest.approx(0.0)
    assert B.welch_ratio([100.0], [100.0, 101.0]) is None


def test_the_O0_commands_come_from_the_dry_run():
    commands = B.cell_commands(DRY_RUN)
    assert sorted(commands) == ["cached", "pil"]
    assert commands["pil"][:2] == ["benchmarks", "cell-job"] and ">" not in commands["pil"]
    moved = B._with_out_dir(commands["cached"], Path("/o/1"))
    option = dict(zip(moved, moved[1:], strict=False))
    assert option["--out-dir"] == "/o/1" and option["--ceiling"] == "/o/1/ceiling.json"
    assert option["--weights"] == "/o/1/weights.pt" and option["--store"] == "s/res~37"


def test_analysis_pools_the_loaders_and_sets_disturbed_processes_apart():
    def loader(rates, disturbed=0):
        return [
            {**_process(rate, [rate * 0.95, rate * 1.05]), "interference": i < disturbed}
            for i, rate in enumerate(rates)
        ]

    processes = {
        "pil": loader([150.0, 250.0, 260.0, 240.0], disturbed=1),
        "cached": loader([500.0, 520.0, 480.0, 510.0]),
    }
    found = B.analyse(processes)
    assert found["pil"]["quiet_only"]["processes"] == 3 and "quiet_only" not in found["cached"]
    pooled = found["pooled"]
    assert pooled["quiet_only"]["log_sd"] < pooled["all"]["log_sd"]
    assert found["cached_over_pil"]["quiet_only"]["ratio"] == pytest.approx(2.0, rel=0.05)
    assert found["cached_over_pil"]["quiet_only"]["low"] > 1.5
