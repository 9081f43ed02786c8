"""The timed loops: validation's short last batch padded to the batch shape, masked out of the
metrics (CPU; on a GPU the point is that cuDNN and torch.compile see a single shape); the steady
step times (the loader's start-up and warm-up left out, extrapolation from steady steps only)
and the step clock, with its GPU branch's CPU twin."""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn

from nettebench.training.fit import val_padding
from nettebench.training.loop import (
    LOADER_STARTUP_STEPS,
    PADDING_TARGET,
    evaluate,
    pad_batch,
    train_epoch,
)
from nettebench.training.step import TrainingStep
from nettebench.training.step_clock import StepClock
from nettebench.vocabulary import precision
from nettebench.vocabulary.cell import CellSpec

CLASSES = 7  # top-5 of 7 classes is not trivially 100 %


def _runner() -> TrainingStep:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(8, CLASSES),
    )  # fmt: skip
    return TrainingStep(
        model, precision.get("fp32"), torch.device("cpu"), lr=0.1, momentum=0.9, weight_decay=0
    )


def _val_batches(sizes=(16, 16, 5)):
    generator = torch.Generator().manual_seed(1)
    return [
        (torch.randn(n, 3, 12, 12, generator=generator), torch.randint(CLASSES, (n,)))
        for n in sizes
    ]


def test_padded_validation_has_the_unpadded_metrics_and_one_shape():
    runner = _runner()
    shapes = []
    runner.model.register_forward_pre_hook(lambda module, args: shapes.append(args[0].shape[0]))
    batches = _val_batches()
    plain = evaluate(runner, batches, total_steps=3, max_steps=None)
    assert shapes == [16, 16, 5]
    shapes.clear()
    padded = evaluate(runner, batches, total_steps=3, max_steps=None, pad_to=16)
    assert shapes == [16, 16, 16]
    assert padded.loss == pytest.approx(plain.loss, rel=1e-6)
    assert (padded.top1, padded.top5) == pytest.approx((plain.top1, plain.top5))
    assert 0 < plain.top5 < 100  # a metric the padding could have moved


def test_padding_rows_are_zero_images_with_the_ignored_target():
    images, targets = pad_batch(torch.ones(2, 3, 4, 4), torch.tensor([3, 1]), 5)
    assert images.shape == (5, 3, 4, 4) and images[2:].abs().sum() == 0
    assert targets.tolist() == [3, 1, PADDING_TARGET, PADDING_TARGET, PADDING_TARGET]


@pytest.mark.parametrize(
    ("device", "compile", "expected"),
    [("cuda", False, 64), ("cpu", False, None), ("cpu", True, 64)],
)
def test_validation_is_padded_where_a_second_shape_costs_time(device, compile, expected):
    cell = CellSpec(dataset="d", batch_size=64, compile=compile)
    assert val_padding(cell, torch.device(device), 64) == expected


class _SlowStart:
    """Batches whose first costs ``startup`` seconds (worker start-up), the rest ``each``."""

    def __init__(self, count=30, startup=0.3, each=0.01):
        self.batches, self.startup, self.each = _val_batches((4,) * count), startup, each

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        for index, batch in enumerate(self.batches):
            time.sleep(self.startup if index == 0 else self.each)
            yield batch


def test_steady_steps_exclude_the_loaders_start_up_in_every_epoch():
    runner = _runner()
    found = train_epoch(runner, _SlowStart(6), steps_per_epoch=6, max_steps=None, warmup_steps=0)
    assert len(found.step_s) == 6 - LOADER_STARTUP_STEPS and found.step_images == [4] * 5
    assert found.seconds - sum(found.step_s) >= 0.3  # the start-up step is not among them
    assert found.img_s == pytest.approx(sum(found.step_images) / sum(found.step_s))
    warm = train_epoch(runner, _SlowStart(6), steps_per_epoch=6, max_steps=None, warmup_steps=3)
    assert len(warm.step_s) == 3  # the first epoch's warm-up is longer than the start-up


def test_an_extrapolated_epoch_scales_its_steady_steps_not_the_start_up():
    """max_steps: 3 of 30 steps run; the 27 missing ones cost the mean steady step, so the
    start-up (1 s here) counts once, as in a full epoch (averaged in, it added 9 s more)."""
    found = train_epoch(
        _runner(), _SlowStart(30, startup=1.0), steps_per_epoch=30, max_steps=3, warmup_steps=0
    )
    assert found.extrapolated and found.steps_run == 3 and len(found.step_s) == 2
    measured = found.seconds - 27 * sum(found.step_s) / 2
    first_step = measured - sum(found.step_s)  # the start-up step: 1 s wait plus its compute
    assert 1.0 <= first_step < 1.0 + 2.0


def test_step_clock_reads_cuda_events_once_at_the_end(monkeypatch):
    """The GPU branch's CPU twin: each mark records an event (no synchronisation), and the
    step times are read from consecutive events' elapsed_time after the epoch."""
    recorded = []

    class Event:
        def __init__(self, enable_timing):
            assert enable_timing
            self.at = None

        def record(self, stream):
            self.at = 0.25 * len(recorded)  # ms: steps of 250 ms in event time
            recorded.append(stream)

        def elapsed_time(self, other):
            return 1000 * (other.at - self.at)

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device: f"stream of {device}")
    monkeypatch.setattr(
        torch.cuda, "synchronize", lambda *a: pytest.fail("no sync per step"), raising=False
    )
    clock = StepClock(torch.device("cuda", 1))
    clock.start()
    for _ in range(3):
        clock.mark()
    assert recorded == ["stream of cuda:1"] * 4
    assert clock.seconds() == pytest.approx([0.25, 0.25, 0.25])


def test_step_clock_on_a_cpu_times_each_step(monkeypatch):
    """Each step's own time, not the time since the start: on the test's own clock (a real
    sleep oversleeps on a loaded machine), steps of 20 ms and 50 ms."""
    now = [100.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    clock = StepClock(torch.device("cpu"))
    clock.start()
    for pause in (0.02, 0.05):
        now[0] += pause
        clock.mark()
    assert clock.seconds() == pytest.approx([0.02, 0.05])
