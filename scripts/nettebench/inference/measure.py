"""What an inference cell measures: Offline throughput, the pipeline's, SingleStream latency.

Three timed phases on one model (timm's ``benchmark.py`` and MLPerf Inference's scenarios):

- **Offline, device batch**: the cell's batch made once on the device; ``warmup`` batches untimed
  (cuDNN autotuning, allocator growth, a compile), then each batch timed on its own (CUDA events
  on a GPU, a synchronised ``perf_counter`` on a CPU). img/s = batch / median batch time.
- **Offline, through the pipeline**: the dataset's validation split as the trainer reads it
  (ImageFolder, PIL decode, resize to image_size / 0.875, centre crop, normalise, DataLoader with
  ``workers``), each batch moved to the device and classified. The model is warmed first, on
  the split's first batch and one batch of every other shape the pass will meet (the short last
  batch: a new shape recompiles under ``compile`` and autotunes cuDNN again), from a loader pass
  that is then closed: a loader's workers go on decoding while the model warms, and batches made
  then would reach the clock already waited for (one worker at 20 img/s read as 33). Then one
  pass over the split as an epoch reads it, from the loader's start (its workers' start-up) to
  the last result (repeated while a GPU pass is shorter than a second), capped at
  ``max_seconds`` on any device. Its img/s beside the device batch's shows what the input
  pipeline costs; the time spent waiting for a batch is recorded apart.
- **SingleStream** (batch-1 cells only): one query at a time, a preprocessed validation image in
  host memory copied to the device, classified, the result copied back; each query's latency
  from issue to result. ``latency_queries`` queries (MLPerf's minimum, 1,024, by default), fewer
  only when ``max_seconds`` is reached first (recorded: ``capped``).

Every phase stops at ``max_seconds`` on any device (a GPU too: a slow model or a batch sweep must
not run past its job's limit), after at least :data:`MIN_SAMPLES` timed samples; warm-up stops
after a third of it.

Every phase keeps its samples' spread (:func:`nettebench.records.spread.summary`, the exact
order-statistic intervals the trainer's step times use); the whole run records its timing
conditions (:mod:`nettebench.records.conditions`) and peak memory.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from nettebench.inference.model import InferenceModel
from nettebench.records import spread
from nettebench.training.loop import synchronize

MIN_SAMPLES = 3  # a capped CPU phase still times at least this many batches
OFFLINE_BATCHES = 50  # timed batches of the device-batch phase (fewer when capped on a CPU)
MIN_PIPELINE_S = 1.0  # a GPU pass over the validation split shorter than this is repeated
LATENCY_IMAGES = 64  # distinct preprocessed images the SingleStream queries cycle through


@dataclass(frozen=True)
class Budget:
    """How long each phase may take: untimed warm-up, timed samples, a CPU time cap."""

    warmup: int = 10
    max_seconds: float = 30.0
    latency_queries: int = 1024
    offline_batches: int = OFFLINE_BATCHES


def offline(model: InferenceModel, batch: int, image_size: int, budget: Budget) -> dict[str, Any]:
    """Device-batch throughput: per-batch times of a batch already on the device."""
    images = model.prepare(torch.randn(batch, 3, image_size, image_size))
    on_gpu = model.device.type == "cuda"
    compile_s = model.first_call_s(images) if model.compiled else None
    _warm(lambda: model(images), budget)
    if on_gpu:
        seconds = _cuda_times(lambda: model(images), budget.offline_batches, budget)
    else:
        seconds = _cpu_times(lambda: model(images), model.device, budget.offline_batches, budget)
    summary = spread.summary(seconds, quantiles=(0.9, 0.99))
    return {
        "img_s": batch / summary["median"],
        "img_s_low": batch / summary["median_high"] if summary["median_high"] else None,
        "img_s_high": batch / summary["median_low"] if summary["median_low"] else None,
        "batch_ms": spread.scaled(summary, 1000),
        "batches": len(seconds),
        "compile_s": compile_s,
    }


def pipeline(model: InferenceModel, loader: Iterable, budget: Budget) -> dict[str, Any]:
    """Throughput through the validation pipeline: decode to classification, batch by batch.
    ``loader`` is iterated more than once (a DataLoader or a list; not a one-shot iterator)."""
    on_gpu = model.device.type == "cuda"
    warming = iter(loader)
    first = next(warming, None)
    if first is None:
        return {"img_s": None, "images": 0}
    full = first[0].shape[0]
    model(model.prepare(first[0]))  # the first batch's shape: untimed
    for size in _short_batches(loader, full):  # the short last batch's shape: untimed too
        model(model.prepare(first[0][:size]))
    synchronize(model.device)
    del warming, first  # its workers stop: no batch the clock meets was made while warming
    seconds: list[float] = []  # per batch: waiting for it, then classifying it
    full_batches: list[float] = []
    wait = 0.0
    images = passes = 0
    capped = False
    start = mark = time.perf_counter()
    while not capped:
        for fetched, _ in loader:  # a fresh pass: its workers' start-up is timed, as an epoch's
            got = time.perf_counter()
            wait += got - mark
            model(model.prepare(fetched)).float().argmax(1).cpu()  # the result, on the host
            now = time.perf_counter()
            seconds.append(now - mark)
            mark = now
            images += fetched.shape[0]
            if fetched.shape[0] == full:
                full_batches.append(seconds[-1])
            if now - start > budget.max_seconds and len(seconds) >= MIN_SAMPLES:
                capped = True
                break
        passes += 1
        if not on_gpu or mark - start >= MIN_PIPELINE_S or passes >= 20:
            break
        # a GPU pass shorter than a second: the split again
    elapsed = mark - start
    return {
        "img_s": images / elapsed if images and elapsed else None,
        "images": images,
        "seconds": elapsed,
        "data_wait_share": wait / elapsed if elapsed else None,
        "passes": passes,
        "capped": capped,
        "batch_ms": spread.scaled(spread.summary(full_batches or seconds), 1000),
    }


def _short_batches(loader: Iterable, full: int) -> list[int]:
    """Sizes below ``full`` that ``loader`` will also yield (a DataLoader's short last batch;
    every size of a list of batches), so that the timed loop meets no new batch shape: a new
    shape recompiles under ``compile`` and autotunes cuDNN again in eager mode."""
    if hasattr(loader, "dataset") and getattr(loader, "batch_size", None):
        short = 0 if loader.drop_last else len(loader.dataset) % loader.batch_size
        return [short] if 0 < short < full else []
    if isinstance(loader, list | tuple):
        return sorted({b[0].shape[0] for b in loader if b[0].shape[0] < full})
    return []


def single_stream(
    model: InferenceModel, queries: list[torch.Tensor], budget: Budget
) -> dict[str, Any]:
    """SingleStream: per-query latency of one image at a time, issue to result on the host."""
    cycle = itertools.cycle(queries)

    def query() -> None:
        model(model.prepare(next(cycle))).float().cpu()

    _warm(query, budget)
    latencies: list[float] = []
    start = time.perf_counter()
    capped = False
    while len(latencies) < budget.latency_queries:
        issued = time.perf_counter()
        query()
        latencies.append(time.perf_counter() - issued)
        if time.perf_counter() - start > budget.max_seconds:
            capped = len(latencies) < budget.latency_queries
            break
    summary = spread.scaled(spread.summary(latencies, quantiles=(0.9, 0.99)), 1000)
    return {
        "queries": len(latencies),
        "queries_asked": budget.latency_queries,
        "capped": capped,
        "latency_ms": summary,
        "qps": len(latencies) / (time.perf_counter() - start),
    }


def _warm(call, budget: Budget) -> int:
    """``budget.warmup`` untimed calls, stopping after a third of the time cap (on a GPU the
    host's clock: a call returns once queued, and the queue is bounded)."""
    start = time.perf_counter()
    done = 0
    while done < budget.warmup:
        call()
        done += 1
        if time.perf_counter() - start > budget.max_seconds / 3:
            break
    return done


def _cpu_times(call, device, count: int, budget: Budget) -> list[float]:
    seconds: list[float] = []
    while len(seconds) < count:
        start = time.perf_counter()
        call()
        synchronize(device)
        seconds.append(time.perf_counter() - start)
        if len(seconds) >= MIN_SAMPLES and sum(seconds) > budget.max_seconds:
            break
    return seconds


def _cuda_times(call, count: int, budget: Budget) -> list[float]:
    """Per-batch GPU times from CUDA events, no host synchronisation between batches; no more
    batches are queued once the host has spent ``max_seconds`` queueing them."""
    events = [torch.cuda.Event(enable_timing=True) for _ in range(count + 1)]
    start = time.perf_counter()
    events[0].record()
    done = 0
    while done < count:
        call()
        done += 1
        events[done].record()
        if done >= MIN_SAMPLES and time.perf_counter() - start > budget.max_seconds:
            break
    events[done].synchronize()
    return [a.elapsed_time(b) / 1000 for a, b in itertools.pairwise(events[: done + 1])]
