"""The trainer as a plain module: records, out-of-memory and unsupported modes as results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pandas as pd
import pytest
import torch
from PIL import Image

from nettebench.records import files as records
from nettebench.training.cli import run_cell
from nettebench.training.step import TrainingStep
from nettebench.vocabulary import outputs
from nettebench.vocabulary.cell import CellSpec
from nettebench.vocabulary.record_keys import (
    EPOCH_COLUMNS,
    METRICS_KEYS,
    OPTIONAL_METRICS_KEYS,
    SUMMARY_KEYS,
)


@pytest.fixture(scope="module")
def tiny_tree(tmp_path_factory):
    """A 3-class ImageFolder tree of small solid-colour JPEGs."""
    root = tmp_path_factory.mktemp("tiny")
    colours = [(200, 30, 30), (30, 200, 30), (30, 30, 200)]
    for split, count in (("train", 8), ("val", 4)):
        for index, colour in enumerate(colours):
            folder = root / split / f"class{index}"
            folder.mkdir(parents=True)
            for i in range(count):
                Image.new("RGB", (40, 36), colour).save(folder / f"{i}.JPEG")
    return root


def small_cell(**overrides):
    values = dict(
        dataset="tiny", model="resnet18", batch_size=6, epochs=2, image_size=32, workers=0
    )
    return CellSpec(**{**values, **overrides})


def test_cli_writes_a_complete_record(tiny_tree, tmp_path):
    cell = small_cell()
    out = tmp_path / "cell"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "nettebench",
            "training",
            "--data",
            str(tiny_tree),
            "--out-dir",
            str(out),
            "--threads",
            "1",
            *cell.cli_args(),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "epoch 2/2" in done.stderr  # one readable line per epoch in a log
    assert "\r" not in done.stderr  # no progress bar when stderr is not a terminal
    record = records.read_metrics(out / outputs.METRICS_FILE)
    assert list(record) == [*METRICS_KEYS, *OPTIONAL_METRICS_KEYS]
    assert set(record["summary"]) == set(SUMMARY_KEYS)
    assert record["status"] == "ok"
    assert record["cell"] == cell.as_dict()
    assert record["cell_id"] == cell.cell_id()
    assert record["device"] == {"type": "cpu", "name": record["device"]["name"], "threads": 1}
    summary = record["summary"]
    assert summary["epochs_run"] == 2 and summary["steps_per_epoch"] == 4
    assert summary["wall_s"] > summary["time_for_epochs_s"] > 0
    assert 0 <= summary["data_wait_share"] <= 1
    env = record["environment"]
    assert env["torch"] == torch.__version__ and env["cpu_count"] >= 1
    epochs = pd.read_csv(out / outputs.EPOCHS_FILE)
    assert list(epochs.columns) == list(EPOCH_COLUMNS)
    assert list(epochs["epoch"]) == [1, 2]
    assert (epochs["compute_s"] + epochs["data_wait_s"]).round(6).equals(epochs["train_s"].round(6))


def test_max_steps_extrapolates_and_says_so(tiny_tree, tmp_path):
    record = run_cell(small_cell(batch_size=2, epochs=1, max_steps=3), tiny_tree, tmp_path)
    summary = record["summary"]
    assert summary["extrapolated"] is True
    assert summary["steps_timed"] == 3 and summary["steps_per_epoch"] == 12
    epochs = pd.read_csv(tmp_path / outputs.EPOCHS_FILE)
    assert bool(epochs["extrapolated"].iloc[0]) is True


def test_out_of_memory_is_a_recorded_result(tiny_tree, tmp_path, monkeypatch):
    """Simulate the allocator failing on the first step: the cell is `oom`, not a crash."""

    def fail(self, images, targets):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 392.00 MiB")

    monkeypatch.setattr(TrainingStep, "step", fail)
    record = run_cell(small_cell(batch_size=4), tiny_tree, tmp_path)
    assert record["status"] == "oom"
    assert "batch size 4" in record["message"] and "392.00 MiB" in record["message"]
    assert "e.g. 2" in record["message"]
    on_disk = json.loads((tmp_path / outputs.METRICS_FILE).read_text())
    assert on_disk["status"] == "oom" and on_disk["summary"]["final_top1"] is None


def test_a_mode_the_device_cannot_run_is_recorded_unsupported(tiny_tree, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("checks the CPU path")
    record = run_cell(small_cell(precision="O1"), tiny_tree, tmp_path)
    assert record["status"] == "unsupported"
    assert "float16 training needs CUDA" in record["message"]
    assert not (tmp_path / outputs.EPOCHS_FILE).read_text().strip().count("\n")


def test_batch_size_auto_halves_until_a_step_fits(tiny_tree, tmp_path, monkeypatch):
    """Simulate a card on which only 16 images fit: auto settles on 16 and records it (the
    tree's 24 training images hold one full batch of 16)."""
    real_step = TrainingStep.step

    def step(self, images, targets):
        if images.shape[0] > 16:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
        return real_step(self, images, targets)

    monkeypatch.setattr(TrainingStep, "step", step)
    record = run_cell(small_cell(batch_size="auto", epochs=1), tiny_tree, tmp_path)
    assert record["status"] == "ok"
    assert record["cell"]["batch_size"] == "auto"
    assert record["summary"]["batch_size_used"] == 16


def test_summary_separates_first_epoch_overhead(tiny_tree, tmp_path):
    record = run_cell(small_cell(epochs=3), tiny_tree, tmp_path)
    summary = record["summary"]
    epochs = pd.read_csv(tmp_path / outputs.EPOCHS_FILE)
    later = epochs["wall_s"].iloc[1:]
    assert summary["steady_epoch_s"] == pytest.approx(later.median())
    assert summary["first_epoch_overhead_s"] == pytest.approx(
        max(epochs["wall_s"].iloc[0] - summary["steady_epoch_s"], 0.0)
    )
    assert summary["first_epoch_overhead_noise_s"] == pytest.approx(
        (later - later.median()).abs().max()
    )
    assert summary["peak_mem_mb"] > 0 and (epochs["peak_mem_mb"] > 0).all()
    # every steady step is kept: the first epoch after its warm-up (3 of 4 steps, the default
    # 5 capped to leave one), the later ones after the loader's start-up (1 step)
    steps = [[float(ms) for ms in text.split()] for text in epochs["step_ms"]]
    assert [len(s) for s in steps] == [1, 3, 3]
    rates = sorted(6 / (ms / 1000) for epoch in steps for ms in epoch)
    assert summary["train_steps_steady"] == 7
    assert summary["train_img_s"] == pytest.approx(rates[3], rel=1e-3)  # their median
    # 7 samples: the 95 % order-statistic interval of the median is (x_(1), x_(7))
    assert summary["train_img_s_low"] == pytest.approx(rates[0], rel=1e-3)
    assert summary["train_img_s_high"] == pytest.approx(rates[-1], rel=1e-3)
    assert len(summary["train_block_img_s"]) == 7 and summary["train_step_cv"] > 0


@pytest.mark.parametrize(
    ("walls", "overhead", "noise", "variation"),
    [
        ([12.0, 10.0, 10.4, 9.8], 2.0, 0.4, False),  # warm-up well above the noise
        ([10.1, 10.0, 10.4, 9.8], 0.1, 0.4, False),  # within the noise, still >= 0
        ([9.9, 10.0, 10.4, 9.8], 0.0, 0.4, False),  # noise made it negative: 0, not -0.1
        ([4.10, 4.455, 4.51], 0.0, 0.0275, False),  # 8 % faster (seen on a quiet CPU): nothing
        # the bf16 cell: a first epoch 122.8 s "faster" as the load changed
        ([7.2, 130.0, 129.0, 137.0], 0.0, 7.0, True),
        ([12.0, 10.0], 2.0, None, False),  # one later epoch: no noise estimate
        ([12.0], None, None, False),
    ],
)
def test_first_epoch_overhead_is_never_negative_and_states_its_noise(
    walls, overhead, noise, variation
):
    from nettebench.training.outcome import first_epoch_overhead

    found, found_noise, text = first_epoch_overhead(walls)
    assert found == (None if overhead is None else pytest.approx(overhead))
    assert found_noise == (None if noise is None else pytest.approx(noise))
    assert (text is not None) is variation
    if variation:  # said as variation with its size, never as an impossibility
        assert text.startswith("epoch-to-epoch variation") and "122.8 s (94%) less" in text


def test_every_epoch_and_the_run_record_their_timing_conditions(tiny_tree, tmp_path):
    record = run_cell(small_cell(epochs=2), tiny_tree, tmp_path)
    epochs = pd.read_csv(tmp_path / outputs.EPOCHS_FILE)
    assert list(epochs.columns[-4:-1]) == ["other_cpu_share", "steal_share", "interference"]
    assert epochs["other_cpu_share"].between(0, 1).all()
    found = record["conditions"]
    assert found["cpus"] >= 1 and found["own_cpu_s"] > 0
    assert found["wall_s"] <= record["summary"]["wall_s"]
    assert found["epochs_under_interference"] == [
        int(e) for e, flag in zip(epochs["epoch"], epochs["interference"], strict=True) if flag
    ]
    assert found["gpu_other_processes"] is None  # a CPU cell asks nvidia-smi nothing
    assert record["environment"]["cpu_capability"]  # the CPU is described (records/cpu.py)


def test_compile_is_timed_apart_and_leaves_learning_unchanged(tiny_tree, tmp_path, monkeypatch):
    """compile: true warms the compiled model up before epoch 1 and puts the weights back.

    Dynamo's ``eager`` backend stands in for inductor here: the same graph capture, guards and
    recompilation, without inductor's C++ build (about 100 s for resnet18 on this CPU).
    """
    real_compile = torch.nn.Module.compile
    compiled = []

    def eager_compile(self, *args, **kwargs):
        compiled.append(type(self).__name__)
        return real_compile(self, *args, **{**kwargs, "backend": "eager"})

    monkeypatch.setattr(torch.nn.Module, "compile", eager_compile)
    plain = run_cell(small_cell(epochs=1), tiny_tree, tmp_path / "plain")
    faster = run_cell(small_cell(epochs=1, compile=True), tiny_tree, tmp_path / "compiled")
    assert compiled == ["ResNet"]
    assert plain["summary"]["compile_s"] is None
    assert faster["summary"]["compile_s"] > 0
    assert faster["cell"]["compile"] is True
    epochs = [pd.read_csv(tmp_path / name / outputs.EPOCHS_FILE) for name in ("plain", "compiled")]
    for column in ("train_loss", "val_loss", "val_top1"):
        assert epochs[1][column].tolist() == pytest.approx(epochs[0][column].tolist(), rel=1e-5)


@pytest.mark.parametrize(
    ("options", "benchmark"),
    [({}, True), ({"cudnn_benchmark": False}, False), ({"deterministic": True}, False)],
)
def test_cudnn_autotuning_follows_the_cell(options, benchmark, monkeypatch):
    """On a CUDA device (only flags are set: no GPU needed) cuDNN autotunes unless the cell
    turns it off or asks for determinism."""
    from nettebench.training.runner import configure_determinism

    monkeypatch.setattr(torch.backends.cudnn, "benchmark", not benchmark)
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", False)
    # the process-wide switches deterministic flips, restored afterwards
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda on: None)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    configure_determinism(small_cell(**options), torch.device("cuda", 0))
    assert torch.backends.cudnn.benchmark is benchmark


