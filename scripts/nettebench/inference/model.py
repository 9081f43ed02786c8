"""A classifier ready for inference under one precision mode of the one precision table.

The trainer's own pieces do the precision work (:mod:`nettebench.training.step`: the model's
dtype, batch-norm kept fp32 where the mode asks, TF32 set explicitly), so an inference cell and a
training cell of the same precision name mean the same arithmetic; only the optimiser is absent.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping

import torch

from nettebench.models.build import build_model
from nettebench.training.loop import synchronize
from nettebench.training.step import cast_model, main_logits, set_tf32, torch_dtype
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
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.input_dtype = torch_dtype(self.mode.model_dtype)
        self.autocast_dtype = torch_dtype(self.mode.autocast_dtype)
        model = build_model(name, num_classes)
        if state_dict is not None:
            model.load_state_dict(state_dict)
        set_tf32(device, self.mode.allow_tf32)
        if device.type == "cuda":  # autotuned convolutions, as the trainer and timm's benchmark
            torch.backends.cudnn.benchmark = True
        model = cast_model(model.to(device, memory_format=self.memory_format), self.mode)
        self.model = model.eval()
        self.compiled = compile
        if compile:
            self.model.compile()

    def prepare(self, images: torch.Tensor) -> torch.Tensor:
        """A batch on the device, in the dtype and memory format the model takes."""
        return images.to(
            self.device,
            dtype=self.input_dtype,
            memory_format=self.memory_format,
            non_blocking=True,
        )

    def autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

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
