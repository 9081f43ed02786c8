"""The timed loops' validation: a short last batch padded to the batch shape, masked out of the
metrics (CPU; on a GPU the point is that cuDNN and torch.compile see a single shape)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nettebench.study import precision
from nettebench.study.cell import CellSpec
from nettebench.training.fit import val_padding
from nettebench.training.loop import PADDING_TARGET, evaluate, pad_batch
from nettebench.training.step import TrainingStep

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
