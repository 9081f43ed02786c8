"""The ceiling sets its timing probe up before its warm-up, not between the warm-up and the
first timed step (issue 56, item 6).

Finding the GPU (NVML's listing, or ``nvidia-smi -L``) and opening NVML take tens of
milliseconds to seconds; between the warm-up and the timed steps the GPU would idle through
them, and its clocks with it. Here the ceiling runs for real on the CPU (resnet18, 32 px), each
of its calls recorded in order: the real probe and steps, each logged when called.
"""

from __future__ import annotations

import pytest

from nettebench.benchmarks import ceiling
from nettebench.records import conditions
from nettebench.training import runner as runners

WARMUP, STEPS = 2, 3


@pytest.fixture
def calls(monkeypatch):
    """The order of the ceiling's calls to the probe and the training step."""
    found: list[str] = []
    real_target, real_make_runner = conditions.gpu_target, runners.make_runner

    def gpu_target(device):
        found.append("gpu_target")
        return real_target(device)

    class RecordingProbe(conditions.Probe):
        def __init__(self, **kwargs):
            found.append("probe")
            super().__init__(**kwargs)

        def start(self, **kwargs):
            found.append("start")
            return super().start(**kwargs)

        def stop(self, started, **kwargs):
            found.append("stop")
            return super().stop(started, **kwargs)

    def make_runner(*args, **kwargs):
        runner = real_make_runner(*args, **kwargs)
        real_step = runner.step

        def step(images, targets):
            found.append("step")
            return real_step(images, targets)

        runner.step = step
        return runner

    monkeypatch.setattr(conditions, "gpu_target", gpu_target)
    monkeypatch.setattr(conditions, "Probe", RecordingProbe)
    monkeypatch.setattr(runners, "make_runner", make_runner)
    return found


def test_the_probe_is_set_up_before_the_warm_up_and_nothing_comes_between_it_and_timing(calls):
    record = ceiling.measure_ceiling(
        "resnet18", "O0", 4, image_size=32, device="cpu", warmup_steps=WARMUP, steps=STEPS,
        threads=1,
    )  # fmt: skip
    assert record["status"] == "ok", record["message"]
    assert (record["warmup_steps"], record["steps"]) == (WARMUP, STEPS)
    # the GPU found and the probe built first; then the warm-up; the window opens right after
    # it, around the timed steps alone
    expected = ["gpu_target", "probe", *["step"] * WARMUP, "start", *["step"] * STEPS, "stop"]
    assert calls == expected
    assert record["conditions"] is not None  # the window's summary is the record's
