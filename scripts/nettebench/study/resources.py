"""What each job asks a cluster for: CPUs, memory, wall time and GPUs, sized from its cell.

SLURM kills a job that outlives its ``--time`` or outgrows its ``--mem``, and one generous
constant for every job makes small cells queue behind the backfill for nodes they do not need.
So each training job asks for what its own cell needs, estimated from the model's cost, the
batch size, the image size, the epochs (or ``max_steps``) and the dataset's size, on purpose
on the slow side: compute rates are those of the study's own slowest hardware (its 16 GB T4 and
its 4-vCPU VM), the total is doubled, and nothing asks for less than :data:`MIN_RUNTIME_MIN`.
A cell that still needs more gets it with ``--set-resources cell_train:runtime=...``.

A data-parallel cell (``processes: N``) runs N processes on one node: its job asks for N GPUs
(``gpu``, which the SLURM executor submits as ``--gpus=N``), N times the CPUs and the
per-process memory (the decoded store once: its pages are shared), and the time of N devices
sharing the work at perfect scaling (``SAFETY`` covers an efficiency down to one half).

The workflow calls these functions while it plans (rules/common.smk), so this module imports
nothing heavy: no torch, no torchvision, no pandas.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nettebench.vocabulary.cell import CellSpec, store_frame_width


@dataclass(frozen=True)
class ModelCost:
    """What one image costs a model at 224 px: forward GFLOPs, parameters (millions), and the
    host memory a training step holds per image on a CPU (activations and their gradients)."""

    gflops: float
    params_m: float
    activation_mb: float


# Forward GFLOPs and parameters are torchvision's published figures at 224 px; activation MB
# per image were measured here (peak RSS of SGD training steps at batch 4 and 12, 224 px, CPU,
# torch 2.14: resnet18 33, resnet50 100, vgg19 62, efficientnet_b3 190) and, for the models not
# measured, scaled from their nearest measured relative.
MODEL_COSTS: dict[str, ModelCost] = {
    "resnet18": ModelCost(1.81, 11.7, 33),
    "resnet34": ModelCost(3.66, 21.8, 50),
    "resnet50": ModelCost(4.09, 25.6, 100),
    "resnet101": ModelCost(7.80, 44.5, 150),
    "resnet152": ModelCost(11.51, 60.2, 210),
    "vgg16": ModelCost(15.47, 138.4, 55),
    "vgg19": ModelCost(19.63, 143.7, 62),
    "mobilenet_v2": ModelCost(0.30, 3.5, 60),
    "efficientnet_b0": ModelCost(0.39, 5.3, 90),
    "efficientnet_b1": ModelCost(0.69, 7.8, 120),
    "efficientnet_b2": ModelCost(1.09, 9.1, 150),
    "efficientnet_b3": ModelCost(1.83, 12.2, 190),
}
# A model not in the table is assumed to cost as much as the most expensive one above, so an
# unknown model is over-, never under-requested.
UNKNOWN_MODEL = ModelCost(20.0, 150.0, 210)

# Compute rates, deliberately those of slow hardware. GPU: the study's T4 trained resnet50 in
# fp32 at ~95 img/s, i.e. 3 x 4.1 GFLOPs x 95 ~ 1.2 TFLOP/s effective (mixed precision is not
# counted: a request must also hold for O0). CPU: its 4-vCPU VM took 78.5 min for one epoch of
# resnet34 (9,469 images), ~22 GFLOP/s, ~5 per core.
GPU_TFLOPS = 1.0
CPU_GFLOPS_PER_CORE = 5.0
# Input pipelines per loader worker: decoding and augmenting Imagenette's 320 px JPEGs with PIL
# (the study's loader); the cached store skips the decode.
LOADER_IMG_S_PER_WORKER = {"pil": 60.0, "cached": 400.0}
STARTUP_S = 120.0  # interpreter, imports, CUDA context, model build, loader start
SAFETY = 2.0
MIN_RUNTIME_MIN = 10

# Host memory, MB: a process with torch and a model built (~720 MB measured on a CPU), the
# CUDA context and libraries a GPU process maps on top, one loader worker process.
BASE_MB = 1024
CUDA_HOST_MB = 2048
WORKER_MB = 400
PREFETCH_BATCHES = 2  # torch DataLoader's prefetch_factor, per worker
MEM_SAFETY = 1.5
MIN_MEM_MB = 2048
AUTO_BATCH = 256  # batch_size: auto starts here (nettebench.training.auto_batch.AUTO_BATCH_START)

# The ceiling bench (nettebench.benchmarks.ceiling): at most 10 warm-up + 30 timed steps, and on a
# CPU at most ~40 s of steps whatever the batch.
BENCH_STEPS = 40
BENCH_CPU_S = 40.0

# When nothing tells a dataset's size: Imagenette's (every imagenette2 size).
DEFAULT_IMAGES = (9469, 3925)


@dataclass(frozen=True)
class JobResources:
    """One job's request: what Snakemake's ``threads`` and ``resources`` are set to."""

    cpus: int
    mem_mb: int
    runtime: int  # minutes
    gpu: int

    def for_attempt(self, attempt: int) -> JobResources:
        """The request of Snakemake's ``attempt``-th try (``retries`` in profiles/slurm): a job
        SLURM killed for its time or memory limit asks for that many times more (its cell
        resumes from its checkpoint, so the extra time is not spent again on finished epochs)."""
        factor = max(1, int(attempt))
        return JobResources(
            cpus=self.cpus,
            mem_mb=self.mem_mb * factor,
            runtime=self.runtime * factor,
            gpu=self.gpu,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "cpus": self.cpus,
            "mem_mb": self.mem_mb,
            "runtime": self.runtime,
            "gpu": self.gpu,
        }


def model_cost(model: str) -> ModelCost:
    """The table entry for a torchvision or efficientnet_pytorch name (``efficientnet-b3``)."""
    return MODEL_COSTS.get(model.replace("-", "_").lower(), UNKNOWN_MODEL)


def uses_gpu(cell: CellSpec) -> bool:
    """Whether a cell trains on a GPU when one is there: ``auto`` and ``cuda`` cells do; on a
    cluster that is what makes them ask for one."""
    return cell.device != "cpu"


def cpus(cell: CellSpec) -> int:
    """One CPU per DataLoader worker, plus the training process itself, for each process."""
    return (cell.workers + 1) * cell.processes


def gpus(cell: CellSpec) -> int:
    """One GPU per process of a cell that trains on a GPU, none otherwise."""
    return cell.processes if uses_gpu(cell) else 0


def _batch(cell: CellSpec) -> int:
    return AUTO_BATCH if cell.batch_size == "auto" else int(cell.batch_size)


def _pixels(cell: CellSpec) -> float:
    """The image area relative to 224 x 224, which model costs are quoted at."""
    return (cell.image_size / 224) ** 2


def train_memory_mb(cell: CellSpec, images: tuple[int, int], *, workers: bool = True) -> int:
    """Host memory for training the cell (or, ``workers=False``, for its ceiling bench): each
    process's (its share of the batch, its workers), and a ``cached`` cell's store once."""
    cost = model_cost(cell.model)
    batch = max(1, _batch(cell) // cell.processes)
    gpu = uses_gpu(cell)
    mb = BASE_MB + (CUDA_HOST_MB if gpu else 0)
    # weights, gradients, momentum and one copy (fp32); on a GPU only the host-side copy
    mb += cost.params_m * (4 if gpu else 16)
    if not gpu:
        mb += batch * cost.activation_mb * _pixels(cell)
    if workers:
        batch_mb = batch * 3 * cell.image_size**2 * 4 / 2**20
        mb += cell.workers * (WORKER_MB + PREFETCH_BATCHES * batch_mb)
    if cell.processes > 1:  # every process's, and the job's own (torchrun's agent)
        mb = mb * cell.processes + BASE_MB
    if workers and cell.loader == "cached":  # the decoded store, mapped or copied into host memory
        side = cell.store_resolution()
        train_images, val_images = images  # train keeps whole frames, val a square
        mb += (train_images * store_frame_width(side) + val_images * side) * side * 3 / 2**20
    return _round_mb(max(MIN_MEM_MB, mb * MEM_SAFETY))


def _round_mb(mb: float) -> int:
    return int(math.ceil(mb / 256) * 256)


def _img_s(cell: CellSpec, flops_per_image: float, cores: int) -> float:
    """Images per second of the model alone on the cell's devices (slow-hardware rates; the
    ``cores`` of every process on a CPU)."""
    gpu = GPU_TFLOPS * 1e12 * cell.processes
    rate = gpu if uses_gpu(cell) else CPU_GFLOPS_PER_CORE * 1e9 * cores
    return rate / flops_per_image


def train_seconds(cell: CellSpec, images: tuple[int, int], cores: int) -> float:
    """Estimated wall time of training the cell: startup plus every epoch, train and val."""
    train_images, val_images = images
    batch = _batch(cell)
    if cell.max_steps is not None:  # that many steps per epoch, the rest extrapolated
        train_images = min(train_images, cell.max_steps * batch)
        val_images = min(val_images, cell.max_steps * batch)
    forward = model_cost(cell.model).gflops * 1e9 * _pixels(cell)
    workers = max(cell.workers, 1) * cell.processes
    loader = workers * LOADER_IMG_S_PER_WORKER.get(cell.loader, 60.0)
    train_rate = min(_img_s(cell, 3 * forward, cores), loader)  # forward + backward
    val_rate = min(_img_s(cell, forward, cores), loader)
    epoch_s = train_images / train_rate + val_images / val_rate
    return STARTUP_S + cell.epochs * epoch_s


def bench_seconds(cell: CellSpec, cores: int) -> float:
    """Estimated wall time of the cell's compute-ceiling bench."""
    forward = model_cost(cell.model).gflops * 1e9 * _pixels(cell)
    steps_s = BENCH_STEPS * _batch(cell) / _img_s(cell, 3 * forward, cores)
    if not uses_gpu(cell):
        steps_s = min(steps_s, BENCH_CPU_S)
    return STARTUP_S + steps_s


