"""One precision mode means the same torch in a training step and in an inference model.

Both take :class:`~nettebench.models.torch_precision.TorchPrecision`; here each mode's training
step and inference model are built on the CPU from the same architecture, and what they hold is
compared with each other and with the precision table's own fields, read through a dtype map
written out here (not the module's).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nettebench.inference.model import InferenceModel
from nettebench.models.build import build_model
from nettebench.models.torch_precision import TorchPrecision
from nettebench.training.step import TrainingStep
from nettebench.vocabulary import precision

CPU = torch.device("cpu")
CLASSES = 3
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def _training(name: str, channels_last: bool) -> TrainingStep:
    torch.manual_seed(0)
    return TrainingStep(
        build_model("resnet18", CLASSES),
        precision.get(name),
        CPU,
        lr=0.1,
        momentum=0.9,
        weight_decay=1e-4,
        channels_last=channels_last,
    )


def _inference(name: str, channels_last: bool) -> InferenceModel:
    return InferenceModel("resnet18", CLASSES, name, CPU, channels_last=channels_last)


def _parameter_dtypes(model: nn.Module) -> dict[str, torch.dtype]:
    return {name: p.dtype for name, p in model.named_parameters()}


def _expected_parameter_dtypes(model: nn.Module, mode: precision.PrecisionMode) -> dict:
    """From the table: every parameter in the model dtype, batch-norm's in fp32 where kept."""
    expected = {}
    for module_name, module in model.named_modules():
        kept = mode.keep_batchnorm_fp32 and isinstance(module, BATCH_NORMS)
        for name, _ in module.named_parameters(recurse=False):
            key = f"{module_name}.{name}" if module_name else name
            expected[key] = torch.float32 if kept else DTYPES[mode.model_dtype]
    return expected


def _autocast_seen(context) -> tuple[bool, torch.dtype | None]:
    with context:
        enabled = torch.is_autocast_enabled("cpu")
        return enabled, torch.get_autocast_dtype("cpu") if enabled else None


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("name", precision.PRECISION_NAMES)
def test_training_and_inference_take_the_same_torch_for_every_mode(name, channels_last):
    mode = precision.get(name)
    training, inference = _training(name, channels_last), _inference(name, channels_last)
    assert training.precision == inference.precision
    assert training.precision == TorchPrecision(
        mode=mode,
        device=CPU,
        memory_format=torch.channels_last if channels_last else torch.contiguous_format,
        model_dtype=DTYPES[mode.model_dtype],
        autocast_dtype=None if mode.autocast_dtype is None else DTYPES[mode.autocast_dtype],
    )

    # what the two hold, not only what they were told
    assert _parameter_dtypes(training.model) == _parameter_dtypes(inference.model)
    assert _parameter_dtypes(inference.model) == _expected_parameter_dtypes(inference.model, mode)
    stem = (training.model.conv1.weight, inference.model.conv1.weight)
    wanted_format = torch.channels_last if channels_last else torch.contiguous_format
    assert all(w.is_contiguous(memory_format=wanted_format) for w in stem)

    images = torch.randn(2, 3, 8, 8)
    for prepared in (training.prepare_inputs(images), inference.prepare(images)):
        assert prepared.dtype == DTYPES[mode.model_dtype]
        assert prepared.is_contiguous(memory_format=wanted_format)

    autocast = (False, None) if mode.autocast_dtype is None else (True, DTYPES[mode.autocast_dtype])
    assert _autocast_seen(training.autocast()) == autocast
    assert _autocast_seen(inference.autocast()) == autocast


def test_batch_norm_kept_fp32_covers_every_batch_norm_torch_has():
    """O2 keeps batch-norm fp32 in 1d, 2d, 3d and synchronised layers, nothing else."""
    model = nn.Sequential(
        nn.Conv2d(3, 4, 1),
        nn.BatchNorm1d(4),
        nn.BatchNorm2d(4),
        nn.BatchNorm3d(4),
        nn.SyncBatchNorm(4),
        nn.LayerNorm(4),
        nn.Linear(4, 2),
    )
    cast = TorchPrecision.for_mode(precision.get("O2"), CPU, channels_last=False).cast(model)
    dtypes = [next(layer.parameters()).dtype for layer in cast]
    fp16, fp32 = torch.float16, torch.float32
    assert dtypes == [fp16, fp32, fp32, fp32, fp32, fp16, fp16]
