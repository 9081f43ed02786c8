"""A fresh model and its training step, built the same way for every job that trains.

The trainer (:mod:`.fit`), the auto batch size's trials (:mod:`.auto_batch`), the profiler's window
and the ceiling all build their step here, so precision handling, channels-last, the optimizer and
the seed are one definition: a profiled or ceiling step is the step a timed cell takes.
"""

from __future__ import annotations

import math
import os
import random

import numpy as np
import torch

from nettebench.models.build import build_model
from nettebench.training.apex import ApexTrainingStep, require_apex_amp
from nettebench.training.distributed import DataParallel
from nettebench.training.step import TrainingStep
from nettebench.vocabulary import precision
from nettebench.vocabulary.cell import CellSpec


def lr_at(cell: CellSpec, epoch: int, batch_size: int) -> float:
    """Learning rate of a 0-based epoch: the reference step schedule or cosine."""
    base = cell.effective_lr(batch_size)
    if cell.lr_schedule == "cosine":
        return base * 0.5 * (1 + math.cos(math.pi * epoch / cell.epochs))
    return base * 0.1 ** (epoch // 30)


def seed_epoch(seed: int, epoch: int, generator: torch.Generator | None = None) -> None:
    """Seed every random source for one epoch from (seed, epoch) alone."""

    epoch_seed = seed * 100_003 + epoch
    random.seed(epoch_seed)
    np.random.seed(epoch_seed % 2**32)
    torch.manual_seed(epoch_seed)
    if generator is not None:
        generator.manual_seed(epoch_seed)


def configure_determinism(cell: CellSpec, device: torch.device) -> None:
    """Deterministic kernels when asked; otherwise cuDNN autotunes as the cell says
    (``cudnn_benchmark``, on by default as in the reference)."""
    if cell.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = cell.cudnn_benchmark and not cell.deterministic
        torch.backends.cudnn.deterministic = cell.deterministic


def make_runner(
    cell: CellSpec,
    device: torch.device,
    num_classes: int,
    batch_size: int,
    parallel: DataParallel | None = None,
):
    """A fresh model and its precision-specific training step, seeded by the cell's seed, its
    model in DDP in a data-parallel process (``parallel``: this process's, by default)."""
    parallel = parallel or DataParallel.from_env()

    seed_epoch(cell.seed, -1)
    mode = precision.get(cell.precision)
    kwargs = dict(
        lr=lr_at(cell, 0, batch_size),
        momentum=cell.momentum,
        weight_decay=cell.weight_decay,
        channels_last=cell.uses_channels_last(),
    )
    model = build_model(cell.model, num_classes, pretrained=cell.pretrained)
    if cell.amp_backend == "apex":
        require_apex_amp()  # fails with what to do instead, before any work
        return parallel.wrap(ApexTrainingStep(model, mode, device, **kwargs))

    return parallel.wrap(TrainingStep(model, mode, device, compile=cell.compile, **kwargs))
