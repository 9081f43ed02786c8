"""A classifier ready for inference under one precision mode of the one precision table.

The precision work is the trainer's own (:class:`nettebench.models.torch_precision.TorchPrecision`:
the model's dtype, batch-norm kept fp32 where the mode asks, the memory format, the autocast,
TF32 set explicitly), so an inference cell and a training cell of the same precision name mean the
same arithmetic; only the optimiser is absent.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping

import torch

from nettebench.models.build import build_model
from nettebench.models.torch_precision import TorchPrecision
from nettebench.training.loop import synchronize
from nettebench.training.step import main_logits
from nettebench.vocabulary import precision


class InferenceModel:
    """``model(images)`` in eval mode, no autograd, under the mode's autocast."""

    def __init__(
        self,
        name: str,
        num_classes: int,
        precision_name: str,
        device: torch.device,
        *,
        channels_last: bool,
        compile: bool = False,
        state_dict: Mapping[str, torch.Tensor] | None = None,
    ) -> None:
        self.mode = precision.get(precision_name)
        self.device = device
        self.precision = TorchPrecision.for_mode(self.mode, device, channels_last=channels_last)
        model = build_model(name, num_classes)
        if state_dict is not None:
            model.load_state_dict(state_dict)
        self.precision.apply_tf32()
        if device.type == "cuda":  # autotuned convolutions, as the trainer and timm's benchmark
            torch.backends.cudnn.benchmark = True
        self.model = self.precision.cast(model).eval()
        self.compiled = compile
        if compile:
            self.model.compile()

    def prepare(self, images: torch.Tensor) -> torch.Tensor:
        """A batch on the device, in the dtype and memory format the model takes."""
        return self.precision.prepare(images)

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        return self.precision.autocast()

    @torch.no_grad()
    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        with self.autocast():
            return main_logits(self.model(images))

    def first_call_s(self, images: torch.Tensor) -> float:
        """Seconds of the first forward (the compilation under ``compile``), synchronised."""
        synchronize(self.device)
        start = time.perf_counter()
        self(images)
        synchronize(self.device)
        return time.perf_counter() - start
