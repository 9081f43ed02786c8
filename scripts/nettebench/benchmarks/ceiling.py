"""The compute ceiling: training-step throughput with no input pipeline.

One batch of random images and targets is made once on the training device; then the training
step the trainer itself builds (:func:`nettebench.training.runner.make_runner`, so precision
handling, channels_last and cuDNN settings are identical) trains on it over and over. The steps
per second this reaches is what the same model, precision and batch size could do if the input
pipeline cost nothing, so a report can set a cell's training img/s against it::

    python -m nettebench benchmarks ceiling --model resnet50 --precision O1 --batch-size 256 \\
        --out ceiling.json

Timed like a GPU engineer: ``warmup_steps`` steps first (cuDNN autotuning, allocator growth) are
not timed, the device is synchronised before the clock starts, every timed step is measured on
its own (CUDA events on a GPU, a synchronised ``perf_counter`` on a CPU) and the median is
reported with the 10th and 90th percentiles. Every option of the trainer's cell
(:class:`nettebench.vocabulary.cell.CellSpec`) is accepted, so the workflow can pass a cell's
arguments unchanged; the ones a ceiling does not depend on (dataset, epochs, workers, ...) are
ignored.

An out-of-memory batch or a precision the device cannot run is a result (``status`` "oom" or
"unsupported", exit status 0), as it is for the trainer.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from nettebench.builds import activate as libraries
from nettebench.builds.activate import LibraryError
from nettebench.datasets.info import load_data_root
from nettebench.models.errors import ModelLibraryMissing
from nettebench.records import conditions, environment
from nettebench.study.cell_options import CommandParser, add_cell_options, cell_from_args
from nettebench.training.apex import ApexAmpUnavailable, ApexUnsupported
from nettebench.training.cli import resolve_device
from nettebench.training.distributed import DataParallel
from nettebench.training.loop import peak_memory_mb, reset_peak_memory, synchronize
from nettebench.training.outcome import oom_message, unsupported_reason
from nettebench.vocabulary import commands, record_keys
from nettebench.vocabulary.atomic import write_text_atomic
from nettebench.vocabulary.cell import CellSpec

WARMUP_STEPS = 10
STEPS = 30
# On a CPU a step of a big batch can take seconds: the timed steps stop once they have taken
# this long, and warm-up once it has taken a third of it, but never before MIN_STEPS timed and
# MIN_WARMUP_STEPS warm-up steps (or all that were asked, if fewer). A ceiling is compared with
# a cell by its fast end (batch / p10 step time, report.caveats): from 3 steps, after one
# warm-up step, that was the median of steps still paying for first use (oneDNN primitives,
# the allocator's pages), and a quiet cell "beat" it (resnet34 batch 64 at 206 img/s against
# 151). Seen on the 2-core dev VM (resnet18, batch 16, 112 px, one thread, no warm-up; the
# machine loaded, so only indicative): the first three steps 606-681 ms, steps 9-14 495-551 ms.
# Ten timed steps give a p10 that is a step's own speed; three warm-up steps pay first use.
MAX_SECONDS = 30.0
MIN_STEPS = 10
MIN_WARMUP_STEPS = 3
NUM_CLASSES = 10  # Imagenette's
CEILING_DATASET = "ceiling"  # the cell's dataset when measure_ceiling is given none
PEAK_MEM_CUDA = "cuda_allocated"  # torch.cuda.max_memory_allocated for the measured batch size
PEAK_MEM_CPU = "cpu_max_rss"  # the whole process's peak resident set size

# Keys of the record measure_ceiling returns (and the CLI writes), in order.
CEILING_KEYS = (
    "status",  # one of record_keys.STATUSES
    "message",  # str | None: why the status is not "ok", with a hint
    "img_s",  # float | None: batch_size / median step time
    "step_ms_median",  # float | None: median of the timed steps, milliseconds
    "step_ms_p10",  # float | None: 10th percentile
    "step_ms_p90",  # float | None: 90th percentile
    "steps",  # int: timed steps
    "warmup_steps",  # int: untimed steps before them
    "peak_mem_mb",  # float | None: see peak_mem_kind
    "peak_mem_kind",  # "cuda_allocated" | "cpu_max_rss"
    "device",  # dict: {"type": "cpu"|"cuda", "name": str, "threads": int}
    "model",
    "precision",
    "batch_size",  # int: the batch size measured (the one chosen when the cell says auto)
    "batch_size_requested",  # the cell's batch_size: an int or "auto"
    "image_size",
    "num_classes",
    "channels_last",  # bool: model and inputs in torch.channels_last
    "cell",  # dict: every parameter of the cell (lr, seed, deterministic, amp_backend, ...)
    "cell_id",  # str: the cell's hash, to join a ceiling to that cell's metrics.json
    "environment",  # dict: see nettebench.records.environment.collect
    "context",  # "cell job": right after its cell's epochs, in their process; or "standalone"
    "conditions",  # dict | None: what else the machine did during the timed steps
    # (nettebench.records.conditions), to compare with the cell's own
)
CONTEXT_CELL_JOB = "cell job"
CONTEXT_STANDALONE = "standalone"


def measure_ceiling(
    model: str,
    precision: str,
    batch_size: int | str,
    *,
    image_size: int = 224,
    num_classes: int = NUM_CLASSES,
    device: str = "auto",
    warmup_steps: int = WARMUP_STEPS,
    steps: int = STEPS,
    threads: int | None = None,
    channels_last: bool | str = "auto",
    **cell_options: Any,
) -> dict[str, Any]:
    """Time ``steps`` training steps on a batch already on the device; return the record.

    ``cell_options`` are further :class:`CellSpec` parameters (``lr``, ``seed``,
    ``deterministic``, ``amp_backend``, ``dataset``, ...), with the trainer's defaults.
    ``batch_size`` "auto" measures the batch size the trainer would choose.
    """
    cell = CellSpec(
        **{"dataset": CEILING_DATASET, **cell_options},
        model=model,
        precision=precision,
        batch_size=batch_size,
        image_size=image_size,
        device=device,
        channels_last=channels_last,
    )
    return measure_cell(
        cell, num_classes=num_classes, warmup_steps=warmup_steps, steps=steps, threads=threads
    )


def measure_cell(
    cell: CellSpec,
    *,
    num_classes: int = NUM_CLASSES,
    warmup_steps: int = WARMUP_STEPS,
    steps: int = STEPS,
    threads: int | None = None,
    builds_dir: str | Path | None = None,
    context: str = CONTEXT_STANDALONE,
    environment_record: dict[str, Any] | None = None,
    max_seconds: float | None = None,
) -> dict[str, Any]:
    """The compute ceiling of a trainer's cell: its model, precision, batch and step settings.

    ``context`` says where it is measured (:data:`CONTEXT_CELL_JOB` when the cell's own job
    measures it after its epochs, reusing that job's ``environment_record``); ``max_seconds``
    caps the timed steps on a CPU (default :data:`MAX_SECONDS`).

    The training step is built by the trainer's own code (cuDNN and determinism settings, the
    precision's step, channels_last, the apex backend, the choice of an ``auto`` batch size);
    only the data differs. Options that cannot change a step's speed are ignored (``dataset``,
    ``epochs``, ``workers``, ``max_steps``, ...), and so is ``pretrained``: weights do not change
    the speed, and a ceiling should not download them. A cell naming a library build runs
    against it, as in the trainer (:func:`nettebench.builds.activate.activate`).
    """
    libraries.activate(cell, builds_dir)
    # Boundary (see the package docstring): imported after activate(), because it imports
    # torchvision, and a cell's torchvision build must be first on the path before that.
    from nettebench.training.auto_batch import choose_batch_size
    from nettebench.training.runner import configure_determinism

    if steps < 1 or warmup_steps < 0:
        raise ValueError(f"need steps >= 1 and warmup_steps >= 0, got {steps} and {warmup_steps}")
    parallel = DataParallel.from_env()  # in a data-parallel cell's job: this process's part
    parallel.share_threads(threads)
    device = resolve_device(cell.device)
    on_gpu = device.type == "cuda"
    record: dict[str, Any] = dict.fromkeys(CEILING_KEYS)
    record.update(
        steps=steps,
        warmup_steps=warmup_steps,
        peak_mem_kind=PEAK_MEM_CUDA if on_gpu else PEAK_MEM_CPU,
        device=environment.device_info(device),
        model=cell.model,
        precision=cell.precision,
        batch_size=cell.batch_size,
        batch_size_requested=cell.batch_size,
        image_size=cell.image_size,
        num_classes=num_classes,
        channels_last=cell.uses_channels_last(),
        cell=cell.as_dict(),
        cell_id=cell.cell_id(),
        environment=environment_record or environment.collect(),
        context=context,
    )

    reason = unsupported_reason(cell, device)
    if reason:
        record.update(status=record_keys.STATUS_UNSUPPORTED, message=reason)
        return record

    runnable = dataclasses.replace(cell, pretrained=False)
    try:
        configure_determinism(runnable, device)
        record["batch_size"] = choose_batch_size(runnable, device, num_classes)
        reset_peak_memory(device)  # after the auto search's trials
        step_s, record["warmup_steps"], record["conditions"] = _time_steps(
            runnable,
            device,
            num_classes,
            record["batch_size"],
            (warmup_steps, steps, max_seconds),
            parallel,
        )
        record["steps"] = len(step_s)
    except (torch.OutOfMemoryError, MemoryError) as error:
        record.update(status=record_keys.STATUS_OOM, message=oom_message(cell, device, error))
    except ApexUnsupported as error:
        record.update(status=record_keys.STATUS_UNSUPPORTED, message=str(error))
    else:
        median = statistics.median(step_s)
        p10, p90 = _percentiles(step_s)
        record.update(
            status=record_keys.STATUS_OK,
            img_s=record["batch_size"] / median,
            step_ms_median=1000 * median,
            step_ms_p10=1000 * p10,
            step_ms_p90=1000 * p90,
        )
    finally:
        if on_gpu:
            torch.cuda.empty_cache()
    record["peak_mem_mb"] = peak_memory_mb(device)
    return record


def _time_steps(
    cell: CellSpec,
    device: torch.device,
    num_classes: int,
    batch: int,
    budget: tuple[int, int, float | None],
    parallel: DataParallel,
) -> tuple[list[float], int, dict[str, Any]]:
    """Build the trainer's step and one batch on the device; warm up; time each step.

    ``budget`` is (warm-up steps, timed steps, ``max_seconds``). Returns the step times, the
    warm-up steps run and the timing conditions of the timed steps. On a CPU both phases stop
    early when they exceed their share of ``max_seconds`` (keeping at least MIN_WARMUP_STEPS
    warm-up and MIN_STEPS timed steps, see there), so a large batch costs seconds, not the
    better part of an hour; in a data-parallel cell every process stops at the same step
    (``parallel.any``: each step all-reduces).
    """
    warmup, steps, max_seconds = budget
    # Boundary (see the package docstring): imported after activate(), because it imports
    # torchvision, and a cell's torchvision build must be first on the path before that.
    from nettebench.training.runner import make_runner

    # The probe first (nvidia-smi -L, NVML's handle): nothing but the warm-up's own
    # synchronisation lies between the warm-up and the first timed step.
    probe = conditions.Probe(gpu=conditions.gpu_target(device), pid=parallel.job_pid)
    runner = make_runner(cell, device, num_classes, batch)
    runner.model.train()
    batch = parallel.local_batch(batch)  # processes > 1: each one's share, steps in DDP
    size = cell.image_size
    images = runner.prepare_inputs(torch.randn(batch, 3, size, size, device=device))
    targets = torch.randint(num_classes, (batch,), device=device)

    on_gpu = device.type == "cuda"
    max_seconds = MAX_SECONDS if max_seconds is None else max_seconds
    warm_start = time.perf_counter()
    warmed = 0
    while warmed < warmup:
        runner.step(images, targets)
        warmed += 1
        late = time.perf_counter() - warm_start > max_seconds / 3
        if parallel.any(not on_gpu and warmed >= MIN_WARMUP_STEPS and late):
            break
    synchronize(device)
    window = probe.start(gpu=True)
    if on_gpu:
        seconds = _time_cuda(runner, images, targets, steps)
        return seconds, warmed, probe.stop(window, gpu=True)
    seconds: list[float] = []
    while len(seconds) < steps:
        start = time.perf_counter()
        runner.step(images, targets)
        synchronize(device)
        seconds.append(time.perf_counter() - start)
        if parallel.any(len(seconds) >= MIN_STEPS and sum(seconds) > max_seconds):
            break
    return seconds, warmed, probe.stop(window, gpu=True)


def _time_cuda(runner, images, targets, steps: int) -> list[float]:
    """Per-step GPU times from CUDA events, without a host synchronisation between steps."""
    events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    events[0].record()
    for index in range(steps):
        runner.step(images, targets)
        events[index + 1].record()
    events[-1].synchronize()
    return [start.elapsed_time(end) / 1000 for start, end in itertools.pairwise(events)]


def _percentiles(values: list[float]) -> tuple[float, float]:
    """10th and 90th percentiles (inclusive method, so they bracket the median)."""
    if len(values) < 2:
        return values[0], values[0]
    cuts = statistics.quantiles(values, n=10, method="inclusive")
    return cuts[0], cuts[-1]


def summary_line(record: dict[str, Any]) -> str:
    """``resnet50 O1 batch 256 on NVIDIA H200: compute ceiling 5,765 img/s (no input pipeline;
    median step 44.4 ms)``: named as the ceiling, since the cell's log holds its training img/s
    (a lower number, with the loader) a few lines above."""
    device = record["device"]
    where = device["name"]
    if device["type"] == "cpu":
        where = f"{where} ({device['threads']} threads)"
    head = f"{record['model']} {record['precision']} batch {record['batch_size']} on {where}"
    if record["status"] != record_keys.STATUS_OK:
        return f"{head}: {record['status']}: {record['message']}"
    line = (
        f"{head}: compute ceiling {record['img_s']:,.0f} img/s (no input pipeline; median step "
        f"{record['step_ms_median']:.1f} ms)"
    )
    found = record.get("conditions") or {}
    if found.get("interference"):
        line += f"; timed under interference: {'; '.join(found['interference_reasons'])}"
    return line


def build_parser() -> argparse.ArgumentParser:
    """Every CellSpec option (so a rule passes a cell's arguments as it does to the trainer),
    plus the ceiling's own."""
    parser = CommandParser(prog="python -m nettebench benchmarks ceiling", description=__doc__)
    parser.add_argument("--out", help="write the record here as JSON")
    parser.add_argument(
        "--data",
        help="dataset.json or a train/ + val/ folder: the number of classes comes from it",
    )
    parser.add_argument(
        "--num-classes",
        type=int,
        default=NUM_CLASSES,
        help="classifier width when there is no --data (default: %(default)s, Imagenette's)",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument(
        "--warmup-steps", type=int, default=WARMUP_STEPS, help="untimed steps first"
    )
    parser.add_argument("--steps", type=int, default=STEPS, help="timed steps")
    libraries.add_builds_dir_option(parser)
    add_cell_options(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    fix = (LibraryError, ApexAmpUnavailable, ModelLibraryMissing)  # the user's to fix
    return commands.run(build_parser(), _ceiling, argv, errors=fix, stream=sys.stdout)


def _ceiling(args: argparse.Namespace) -> Iterator[str]:
    slurm_line = environment.slurm_job_line()  # under SLURM: job id, node, scheduler's log
    if slurm_line:
        print(slurm_line, file=sys.stderr, flush=True)
    num_classes = args.num_classes
    if args.data:
        num_classes = len(load_data_root(args.data).classes)
    cell = cell_from_args(args, dataset=CEILING_DATASET)
    record = measure_cell(
        cell,
        num_classes=num_classes,
        warmup_steps=args.warmup_steps,
        steps=args.steps,
        threads=args.threads,
        builds_dir=args.builds_dir,
    )
    yield summary_line(record)
    if args.out:
        text = json.dumps(record, indent=2, default=str) + "\n"
        write_text_atomic(Path(args.out), text)


if __name__ == "__main__":  # run as python -m nettebench benchmarks ceiling
    sys.exit(commands.moved(__spec__.name))