def _minutes(seconds: float) -> int:
    return max(MIN_RUNTIME_MIN, math.ceil(SAFETY * seconds / 60))


def train_job(cell: CellSpec, images: tuple[int, int], *, ceiling: bool = False) -> JobResources:
    """The request of a cell's training job (cell_train, cpu_baseline_train); ``ceiling``: the
    job also measures the cell's compute ceiling after its epochs (a matrix cell's job)."""
    cores = cpus(cell)
    seconds = train_seconds(cell, images, cores)
    if ceiling:
        seconds += bench_seconds(cell, cores) - STARTUP_S
    return JobResources(
        cpus=cores,
        mem_mb=train_memory_mb(cell, images),
        runtime=_minutes(seconds),
        gpu=gpus(cell),
    )


def bench_job(cell: CellSpec) -> JobResources:
    """The request of a compute-ceiling run of its own (``python -m nettebench benchmarks
    ceiling``; the workflow measures ceilings inside cell_train): no loader, fixed steps."""
    cores = cpus(cell)
    return JobResources(
        cpus=cores,
        mem_mb=train_memory_mb(cell, (0, 0), workers=False),
        runtime=_minutes(bench_seconds(cell, cores)),
        gpu=gpus(cell),
    )


def profile_job(cell: CellSpec, images: tuple[int, int]) -> JobResources:
    """The request of a cell's profiling run (cell_profile): the training job's CPUs and memory
    (it runs the cell's own loader), and a ceiling bench's runtime (a short window of steps)."""
    train = train_job(cell, images)
    return JobResources(
        cpus=train.cpus, mem_mb=train.mem_mb, runtime=bench_job(cell).runtime, gpu=train.gpu
    )