def test_the_environment_is_collected_beside_the_training_not_before_it(
    tiny_tree, tmp_path, monkeypatch
):
    """nvidia-smi, git and scontrol are off the timed path: a collection that lasts until the
    first epoch is over (longer than any of them) does not hold the epochs back, and the
    record still carries what it found."""
    from nettebench.records import environment

    def collect():
        deadline = time.time() + 30
        while not (tmp_path / outputs.EPOCHS_FILE).exists():
            if time.time() > deadline:
                raise TimeoutError("training waited for the environment")
            time.sleep(0.01)
        return {"collected": "after the first epoch"}

    monkeypatch.setattr(environment, "collect", collect)
    record = run_cell(small_cell(epochs=1), tiny_tree, tmp_path)
    assert record["status"] == "ok"
    written = json.loads((tmp_path / outputs.METRICS_FILE).read_text())
    assert written["environment"] == {"collected": "after the first epoch"}


def test_the_after_epochs_hook_is_its_own_phase_not_the_environment_wait(
    tiny_tree, tmp_path, monkeypatch
):
    """The wind-down's phases: a hook after the epochs (a cell job's ceiling) that takes 1 s is
    ``after_epochs``, not time spent waiting for the environment thread (a merge once labelled
    the ceiling's seconds as the environment's)."""
    from nettebench.records import environment
    from nettebench.training import startup

    monkeypatch.setattr(startup, "CLOCK", None)
    startup.start(time.time())

    def hook(device, record, epochs_s):
        time.sleep(1.0)

    # the environment at once: its real collection (git, package metadata) could itself take
    # a second on a loaded machine
    monkeypatch.setattr(environment, "collect", dict)
    record = run_cell(small_cell(epochs=1), tiny_tree, tmp_path, after_epochs=hook)
    after = record["startup"]["after_last_step"]
    assert after["after_epochs"] >= 1.0
    assert after["environment"] < 1.0
    assert sum(after.values()) == pytest.approx(record["startup"]["after_last_step_s"], abs=1e-3)


