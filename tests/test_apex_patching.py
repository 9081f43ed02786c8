"""Code that runs under apex O1 on a GPU, run here under apex's own O1 patching of torch
(tests/vendored_apex.py: the vendored 25.05's ``amp.init``, its casts acting on CPU tensors as
on CUDA ones): the batched crop sampler and a second ``amp.initialize`` in one process."""

import pytest
import torch
from torch import nn

from nettebench.data.augment import TrainTransform
from nettebench.data.crop_boxes import sample_crop_boxes
from nettebench.training.apex import ApexTrainingStep, ApexUnsupported, undo_earlier_patches
from tests import vendored_apex


@pytest.fixture(scope="module")
def apex_amp(tmp_path_factory):
    if not vendored_apex.VENDORED_APEX.is_file():
        pytest.skip(f"the vendored apex source is not here: {vendored_apex.VENDORED_APEX}")
    source = vendored_apex.extract(tmp_path_factory.mktemp("apex-source"))
    with vendored_apex.imported(source) as amp:
        yield amp


def test_the_patching_is_apexs_and_refuses_double_times_float_as_on_a_gpu(apex_amp):
    plain = torch.exp
    with vendored_apex.o1_patches(apex_amp):
        assert torch.exp is not plain and torch.exp.__wrapped__ is plain
        double = torch.ones(3, dtype=torch.float64)
        assert torch.exp(double).dtype == torch.float32  # exp is on apex's fp32 list
        with pytest.raises(NotImplementedError, match="Do not know how to handle these types"):
            double * torch.exp(double)
    assert torch.exp is plain


def _sizes(batch: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    return torch.randint(40, 90, (batch, 2), generator=generator)


def test_crop_boxes_under_apex_o1_are_the_boxes_without_it(apex_amp):
    sizes = _sizes(64)
    expected = sample_crop_boxes(
        64, sizes[:, 0], sizes[:, 1], generator=torch.Generator().manual_seed(0)
    )
    with vendored_apex.o1_patches(apex_amp):
        boxes = sample_crop_boxes(
            64, sizes[:, 0], sizes[:, 1], generator=torch.Generator().manual_seed(0)
        )
        fixed = sample_crop_boxes(8, 64, 48, generator=torch.Generator().manual_seed(0))
    assert boxes.dtype == torch.float32
    assert torch.equal(boxes, expected)
    assert fixed.shape == (8, 4)


def test_the_cached_loaders_train_transform_runs_under_apex_o1(apex_amp):
    sizes = _sizes(6)
    images = torch.randint(0, 256, (6, 90, 90, 3), dtype=torch.uint8)
    transform = TrainTransform(24, device="cpu", channels_last=True)
    expected = transform(images, generator=torch.Generator().manual_seed(0), sizes=sizes)
    with vendored_apex.o1_patches(apex_amp):
        out = transform(images, generator=torch.Generator().manual_seed(0), sizes=sizes)
    torch.testing.assert_close(out, expected)


def test_a_second_initialize_starts_from_plain_torch(apex_amp):
    """The cell job's ceiling builds a second ApexTrainingStep in the cell's process: it must
    not wrap apex's wrappers again (every patched call would pay apex's Python twice)."""
    plain = torch.exp
    with vendored_apex.o1_patches(apex_amp):
        # On this CPU apex refuses the model inside amp.initialize; what came before it ran.
        with pytest.raises(ApexUnsupported):
            ApexTrainingStep(
                nn.Linear(2, 2), "O1", torch.device("cpu"), lr=0.1, momentum=0.9,
                weight_decay=0.0,
            )  # fmt: skip
        assert torch.exp is plain
        apex_amp.amp.init(enabled=True)  # the second initialize's patching, as on a GPU
        assert torch.exp.__wrapped__ is plain  # one layer of apex, not two
    assert torch.exp is plain
    assert undo_earlier_patches() == 0