# Preparing data (generate, extract, decode into the store): CPU work, roughly this many images
# per second and core, with memory for the worker processes.
DATA_CPUS = 2
DATA_IMG_S_PER_CORE = 50.0
DATA_MEM_MB = 4096


def data_job(images: tuple[int, int]) -> JobResources:
    """The request of a job that prepares a dataset of ``images`` (train, val) images."""
    seconds = STARTUP_S + sum(images) / (DATA_IMG_S_PER_CORE * DATA_CPUS)
    return JobResources(cpus=DATA_CPUS, mem_mb=DATA_MEM_MB, runtime=_minutes(seconds), gpu=0)


# Building a library wheel from source (library_build): a compiler run, torchvision's C++/CUDA
# ops or apex's extensions. Generous, as a compile killed at its limit starts over.
BUILD_CPUS = 8
BUILD_MEM_MB = 16384
BUILD_RUNTIME_MIN = 120


def build_job() -> JobResources:
    """The request of a library_build job (a wheel compiled against the installed torch)."""
    return JobResources(cpus=BUILD_CPUS, mem_mb=BUILD_MEM_MB, runtime=BUILD_RUNTIME_MIN, gpu=0)


def dataset_images(
    synthetic: Mapping[str, Any] | None,
    catalog_counts: tuple[int | None, int | None] | None,
    info_path: str | Path | None = None,
) -> tuple[int, int]:
    """(train, val) image counts of a dataset, from the best source there is: its dataset.json
    once it exists, the synthetic spec, the catalog; Imagenette's otherwise."""
    if info_path is not None and Path(info_path).is_file():
        try:
            info = json.loads(Path(info_path).read_text(encoding="utf-8"))
            return int(info["train_images"]), int(info["val_images"])
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a broken dataset.json is the dataset rules' business, not the planner's
    if synthetic:
        return int(synthetic.get("train_images", 0)), int(synthetic.get("val_images", 0))
    if catalog_counts and None not in catalog_counts:
        return int(catalog_counts[0]), int(catalog_counts[1])
    return DEFAULT_IMAGES
