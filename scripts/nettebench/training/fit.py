"""Train one cell epoch by epoch: data, model, precision, checkpoints, per-epoch rows.

:mod:`nettebench.training.cli` decides what a run's outcome is (ok, oom, unsupported) and writes the
record; this module does the training itself. Every epoch is seeded from (seed, epoch), so a run
resumed from its checkpoint draws the same batches and augmentations as one that never stopped,
and a checkpoint is written after every epoch but the last (the results follow it at once). Under a
:class:`~.interrupts.StopOnSignal`, a SIGINT or SIGTERM stops the epochs before the next batch,
the last checkpoint kept.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from nettebench.data import store, store_build, val_sample
from nettebench.data.cached import (
    RESIDENT,
    build_cached_loaders,
    loader_device_mb,
    resolve_placement,
    store_bytes,
)
from nettebench.data.pil import build_pil_loaders, require_full_batch
from nettebench.datasets.info import load_data_root
from nettebench.records import conditions, energy
from nettebench.records import files as records
from nettebench.training import checkpoint, startup
from nettebench.training.auto_batch import choose_batch_size
from nettebench.training.context import RunContext
from nettebench.training.distributed import DataParallel
from nettebench.training.interrupts import stop_between_batches
from nettebench.training.loop import (
    evaluate,
    peak_memory_mb,
    reset_peak_memory,
    step_limit,
    synchronize,
    train_epoch,
)
from nettebench.training.outcome import epoch_row, log_epoch
from nettebench.training.runner import configure_determinism, lr_at, make_runner, seed_epoch
from nettebench.vocabulary.cell import CellSpec


@dataclass
class FitResult:
    batch_size: int  # the batch size used (chosen when the cell says auto)
    resumed_from_epoch: int | None  # epochs already done by earlier processes, None if fresh
    earlier_wall_s: float  # wall time earlier processes spent on the finished epochs
    compile_s: float | None = None  # the torch.compile warm-up (compile: true), else None
    placement: str | None = None  # loader cached: "resident" or "streamed"; None for pil
    conditions: dict[str, Any] | None = None  # what else the machine did during the epochs
    store_mem_mb: float | None = None  # the loader's device memory (store, scratch), not in peak


def current_store(cell: CellSpec, data_path, store_dir: Path):
    """The cell's decoded store, opened: built first when missing or stale (by one process of
    a data-parallel cell, while the others wait)."""
    resolution = cell.store_resolution()
    stale = not store.store_is_current(store_dir, data_path, resolution, "shorter_side")
    DataParallel.from_env().once(
        stale, lambda: store_build.build_store(data_path, store_dir, resolution=resolution)
    )
    return store.open_store(store_dir)


def store_reserve(cell: CellSpec, data_path, store_dir: Path, device: torch.device) -> int:
    """The device bytes a ``cached`` cell's store will hold during its epochs (0 when it
    streams from the host, on a CPU, or for ``pil``), decided as the loader decides it."""
    if cell.loader != "cached" or device.type != "cuda":
        return 0
    opened = current_store(cell, data_path, store_dir)
    if resolve_placement(cell.store_placement, opened, device) != RESIDENT:
        return 0
    return store_bytes(opened)


def val_padding(cell: CellSpec, device: torch.device, batch_size: int) -> int | None:
    """The validation batch shape to pad to (see :func:`nettebench.training.loop.evaluate`):
    the training batch size where a second shape costs time (cuDNN autotuning on a GPU, a
    recompile under ``compile: true``), else None (a CPU would only compute the padding)."""
    return batch_size if device.type == "cuda" or cell.compile else None


def compile_warmup(runner, batch_size: int, image_size: int) -> float:
    """Compile a ``compile: true`` cell's model before the first epoch; return the seconds.

    One training step and one evaluation forward at the cell's batch shape, on zeros, so that
    torch.compile builds both graphs here and not inside the timed epochs. The weights,
    optimiser and loss-scaler state are put back afterwards, so the cell learns exactly as if
    the warm-up had not happened. (Validation is padded to the same batch shape,
    :func:`val_padding`, so no odd-sized last batch compiles a second graph in the epochs.)
    """

    saved = copy.deepcopy(runner.state_dict())
    synchronize(runner.device)
    start = time.perf_counter()
    images = runner.prepare_inputs(torch.zeros(batch_size, 3, image_size, image_size))
    targets = torch.zeros(batch_size, dtype=torch.int64, device=runner.device)
    runner.model.train()
    runner.step(images, targets)
    runner.model.eval()
    with torch.no_grad(), runner.autocast():
        runner.model(images)
    synchronize(runner.device)
    seconds = time.perf_counter() - start
    runner.load_state_dict(saved)
    return seconds


def build_loaders(cell: CellSpec, data_root, data_path, batch_size: int, device, store_dir: Path):
    """The cell's input pipeline: the reference PIL loader, or batches from the decoded store
    (``data_path``, the dataset.json or tree the cell was given, identifies the store's source).
    With ``max_steps`` validation reads a fixed class-balanced sample
    (:mod:`nettebench.data.val_sample`), and ``val_steps_full`` keeps the full set's batches.
    Both train full batches only: a training split smaller than one batch is refused."""
    sample = val_sample.sample_size(cell.max_steps, batch_size)
    if cell.loader == "cached":
        opened = current_store(cell, data_path, store_dir)
        require_full_batch(len(opened.train_labels), batch_size)
        full_val = len(opened.val_labels)
        if sample is not None:
            opened = val_sample.balanced_store(opened, sample)
        loaders = build_cached_loaders(
            opened,
            image_size=cell.image_size,
            batch_size=batch_size,
            device=device,
            channels_last=cell.uses_channels_last(),
            workers=cell.workers,
            placement=cell.store_placement,
        )
        if sample is not None:
            loaders.val_steps_full = -(-full_val // batch_size)
        return loaders

    loaders = build_pil_loaders(
        data_root.train_dir,
        data_root.val_dir,
        image_size=cell.image_size,
        batch_size=batch_size,
        workers=cell.workers,
        pin_memory=device.type == "cuda",
        skip=data_root.skipped,
    )
    require_full_batch(len(loaders.train.dataset), batch_size)
    if sample is not None:
        loaders.val_steps_full = len(loaders.val)
        loaders.val = val_sample.balanced_loader(loaders.val, sample)
    return loaders


@dataclass
class _Prepared:
    """What the epochs run with: the runner, this process's loaders, the batch sizes."""

    runner: Any
    loaders: Any
    batch_size: int  # the global batch
    local_batch: int  # this process's share of it


def fit(run: RunContext, rows: list[dict[str, Any]]) -> FitResult:
    """Train ``run.cell``, appending one row per epoch to ``rows`` (kept on an OOM).

    ``run.store_dir`` is where a ``cached`` cell's decoded store lives (built there if missing
    or stale); the workflow builds one per dataset and resolution and passes it. With
    ``run.stop``, the epochs end with :class:`~.interrupts.Interrupted` before the next batch
    once a signal came; ``rows`` then holds the epochs the checkpoint on disk holds.
    ``run.probe`` measures the timing conditions of every epoch (its row's conditions columns)
    and of all the epochs this process runs (``FitResult.conditions``).
    """
    cell, probe = run.cell, run.probe
    configure_determinism(cell, run.device)
    key = run.key or {"cell": cell.cell_id()}  # the result's key (training.validity)
    saved = checkpoint.load(run.out_dir, key)
    ready, result = _prepare(run, saved)
    if saved:
        ready.runner.load_state_dict(saved["trainer"])
        rows.extend(saved["rows"])
        result.resumed_from_epoch = len(rows)
        result.earlier_wall_s = saved["wall_s"]
        checkpoint.resumed(run.out_dir, cell, len(rows))
    if cell.compile:
        result.compile_s = compile_warmup(ready.runner, ready.local_batch, cell.image_size)
        print(f"compiled the model in {result.compile_s:.1f} s (apart from the epochs)", flush=True)
        startup.mark("compile")
    batches = (
        stop_between_batches(ready.loaders.train, run.parallel.agreed(run.stop)),
        stop_between_batches(ready.loaders.val, run.stop),
    )
    if run.stop:
        run.stop.defer()  # from here on a signal ends the epochs before the next batch
    first_epoch = len(rows)  # the first epoch this process runs (after a resume: not epoch 0)
    run_window = probe.start(gpu=True) if probe else None
    startup.first_step()
    for epoch in range(first_epoch, cell.epochs):
        epoch_window = probe.start() if probe else None
        # warm-up is excluded from img/s in the first epoch this process runs
        warmup = run.warmup_steps if epoch == first_epoch else 0
        rows.append(_epoch(run, ready, batches, epoch, warmup))
        if probe:
            rows[-1].update(conditions.epoch_columns(probe.stop(epoch_window)))
        if run.parallel.writer:  # rank 0 writes a data-parallel cell's epochs and checkpoints
            _record_epoch(run, ready, rows, key, result.earlier_wall_s)
    startup.last_step()
    result.store_mem_mb = loader_device_mb(ready.loaders, run.device) or result.store_mem_mb
    if probe and first_epoch < cell.epochs:
        result.conditions = probe.stop(run_window, gpu=True)
    if run.weights is not None and run.parallel.writer:  # inference accuracy by precision
        checkpoint.save_weights(run.weights, ready.runner.model, cell.cell_id())
    startup.mark("weights")
    return result


def _prepare(run: RunContext, saved) -> tuple[_Prepared, FitResult]:
    """The batch size (the checkpoint's, or the cell's, chosen when auto), the runner and this
    process's loaders."""
    cell, device = run.cell, run.device
    data_root = load_data_root(run.data)
    num_classes = len(data_root.classes)
    store_dir = Path(run.store_dir) if run.store_dir else run.out_dir / "store"
    data_path = run.data or data_root.root
    if saved:
        batch_size = saved["batch_size"]
    else:
        reserve = (
            store_reserve(cell, data_path, store_dir, device) if cell.batch_size == "auto" else 0
        )
        batch_size = choose_batch_size(cell, device, num_classes, reserve_bytes=reserve)
    # The runner first: a backend that refuses the device (apex on a CPU) says so before a
    # store is built for nothing.
    runner = make_runner(cell, device, num_classes, batch_size, run.parallel)
    startup.mark("model")
    loaders = build_loaders(cell, data_root, data_path, batch_size, device, store_dir)
    startup.mark("store")
    loaders, local_batch = run.parallel.shard(loaders, batch_size)  # this process's share
    result = FitResult(batch_size, None, 0.0, placement=loaders.placement)
    # A resident store is allocated before the epochs and stays: reported apart, so that the
    # peak memory of pil and cached cells compares the training's own.
    store_mb = loaders.device_bytes / 2**20 if device.type == "cuda" else 0.0
    result.store_mem_mb = store_mb if loaders.device_bytes and device.type == "cuda" else None
    if loaders.placement is not None:
        print(f"cached store: {loaders.placement} ({device})", flush=True)
    return _Prepared(runner, loaders, batch_size, local_batch), result


def _epoch(run: RunContext, ready: _Prepared, batches, epoch: int, warmup: int) -> dict:
    """Train and validate one 0-based epoch; its row (numbers over every process)."""
    cell, device, runner = run.cell, run.device, ready.runner
    train_batches, val_batches = batches
    steps_per_epoch = len(ready.loaders.train)
    seed_epoch(cell.seed, epoch, ready.loaders.generator)
    lr = lr_at(cell, epoch, ready.batch_size)
    runner.set_lr(lr)
    reset_peak_memory(device)
    span = energy.SpanMeter(run.probe, device.type) if run.probe else None
    with tqdm(
        total=step_limit(steps_per_epoch, cell.max_steps),
        desc=f"epoch {epoch + 1}/{cell.epochs}",
        unit="step",
        disable=None,
        leave=False,
    ) as progress:
        train = train_epoch(
            runner,
            train_batches,
            steps_per_epoch=steps_per_epoch,
            max_steps=cell.max_steps,
            warmup_steps=warmup,
            progress=progress,
            span=span,
            batch_size=ready.local_batch,  # a step of another size is no steady step
        )
    steady = _steady_span(span, train, run.parallel.world, epoch)
    train = run.parallel.combine_train(train)  # over every process
    val = run.parallel.validate(
        runner,
        lambda local: evaluate(
            local,
            val_batches,
            total_steps=ready.loaders.val_steps_full or len(ready.loaders.val),
            max_steps=cell.max_steps,
            pad_to=val_padding(cell, device, ready.local_batch),
        ),
        ready.loaders.val,
    )
    peak_mb = peak_memory_mb(device) - loader_device_mb(ready.loaders, device)
    row = epoch_row(epoch + 1, lr, train, val, peak_mb, steps_per_epoch)
    row["_steady_energy"] = steady  # the record's steady_energy_* (training.outcome)
    return row


def _steady_span(span, train, processes: int, epoch: int) -> dict[str, Any] | None:
    """The 0-based ``epoch``'s steady span (:class:`~nettebench.records.energy.SpanMeter`) with
    its steps and images: this process's where the energy is its own GPU's (NVML), every
    process's where it is the packages' that they all share (RAPL; equal shards)."""
    if span is None:
        return None
    images = train.span_images * (1 if span.one_device else processes)
    return {"epoch": epoch + 1, "steps": train.span_steps, **span.measured(images)}


def _record_epoch(run: RunContext, ready: _Prepared, rows, key, earlier_wall_s: float) -> None:
    """epochs.csv so far, the epoch's log line, and a checkpoint after every epoch but the
    last (after the last one the results are written instead)."""
    startup.timed("writing", records.write_epochs, run.out_dir, rows)
    log_epoch(run.cell, rows[-1])
    if len(rows) < run.cell.epochs and checkpoint.due(run.device):
        checkpoint.save(
            run.out_dir,
            {
                "key": key,
                "batch_size": ready.batch_size,
                "rows": rows,
                "trainer": ready.runner.state_dict(),
                "wall_s": earlier_wall_s + time.time() - run.started_at,
            },
        )
