"""The config's ``inference:`` section: inference cells, their paths, and the accuracy jobs.

An inference cell measures one (dataset, model, precision, batch size) and its options: Offline
throughput at its batch, the same through the dataset's validation pipeline, SingleStream latency
at batch 1 and peak memory (:mod:`nettebench.inference`). Its axes cross like the matrix's,
``include:``/``exclude:`` included (:mod:`nettebench.study.crossing`, the engine the matrix
uses, over these parameters), and its identity, path and arguments follow
:class:`~nettebench.vocabulary.cell.CellSpec`'s: core keys always, any other parameter only when
it differs from its default, so adding an option later moves no result.

A few keys of the section are run settings, not axes (:data:`SETTINGS`): how many SingleStream
queries, the CPU's time cap, and ``accuracy``, which keeps the final weights of the matrix cells of
the same models and datasets and evaluates them in every inference precision.

Imports nothing heavy: the workflow expands the section while it parses.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from nettebench.study import crossing, grid
from nettebench.study.crossing import ConfigError
from nettebench.vocabulary import precision
from nettebench.vocabulary.cell import CellSpec, identity_args, identity_of, identity_path

ROOT = "results/inference"
ACCURACY_ROOT = "results/inference_accuracy"
RECORD_FILE = "inference.json"
ACCURACY_FILE = "accuracy.json"
WEIGHTS_FILE = "weights.pt"  # a matrix cell's final weights (kept when `accuracy: true`)
CORE_KEYS = ("dataset", "model", "precision", "batch_size")
# MLPerf Inference's minimum SingleStream query count: with 1,024 latencies, ten lie beyond the
# 99th percentile (p99's exact order-statistic interval needs 348: records/spread.py).
LATENCY_QUERIES = 1024

# Run settings of the section (not axes) and their defaults; the schema documents the same.
SETTINGS = {
    "latency_queries": LATENCY_QUERIES,  # SingleStream queries at batch 1
    "max_seconds": 30.0,  # on a CPU, each timed phase stops after this long
    "warmup": 10,  # untimed batches (or queries) before each phase
    # keep matrix cells' final weights and evaluate them per precision: false, true (every
    # matrix cell of a measured model) or a filter over the matrix ({loader: cached})
    "accuracy": False,
    "accuracy_batch_size": 64,  # batch of the accuracy evaluation
}


@dataclasses.dataclass(frozen=True)
class InferenceSpec:
    """Every parameter of an inference cell, with its default (the schema's ``x-default``)."""

    dataset: str
    model: str = "resnet50"
    precision: str = "fp32"
    batch_size: int = 1
    image_size: int = 224  # the crop; the pipeline resizes to image_size / 0.875 first
    channels_last: bool | str = "auto"  # auto: on for the reduced-precision modes
    compile: bool = False  # torch.compile the model (its compile time is reported apart)
    device: str = "auto"
    workers: int = 4  # loader workers of the pipeline measurement
    machine: str | None = None  # the run's label (top-level `machine:`), like training cells

    def uses_channels_last(self) -> bool:
        if self.channels_last == "auto":
            return precision.get(self.precision).reduced_precision
        return bool(self.channels_last)

    def variant(self) -> dict[str, Any]:
        """What an accuracy evaluation varies: precision, memory format, compilation."""
        return {
            "precision": self.precision,
            "channels_last": self.uses_channels_last(),
            "compile": self.compile,
        }

    def identity(self) -> dict[str, Any]:
        return identity_of(self, CORE_KEYS)

    def cell_id(self) -> str:
        blob = json.dumps({"inference": self.identity()}, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def path(self) -> str:
        """``<dataset>/model~<m>/precision~<p>/batch~<b>[/<key>~<v>...]`` (defaults omitted)."""
        return identity_path(self.identity(), CORE_KEYS)

    def cli_args(self) -> list[str]:
        return identity_args(self.identity())

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


PARAMETER_NAMES = tuple(field.name for field in dataclasses.fields(InferenceSpec))


def field_defaults() -> dict[str, Any]:
    return {
        f.name: f.default
        for f in dataclasses.fields(InferenceSpec)
        if f.default is not dataclasses.MISSING
    }


# What the section's axes may name: every parameter but the run's label; its run settings are
# keys too, popped before crossing.
AXES = crossing.Axes(allowed=[n for n in PARAMETER_NAMES if n != "machine"], also=list(SETTINGS))


def split_section(section: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(axes with include/exclude, run settings with defaults) of the ``inference:`` section."""
    axes = dict(section or {})
    settings = {key: axes.pop(key, default) for key, default in SETTINGS.items()}
    return axes, settings


def expand(
    section: Mapping[str, Any] | None,
    *,
    datasets: Sequence[str],
    machine: str | None = None,
) -> list[InferenceSpec]:
    """Every inference cell of the section, validated (values named with what is allowed)."""
    if not section:
        return []
    axes, _ = split_section(section)
    base = {"dataset": list(datasets)}
    combos = crossing.cross(
        axes, where="inference", axes=AXES, base=base, defaults=field_defaults()
    )
    cells: dict[str, InferenceSpec] = {}
    for combo in combos:
        cell = build_cell(combo, datasets=datasets, machine=machine)
        cells.setdefault(cell.path(), cell)
    return list(cells.values())


def build_cell(
    values: Mapping[str, Any], *, datasets: Sequence[str], machine: str | None
) -> InferenceSpec:
    """One cell of values the schema passed (``inference_axes``): names checked as a training
    cell's are, then what its device cannot run."""
    where = "inference"
    grid.check_names(values, section=where, datasets=datasets)
    cell = InferenceSpec(**values, machine=machine)
    if cell.device != "auto":
        reason = precision.unsupported_reason(cell.precision, cell.device)
        if reason:
            raise ConfigError(f"{where}: {reason}")
    cell.path()
    return cell


@dataclasses.dataclass(frozen=True)
class AccuracyJob:
    """One trained matrix cell evaluated in every inference variant of its model and dataset."""

    trained: CellSpec
    variants: tuple[dict[str, Any], ...]  # fp32 first: the reference the others differ from
    device: str
    image_size: int
    workers: int = 4

    def path(self) -> str:
        return self.trained.path()

    def cli_args(self, batch_size: int) -> str:
        variants = [
            f"{v['precision']}:{int(v['channels_last'])}:{int(v['compile'])}" for v in self.variants
        ]
        return shlex.join(
            [
                "--model",
                self.trained.model,
                "--image-size",
                str(self.image_size),
                "--device",
                self.device,
                "--batch-size",
                str(batch_size),
                "--workers",
                str(self.workers),
                "--variants",
                *variants,
            ]
        )


PARAMETERS_OF_CELLS = grid.PARAMETER_NAMES  # what an accuracy filter may name
REFERENCE_VARIANT = {"precision": "fp32", "channels_last": False, "compile": False}


def accuracy_jobs(
    cells: Sequence[InferenceSpec],
    trained: Sequence[CellSpec],
    which: bool | Mapping[str, Any] = True,
) -> list[AccuracyJob]:
    """The matrix cells whose model and dataset some inference cell measures (and that match
    ``which``, when it is a filter: every key a value or a list of values), each with the
    variants (precision, channels_last, compile) of those inference cells, fp32 first."""
    if not which:  # false, or an empty filter: no weights are kept (rules/common.smk)
        return []
    if isinstance(which, Mapping):
        unknown = sorted(set(which) - set(PARAMETERS_OF_CELLS))
        if unknown:
            raise ConfigError(f"inference.accuracy: unknown matrix parameter(s) {unknown}")
        trained = [
            cell
            for cell in trained
            if all(getattr(cell, k) in crossing.as_list(v) for k, v in which.items())
        ]
    jobs = []
    for cell in trained:
        mine = [c for c in cells if (c.model, c.dataset) == (cell.model, cell.dataset)]
        if not mine:
            continue
        variants = [REFERENCE_VARIANT]
        for candidate in mine:
            if candidate.variant() not in variants:
                variants.append(candidate.variant())
        first = mine[0]
        jobs.append(
            AccuracyJob(cell, tuple(variants), first.device, cell.image_size, first.workers)
        )
    return jobs


def job_request(cell: InferenceSpec | AccuracyJob | None, settings: Mapping[str, Any]):
    """What an inference or accuracy job asks a cluster for: the loader's workers and one core,
    a process with a model and its batches, and its phases' time caps (three phases; doubled,
    as :mod:`nettebench.study.resources` does; at least its minimum)."""
    from nettebench.study import resources

    workers = cell.workers if cell else 4
    gpu = int(cell is None or cell.device != "cpu")
    seconds = resources.STARTUP_S + 3 * float(settings.get("max_seconds", SETTINGS["max_seconds"]))
    return resources.JobResources(
        cpus=workers + 1,
        mem_mb=max(resources.MIN_MEM_MB, resources.BASE_MB + workers * resources.WORKER_MB)
        + resources.CUDA_HOST_MB * gpu,
        runtime=resources._minutes(seconds),
        gpu=gpu,
    )
