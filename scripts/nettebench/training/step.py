"""Turn a precision mode into a model, an optimiser and one training step.

:mod:`nettebench.vocabulary.precision` says what a mode means;
:mod:`nettebench.models.torch_precision` makes it torch objects (the model's dtype with batch-norm
kept fp32 for O2, the memory format, the autocast context, TF32), the same for the inference
model. This module adds what only training has: the loss scaler and, for O2, fp32 master weights
that the optimiser updates and copies back into the fp16 model. The training loop only calls
:meth:`TrainingStep.step` and :meth:`TrainingStep.autocast`, so no loop code branches on
precision names.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from nettebench.models.torch_precision import TorchPrecision
from nettebench.vocabulary.precision import PrecisionMode


def dtype_groups(
    targets: list[torch.Tensor], sources: list[torch.Tensor]
) -> list[tuple[list[torch.Tensor], list[torch.Tensor]]]:
    """``(targets, sources)`` pairs split into lists of one (target dtype, source dtype,
    device) each, in order: one ``_foreach_copy_`` per group stays on the fast multi-tensor path
    (O2's fp16 weights and fp32 batch-norm parameters are two groups, not one mixed list)."""
    groups: dict[tuple, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
    for target, source in zip(targets, sources, strict=True):
        key = (target.dtype, source.dtype, target.device)
        group = groups.setdefault(key, ([], []))
        group[0].append(target)
        group[1].append(source)
    return list(groups.values())


def foreach_copy(groups) -> None:
    """``_foreach_copy_`` over each dtype-homogeneous group of :func:`dtype_groups`."""
    for targets, sources in groups:
        torch._foreach_copy_(targets, sources)


def optimizer_options(device: torch.device) -> dict:
    """SGD's options on ``device``: fused on CUDA, where GradScaler then hands the optimiser its
    scale and inf flag on the device instead of reading the flag back (an ``.item()`` sync per
    step); the CPU keeps the default implementation."""
    return {"fused": True} if device.type == "cuda" else {}


def main_logits(outputs):
    """The main classifier's logits: inception_v3 and googlenet return (logits, aux) tuples in
    training mode; their auxiliary heads are not trained here (the reference script cannot
    train them either)."""
    return outputs[0] if isinstance(outputs, tuple) else outputs


class TrainingStep:
    """One optimiser step under a precision mode: forward, loss, backward, (un)scale, update."""

    def __init__(
        self,
        model: nn.Module,
        mode: PrecisionMode,
        device: torch.device,
        *,
        lr: float,
        momentum: float,
        weight_decay: float,
        channels_last: bool = False,
        compile: bool = False,
    ) -> None:
        self.mode = mode
        self.device = device
        self.precision = TorchPrecision.for_mode(mode, device, channels_last=channels_last)
        self.precision.apply_tf32()
        self.model = self.precision.cast(model)
        if compile:
            # In place (nn.Module.compile): calls go through the compiled forward while the
            # state_dict keeps its plain keys, so checkpoints do not depend on compilation.
            self.model.compile()
        self.criterion = nn.CrossEntropyLoss()
        self.model_params = [p for p in self.model.parameters() if p.requires_grad]
        if mode.master_weights:
            # fp32 copies the optimiser owns; the fp16 model gets a copy after every update.
            self.master_params = [p.detach().clone().float() for p in self.model_params]
            for master in self.master_params:
                master.requires_grad_(True)
            optimised = self.master_params
        else:
            self.master_params = None
            optimised = self.model_params
        self.optimizer = torch.optim.SGD(
            optimised, lr=lr, momentum=momentum, weight_decay=weight_decay,
            **optimizer_options(device),
        )  # fmt: skip
        # the fp32 masters back into the model: fp16 weights, fp32 batch norm (a group each)
        self.copy_back = None if self.master_params is None else dtype_groups(
            self.model_params, self.master_params
        )  # fmt: skip
        self.scaler = torch.amp.GradScaler(device.type) if mode.loss_scaling else None

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        """The forward-pass context of this mode (a no-op for modes without autocast)."""
        return self.precision.autocast()

    def prepare_inputs(self, images: torch.Tensor) -> torch.Tensor:
        """Move a batch to the device in the dtype the model's first layer expects."""
        return self.precision.prepare(images)

    def step(self, images: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Train on one batch; returns the (detached, fp32) loss without synchronising."""
        with self.autocast():
            outputs = main_logits(self.model(images))
            loss = self.criterion(outputs.float(), targets)
        # The model's own gradients, not the optimiser's: with master weights they differ.
        self.model.zero_grad(set_to_none=True)
        if self.scaler is None:
            loss.backward()
        else:
            self.scaler.scale(loss).backward()
        if self.master_params is not None:
            self._grads_to_masters()
        if self.scaler is None:
            self.optimizer.step()
        else:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        if self.master_params is not None:
            with torch.no_grad():
                foreach_copy(self.copy_back)
        return loss.detach()

    def _grads_to_masters(self) -> None:
        """The fp16 gradients into the masters' fp32 ones in a few foreach kernels (a copy per
        parameter is a kernel launch each: 161 for resnet50), into buffers kept from step to
        step; a parameter without a gradient this step leaves its master without one too."""
        masters, grads = [], []
        for master, param in zip(self.master_params, self.model_params, strict=True):
            if param.grad is None:
                master.grad = None
                continue
            if master.grad is None:
                master.grad = torch.empty_like(master)
            masters.append(master.grad)
            grads.append(param.grad)
        foreach_copy(dtype_groups(masters, grads))

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def state_dict(self) -> dict:
        """Everything a resumed run needs to continue exactly: weights, optimiser, scaler."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scaler": None if self.scaler is None else self.scaler.state_dict(),
            "master_params": None
            if self.master_params is None
            else [p.detach().clone() for p in self.master_params],
        }

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        if self.master_params is not None:
            with torch.no_grad():
                for master, saved in zip(self.master_params, state["master_params"], strict=True):
                    master.copy_(saved)
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scaler is not None:
            self.scaler.load_state_dict(state["scaler"])