# One fresh process for what only a fresh process shows: the trainer module's start time read
# at its import, then whether importing the trainer and its launcher brought in torchrun's agent.
FRESH_TRAINER = (
    "import sys\n"
    "from nettebench.training.cli import process_start_time\n"
    "print(process_start_time())\n"
    "import nettebench.training.launch\n"
    "print(any(m.startswith(('torch.distributed.elastic', 'torch.distributed.run'))"
    " for m in sys.modules))\n"
)


@pytest.fixture(scope="module")
def fresh_trainer():
    """(the parent's clock before starting the child, the child's two lines, the clock after)."""
    before = time.time()
    done = subprocess.run(
        [sys.executable, "-c", FRESH_TRAINER], capture_output=True, text=True, check=True
    )
    return before, done.stdout.split(), time.time()


def test_the_process_start_is_when_the_process_started(fresh_trainer):
    """The start a cell's wall_s runs from, against the parent's clock on both sides of the
    child's life: after the parent began to start it (less one clock tick, the kernel's unit),
    before the child read it. /proc/stat's btime, which this once added up from, put it 0.6 s
    too early on the test VM."""
    before, (started, _), after = fresh_trainer
    started = float(started)
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert before - tick <= started <= after, (before, started, after)


def test_the_trainer_imports_torchruns_agent_only_for_several_processes(fresh_trainer):
    """torchrun's elastic agent (~0.1 s) is imported by launch() alone, not with the trainer."""
    _, (_, agent_imported), _ = fresh_trainer
    assert agent_imported == "False"
