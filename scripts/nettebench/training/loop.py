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
- Every steady step has the cell's batch shape: both loaders drop the short last training
  batch, and a step of another size should one come (a loader of one's own) counts in the
  epoch's wall time but is no steady step (:func:`steady_steps`).
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
    batch_size: int | None = None,
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
    steps_limit = training_steps(steps_per_epoch, max_steps)
    warmup_steps = min(warmup_steps, max(steps_limit - 1, 0))
    opens_at = None if span is None else steady_from(warmup_steps, steps_limit)
    loss_sum = torch.zeros((), device=device)
    samples = 0
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

    step_s, step_images = steady_samples(clock.seconds(), batches, warmup_steps, batch_size)
    seconds, data_wait = to_full_epoch(end - start, wait.seconds(), step_s, steps, steps_per_epoch)
    return TrainEpoch(
        loss=(loss_sum / max(samples, 1)).item(),
        seconds=seconds,
        data_wait_s=data_wait,
        images=sum(step_images),
        img_s=images_per_second(step_s, step_images),
        steps_run=steps,
        extrapolated=steps < steps_per_epoch,
        step_s=step_s,
        step_images=step_images,
        span_steps=(opens_at, steps) if opens_at is not None and steps >= opens_at else None,
        span_images=sum(batches[opens_at:steps]) if opens_at is not None else 0,
    )


def training_steps(steps_per_epoch: int, max_steps: int | None) -> int:
    """Steps a training epoch runs (:func:`step_limit`). An epoch of none (a loader without one
    full batch; :func:`nettebench.data.pil.require_full_batch` refuses such a split) is an
    error, never an epoch that silently trains nothing."""
    steps = step_limit(steps_per_epoch, max_steps)
    if steps < 1:
        raise ValueError(f"an epoch of {steps} training steps: the loader holds no full batch")
    return steps


def steady_samples(
    times: list[float], batches: list[int], warmup_steps: int, batch_size: int | None
) -> tuple[list[float], list[int]]:
    """The seconds and images of an epoch's steady steps (:func:`steady_steps`), from every
    step's ``times`` and images (``batches``)."""
    steady = steady_steps(batches, warmup_steps, batch_size)
    return [times[index] for index in steady], [batches[index] for index in steady]


def images_per_second(step_s: list[float], step_images: list[int]) -> float:
    """The steady steps' images over their seconds (NaN without any)."""
    seconds, images = sum(step_s), sum(step_images)
    return images / seconds if seconds > 0 and images else float("nan")


def to_full_epoch(
    seconds: float, data_wait: float, step_s: list[float], steps: int, steps_per_epoch: int
) -> tuple[float, float]:
    """An epoch's wall and data-wait seconds, extrapolated when it ran ``steps`` of its
    ``steps_per_epoch`` (``max_steps``): each missing step costs the mean steady step, and the
    data wait grows in proportion. A full epoch's are returned as they are."""
    if steps >= steps_per_epoch or not steps:
        return seconds, data_wait
    steady_step_s = sum(step_s) / len(step_s) if step_s else seconds / steps
    full = seconds + (steps_per_epoch - steps) * steady_step_s
    return full, data_wait * full / seconds


def steady_steps(batches: list[int], warmup_steps: int, batch_size: int | None) -> list[int]:
    """Indices of an epoch's steady steps, given each step's images (``batches``): from
    :func:`steady_from` on, those of the full batch (``batch_size``; None: the epoch's largest).
    A step of another size (none with the study's loaders, which drop the short last batch) is
    another shape, which cuDNN autotunes and torch.compile compiles inside it: it counts in the
    epoch's wall time, never in the step samples. An epoch whose steps from :func:`steady_from`
    on are all short keeps its last full step, as that function keeps one step."""
    full = max(batches, default=0) if batch_size is None else batch_size
    whole = [index for index, images in enumerate(batches) if images == full]
    first = steady_from(warmup_steps, len(batches))
    return [index for index in whole if index >= first] or whole[-1:]


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
