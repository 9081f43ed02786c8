"""A precision mode of the one table as torch objects, the same for training and inference.

:mod:`nettebench.vocabulary.precision` says what a mode means without torch; this module is the
one place that meaning becomes torch: the dtype of the model's parameters and of its inputs
(batch-norm kept fp32 where the mode asks), the memory format, the autocast context and TF32.
The trainer's step (:mod:`nettebench.training.step`), apex's step (:mod:`nettebench.training.apex`)
and the inference model (:mod:`nettebench.inference.model`) all take :class:`TorchPrecision`
from here, so a training cell and an inference cell of one precision name run the same
arithmetic.

TF32 is set through both of torch's APIs (:func:`apply_tf32`): the ``fp32_precision`` settings
alone leave the older ``allow_tf32`` getters, which Inductor, the profiler and
``torch.backends.cudnn.flags()`` read, raising "mix of the legacy and new APIs".
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from nettebench.vocabulary.precision import PrecisionMode

# torch 2.9 and 2.10 warn when the allow_tf32 flags are set; apply_tf32 sets them on purpose.
_LEGACY_TF32_WARNING = r"Please use the new API settings to control TF32"
_BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)


def torch_dtype(dtype_name: str | None) -> torch.dtype | None:
    """The torch dtype a dtype name of the precision table means (None: no cast, no autocast)."""
    return None if dtype_name is None else getattr(torch, dtype_name)


def set_tf32(device: torch.device, allow: bool) -> None:
    """Set TF32 explicitly for every run on CUDA, so no mode inherits it from a global default."""
    if device.type == "cuda":
        apply_tf32(torch.backends, allow)


def apply_tf32(backends, allow: bool) -> None:
    """TF32 on or off for CUDA matmuls and cuDNN convolutions (and RNNs), so that every getter
    of either API reads it without error.

    torch checks the two APIs against each other when a getter is read: the matmul getters
    (``cuda.matmul.allow_tf32``, ``torch.get_float32_matmul_precision()``) compare the legacy
    matmul precision with ``cuda.matmul.fp32_precision``; ``cudnn.allow_tf32`` (and so
    ``cudnn.flags()``) compares its own flag with both ``cudnn.conv`` and ``cudnn.rnn``. Only
    the ``allow_tf32`` setters set the legacy half (and the per-operator settings with it), so
    they are set first; then, where this torch has ``fp32_precision``, each operator's is set
    explicitly to ``"tf32"`` or ``"ieee"`` (the legacy cuDNN setter leaves ``"none"`` when off).
    The backend-wide settings (``torch.backends.fp32_precision``, ``cudnn.fp32_precision``) are
    left alone: they would reach the CPU's oneDNN too, and an operator's own setting wins."""
    matmul, cudnn = backends.cuda.matmul, backends.cudnn
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_LEGACY_TF32_WARNING, category=UserWarning)
        matmul.allow_tf32 = allow
        cudnn.allow_tf32 = allow
    precision = "tf32" if allow else "ieee"
    for operator in (matmul, getattr(cudnn, "conv", None), getattr(cudnn, "rnn", None)):
        if operator is not None and hasattr(operator, "fp32_precision"):
            operator.fp32_precision = precision


@dataclass(frozen=True)
class TorchPrecision:
    """One precision mode on one device, as torch: dtypes, memory format, autocast, TF32."""

    mode: PrecisionMode
    device: torch.device
    memory_format: torch.memory_format
    model_dtype: torch.dtype  # the parameters' dtype, and the inputs' (the first layer's)
    autocast_dtype: torch.dtype | None  # None: the forward pass runs without autocast

    @classmethod
    def for_mode(
        cls, mode: PrecisionMode, device: torch.device, *, channels_last: bool
    ) -> TorchPrecision:
        return cls(
            mode=mode,
            device=torch.device(device),
            memory_format=torch.channels_last if channels_last else torch.contiguous_format,
            model_dtype=torch_dtype(mode.model_dtype),
            autocast_dtype=torch_dtype(mode.autocast_dtype),
        )

    @property
    def input_dtype(self) -> torch.dtype:
        """The dtype a batch is given: the one the model's first layer has."""
        return self.model_dtype

    def apply_tf32(self) -> None:
        """TF32 as the mode says, on CUDA (process-wide: call it when the model is set up)."""
        set_tf32(self.device, self.mode.allow_tf32)

    def cast(self, model: nn.Module) -> nn.Module:
        """The model on the device in the memory format and the mode's dtype, batch-norm kept
        fp32 where the mode asks."""
        model = model.to(self.device, memory_format=self.memory_format).to(self.model_dtype)
        if self.mode.keep_batchnorm_fp32:
            for module in model.modules():
                if isinstance(module, _BATCH_NORMS):
                    module.float()
        return model

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        """The forward-pass context of this mode (a no-op for modes without autocast)."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def prepare(self, images: torch.Tensor) -> torch.Tensor:
        """A batch on the device, in the dtype and memory format the model takes."""
        return images.to(
            self.device,
            dtype=self.input_dtype,
            memory_format=self.memory_format,
            non_blocking=True,
        )
