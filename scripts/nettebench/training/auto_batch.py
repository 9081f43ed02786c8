"""``batch_size: auto``: the largest batch, halving from the reference's 256, whose training steps
fit in the device's memory, agreed by every process of a data-parallel cell."""

from __future__ import annotations

import dataclasses

import torch

from nettebench.training import runner as runners
from nettebench.training.distributed import ALONE, DataParallel
from nettebench.vocabulary.cell import CellSpec

AUTO_BATCH_START = 256  # batch_size: auto starts at the reference batch size and halves


def choose_batch_size(
    cell: CellSpec,
    device: torch.device,
    num_classes: int,
    *,
    reserve_bytes: int = 0,
    parallel: DataParallel | None = None,
) -> int:
    """For ``batch_size: auto``: halve from 256 until two training steps fit in memory.

    ``reserve_bytes`` (a resident store, :func:`.fit.store_reserve`) is held on a GPU while the
    trials run, so the batch chosen fits beside it. The trials run eager even for a ``compile:
    true`` cell: compiling each trial's fresh model would cost a compilation per halving, and
    the compiled step (fused) needs no more memory than the eager one.

    In a data-parallel cell (``parallel``: this process's, by default) every process tries its
    share of the batch on a model of its own, outside DDP, so a trial runs no collective: a
    process out of memory mid-backward leaves none waiting in a gradient all-reduce. Then the
    processes agree (:meth:`DataParallel.any`): one out of memory and all halve, so every one
    returns the same batch. The global batch stays a multiple of the processes: the share
    halves, from 256's.
    """
    if cell.batch_size != "auto":
        return int(cell.batch_size)
    parallel = parallel or DataParallel.from_env()
    trial_cell = dataclasses.replace(cell, compile=False)
    ballast = None
    if reserve_bytes and device.type == "cuda":
        ballast = torch.empty(reserve_bytes, dtype=torch.uint8, device=device)
    local = max(AUTO_BATCH_START // parallel.world, 1)
    try:
        while True:
            failed = _trial_fails(trial_cell, device, num_classes, local, parallel.world)
            if device.type == "cuda":
                torch.cuda.empty_cache()  # the trial's memory back, before the next
            if not parallel.any(failed is not None):
                return local * parallel.world
            if local == 1:  # every process raises it, so all record the same outcome
                raise torch.OutOfMemoryError(
                    failed or "another process ran out of memory at its share of 1 image"
                )
            local //= 2
    finally:
        del ballast


def _trial_fails(
    cell: CellSpec, device: torch.device, num_classes: int, local: int, world: int
) -> str | None:
    """Two training steps of ``local`` images on a fresh model of this process alone (the lr of
    the global batch, ``local * world``): None when they fit, else the out-of-memory error's
    first line. The trial's tensors are gone when it returns."""
    try:
        runner = runners.make_runner(cell, device, num_classes, local * world, ALONE)
        # DDP holds a bucket per gradient beside the gradients: held here, so the batch chosen
        # fits the DDP model of the epochs
        buckets = _ddp_buckets(runner.model, device) if world > 1 else None  # noqa: F841
        images = torch.randn(local, 3, cell.image_size, cell.image_size)
        targets = torch.randint(0, num_classes, (local,), device=device)
        for _ in range(2):
            runner.step(runner.prepare_inputs(images), targets)
    except (torch.OutOfMemoryError, MemoryError) as error:
        lines = str(error).strip().splitlines()
        return lines[0] if lines else type(error).__name__
    return None


def _ddp_buckets(model: torch.nn.Module, device: torch.device) -> torch.Tensor | None:
    """As much memory on a GPU as DDP's gradient buckets take (one copy of the gradients, in
    their dtype); None on a CPU, where nothing is held."""
    if device.type != "cuda":
        return None
    return torch.empty(ddp_bucket_bytes(model), dtype=torch.uint8, device=device)


def ddp_bucket_bytes(model: torch.nn.Module) -> int:
    """The bytes of DDP's gradient buckets for ``model``: its trainable parameters'."""
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
