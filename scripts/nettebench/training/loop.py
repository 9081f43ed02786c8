"""The epoch loops, timed like a GPU engineer would time them.

- The device is synchronised before every clock read that ends a timed region, so queued GPU
  work is counted where it belongs.
- Data-wait time is the time the device went without work for want of a batch
  (:mod:`.data_wait`: on a CPU the time blocked inside the loader's ``next()``; on a GPU the GPU
  time between CUDA events recorded around ``next()``, so a loader's launches blocked on queued
  compute are not counted); compute time is the rest of the epoch. No per-step synchronisation
  is added (it would serialise the GPU and the loader and slow down what is being measured).
- The first ``warmup_steps`` of the first epoch (cuDNN autotuning, allocator growth, worker
  start-up) are excluded from images per second but stay in the epoch's wall time.
- Every step's time is kept (:mod:`.step_clock`: CUDA events read at the end of the epoch on a
  GPU, never a synchronisation per step; ``perf_counter`` on a CPU). The steady steps are those
  after the warm-up and, in every epoch, after the loader's start-up (the first
  :data:`LOADER_STARTUP_STEPS`, whose wait includes starting the workers and filling their
  prefetch queue); their times are the samples of the cell's img/s and its interval
  (:mod:`nettebench.records.spread`).
- With ``max_steps`` an epoch stops early and its times are extrapolated to the full epoch from
  the mean time of its steady steps (the loader's start-up counted once, as in a full epoch), and
  flagged as extrapolated.
"""

from __future__ import annotations

import itertools
import resource
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch

from nettebench.training.data_wait import DataWait
from nettebench.training.step import TrainingStep
from nettebench.training.step_clock import StepClock

# Steps at the start of every epoch whose time holds the loader's start-up, not steady work.
LOADER_STARTUP_STEPS = 1


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def step_limit(steps: int, max_steps: int | None) -> int:
    """Steps an epoch runs: all of them, or ``max_steps`` when that is fewer."""
    return steps if max_steps is None else min(max_steps, steps)


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_mb(device: torch.device) -> float:
    """Peak device memory since the last reset: CUDA's allocator peak on a GPU; on a CPU the
    process's peak resident set size (never reset, so a maximum over the run so far)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


@dataclass
class TrainEpoch:
    loss: float
    seconds: float  # wall time of the epoch's training phase (extrapolated if partial)
    data_wait_s: float
    images: int  # images in the timed (post-warm-up) steps
    img_s: float
    steps_run: int
    extrapolated: bool
    step_s: list[float] = field(default_factory=list)  # seconds of each steady step
    step_images: list[int] = field(default_factory=list)  # images of each steady step
    # the steps [first, end) inside the span ``span`` measured (None: not opened) and their images
    span_steps: tuple[int, int] | None = None
    span_images: int = 0


@dataclass
class ValResult:
    loss: float
    top1: float
    top5: float
    seconds: float
    extrapolated: bool


def train_epoch(
    runner: TrainingStep,
    loader: Iterable,
    *,
    steps_per_epoch: int,
    max_steps: int | None,
    warmup_steps: int,
    progress=None,
    span=None,
) -> TrainEpoch:
    """Run one training epoch (or ``max_steps`` of it) and time it.

    ``span`` (a :class:`nettebench.records.energy.SpanMeter`: ``open()``, ``close()``) brackets
    the steady steps: opened as the first steady step begins, closed after the epoch's closing
    synchronisation. Opening it synchronises the device once (after the last step before the
    span), so the energy counter read there holds none of the steps queued before it: that wait
    lands in a step that is not steady, and the first steady step starts on an empty queue as
    the epoch's first step does (the host's launch of its first kernels, well under a
    millisecond, in a step of tens of milliseconds); no step of the span is synchronised."""
    device = runner.device
    runner.model.train()
    steps_limit = step_limit(steps_per_epoch, max_steps)
    warmup_steps = min(warmup_steps, max(steps_limit - 1, 0))
    opens_at = None if span is None else steady_from(warmup_steps, steps_limit)
    loss_sum = torch.zeros((), device=device)
    samples = 0
    data_wait = 0.0
    steps = 0
    batches: list[int] = []
    clock = StepClock(device)

    synchronize(device)
    start = time.perf_counter()
    if opens_at == 0:
        span.open()
    clock.start()
    iterator = iter(loader)
    wait = DataWait(device)
    while steps < steps_limit:
        wait.start()
        try:
            images, targets = next(iterator)
        except StopIteration:
            break
        wait.stop()
        images = runner.prepare_inputs(images)
        targets = targets.to(device, non_blocking=True)
        loss = runner.step(images, targets)
        if opens_at is not None and steps + 1 == opens_at:
            synchronize(device)  # once an epoch: see the docstring
            span.open()
        clock.mark()
        batch = targets.shape[0]
        batches.append(batch)
        loss_sum += loss * batch
        samples += batch
        steps += 1
        if progress is not None:
            progress.update(1)
    synchronize(device)
    end = time.perf_counter()
    if span is not None:
        span.close()
    del iterator  # stop the loader's prefetching before the next phase is timed
    data_wait = wait.seconds()

    seconds = end - start
    first_steady = steady_from(warmup_steps, steps)
    step_s = clock.seconds()[first_steady:steps]
    step_images = batches[first_steady:steps]
    timed_seconds, timed_images = sum(step_s), sum(step_images)
    img_s = timed_images / timed_seconds if timed_seconds > 0 and timed_images else float("nan")
    extrapolated = steps < steps_per_epoch
    if extrapolated and steps:
        steady_step_s = timed_seconds / len(step_s)
        missing = steps_per_epoch - steps
        data_wait *= (seconds + missing * steady_step_s) / seconds
        seconds += missing * steady_step_s
    return TrainEpoch(
        loss=(loss_sum / max(samples, 1)).item(),
        seconds=seconds,
        data_wait_s=data_wait,
        images=timed_images,
        img_s=img_s,
        steps_run=steps,
        extrapolated=extrapolated,
        step_s=step_s,
        step_images=step_images,
        span_steps=(opens_at, steps) if opens_at is not None and steps >= opens_at else None,
        span_images=sum(batches[opens_at:steps]) if opens_at is not None else 0,
    )


def steady_from(warmup_steps: int, steps: int) -> int:
    """Index of an epoch's first steady step: after the warm-up and the loader's start-up, but
    leaving at least one step of an epoch that has any."""
    return max(0, min(max(warmup_steps, LOADER_STARTUP_STEPS), steps - 1))


# cross_entropy's ignore_index: a padding row's target, so it counts for no loss and no hit.
PADDING_TARGET = -100


@torch.no_grad()
def evaluate(
    runner: TrainingStep,
    loader: Iterable,
    *,
    total_steps: int,
    max_steps: int | None,
    pad_to: int | None = None,
) -> ValResult:
    """Validation loss, top-1 and top-5 accuracy (%), and the time it took.

    ``pad_to``: a shorter batch (the last one: 3,925 = 15 x 256 + 85) is padded to this size
    (zeros, target :data:`PADDING_TARGET`), so the model sees one shape: cuDNN autotunes no
    second shape and a compiled model compiles no second graph. The padding counts for nothing:
    the metrics are those of the real images.
    """
    device = runner.device
    runner.model.eval()
    limit = step_limit(total_steps, max_steps)
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros(2, device=device)
    samples = 0
    steps = 0
    synchronize(device)
    start = time.perf_counter()
    for images, targets in itertools.islice(loader, limit):  # no batch fetched beyond the limit
        samples += targets.shape[0]
        if pad_to is not None and targets.shape[0] < pad_to:
            images, targets = pad_batch(images, targets, pad_to)
        images = runner.prepare_inputs(images)
        targets = targets.to(device, non_blocking=True)
        with runner.autocast():
            outputs = runner.model(images).float()
        loss_sum += torch.nn.functional.cross_entropy(
            outputs, targets, reduction="sum", ignore_index=PADDING_TARGET
        )
        correct += topk_correct(outputs, targets, ks=(1, 5))
        steps += 1
    synchronize(device)
    seconds = time.perf_counter() - start
    extrapolated = steps < total_steps
    if extrapolated and steps:
        seconds *= total_steps / steps
    top1, top5 = (correct * 100.0 / max(samples, 1)).tolist()
    return ValResult(
        loss=(loss_sum / max(samples, 1)).item(),
        top1=top1,
        top5=top5,
        seconds=seconds,
        extrapolated=extrapolated,
    )


def pad_batch(
    images: torch.Tensor, targets: torch.Tensor, size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``images`` and ``targets`` padded to ``size`` rows: zero images, :data:`PADDING_TARGET`
    targets (where the batch already is: on the device for the cached loader)."""
    missing = size - targets.shape[0]
    images = torch.cat([images, images.new_zeros((missing, *images.shape[1:]))])
    targets = torch.cat([targets, targets.new_full((missing,), PADDING_TARGET)])
    return images, targets


def predicted_classes(outputs: torch.Tensor, k: int = 1) -> torch.Tensor:
    """Each row's ``k`` predicted classes, highest output first (``k`` capped at the number of
    classes). Equal outputs rank by class index, the lower first: the rule ``argmax`` documents,
    so column 0 is ``outputs.argmax(1)``. ``topk`` guarantees no order among equal values, and
    bf16 logits are often equal. Every top-k accuracy and every "prediction changed" reads this
    one function. A stable sort of [256, 1000] took 17 ms on one CPU thread (topk 0.6 ms), far
    below the batch's forward pass."""
    k = min(k, outputs.shape[1])
    return torch.sort(outputs, dim=1, descending=True, stable=True).indices[:, :k]


def topk_correct(outputs: torch.Tensor, targets: torch.Tensor, ks=(1, 5)) -> torch.Tensor:
    """How many samples have their target among the top-k outputs, for each k (k capped at
    the number of classes, so top-5 of a 3-class problem is top-3; a padding row's target,
    :data:`PADDING_TARGET`, is never among them). Ties rank as in :func:`predicted_classes`."""
    maxk = min(max(ks), outputs.shape[1])
    predicted = predicted_classes(outputs, maxk)
    hits = predicted.eq(targets.unsqueeze(1))
    return torch.stack([hits[:, : min(k, maxk)].any(dim=1).sum() for k in ks]).float()
