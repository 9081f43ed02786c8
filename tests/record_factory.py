"""Write realistic fake cell directories, for tests that need results without training.

Everything goes through :func:`nettebench.records.files.write_metrics` / ``write_epochs``, so a
fake cell is byte-for-byte the shape a real trainer writes, and a change to the record contract
breaks these fakes (and the tests using them) rather than passing silently.

Three entry points:

- :func:`make_cell` writes one cell with every value overridable (status, times, accuracies,
  extra parameters, the schema version) and returns its ``metrics.json`` path;
- :func:`make_ceiling` writes the ``ceiling.json`` that ``python -m nettebench benchmarks ceiling``
puts
  beside a cell's metrics.json (every key of ``nettebench.benchmarks.ceiling.CEILING_KEYS``, read
  from the module's source so this file needs no torch and still follows the contract);
- :func:`make_study` writes a small but complete study (several models, O0/O1/O3, two seeds, an
  OOM, an unsupported precision, an extrapolated CPU baseline, optionally compute ceilings) and
  returns the paths.

The numbers are deterministic functions of the parameters (see :func:`time_for`,
:func:`top1_for`, :func:`ceiling_for`), so tests compute the expected table values from the same
functions.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import nettebench
from nettebench.records import files as records
from nettebench.vocabulary.record_keys import SCHEMA_VERSION, STATUS_OK, SUMMARY_KEYS

DATASET = "imagenette2-320"
TRAIN_IMAGES = 9469
VAL_IMAGES = 3925
GPU_NAME = "NVIDIA H200"
CPU_MODEL = "AMD EPYC 9454 48-Core Processor"

# The study: (model, batch size) -> precisions, as in SEED_STUDY.md's APEX table.
STUDY_MODELS = {
    ("resnet18", 256): ("O0", "O1", "O3"),
    ("resnet34", 256): ("O0", "O1", "O3"),  # O3 is recorded "unsupported" below
    ("resnet50", 128): ("O0", "O1", "O3"),
    ("resnet50", 256): ("O0",),  # "oom", as on the study's 16 GB card
}
STUDY_SEEDS = (0, 1)
STUDY_EPOCHS = 3
UNSUPPORTED = {("resnet34", 256, "O3")}
OOM = {("resnet50", 256, "O0")}
# The CPU baseline: resnet34, one epoch, 5 timed steps extrapolated to the full epoch.
CPU_BASELINE = {"model": "resnet34", "batch_size": 256, "precision": "fp32", "epochs": 1}

_BASE_SECONDS = {"resnet18": 54.0, "resnet34": 72.0, "resnet50": 144.0, "vgg19": 150.0}
_PRECISION_FACTOR = {"O0": 1.0, "tf32": 0.7, "O1": 0.55, "O2": 0.52, "O3": 0.5, "bf16": 0.6}


def time_for(model: str, precision: str, seed: int, epochs: int, kind: str = "matrix") -> float:
    """Seconds for all epochs of a fake cell (what ``summary.time_for_epochs_s`` will hold)."""
    per_epoch = _BASE_SECONDS.get(model, 100.0) * _PRECISION_FACTOR.get(precision, 1.0)
    if kind == "cpu_baseline":
        per_epoch *= 40.0
    return round(per_epoch * epochs + 1.5 * seed, 3)


def top1_for(model: str, precision: str, seed: int, epoch: int) -> float:
    """Validation top-1 (%) of a fake cell after ``epoch`` epochs."""
    offset = {"O1": -0.6, "O2": -0.9, "O3": -1.8}.get(precision, 0.0)
    return round(min(95.0, 30.0 + 12.0 * epoch + len(model) + offset + seed * 0.4), 2)


def ceiling_for(model: str, precision: str, batch_size: int) -> float:
    """The compute ceiling (img/s) of a fake cell: what ``ceiling.json``'s ``img_s`` will hold."""
    per_epoch = _BASE_SECONDS.get(model, 100.0) * _PRECISION_FACTOR.get(precision, 1.0)
    return round(TRAIN_IMAGES / (0.5 * per_epoch) * (1 + batch_size / 4096), 3)


def peak_mem_for(model: str, batch_size: int) -> float:
    """Peak device memory (MB) of a fake cell."""
    return round(_BASE_SECONDS.get(model, 100.0) * 10 + 9.5 * batch_size, 1)


def top5_for(model: str, precision: str, seed: int, epoch: int) -> float:
    return round(min(99.9, top1_for(model, precision, seed, epoch) + 15.0), 2)


def cell_id(cell: dict[str, Any]) -> str:
    """A 12-hex-digit hash of the parameters (the trainer hashes the cell's identity)."""
    return hashlib.sha256(json.dumps(cell, sort_keys=True, default=str).encode()).hexdigest()[:12]


def environment(**overrides: Any) -> dict[str, Any]:
    env = {
        "host": "gpu-node-01",
        "platform": "Linux-6.8.0-x86_64-with-glibc2.39",
        "python": "3.11.9",
        "cpu_model": CPU_MODEL,
        "cpu_count": 16,
        "gpu_name": GPU_NAME,
        "gpu_count": 1,
        "driver": "580.65.06",
        "cuda": "13.0",
        "cudnn": "91900",
        "torch": "2.14.1",
        "torchvision": "0.29.1",
        "efficientnet_pytorch": "0.7.1",
        "apex": None,
        "git_commit": "0123456789abcdef0123456789abcdef01234567",
        "git_dirty": False,
        "nettebench": "0.1.0",
        "slurm_job_id": None,
    }
    env.update(overrides)
    return env


def make_cell(
    root: str | Path,
    *,
    kind: str = "matrix",
    status: str = "ok",
    dataset: str = DATASET,
    model: str = "resnet18",
    precision: str = "O0",
    batch_size: int = 256,
    epochs: int = STUDY_EPOCHS,
    seed: int = 0,
    max_steps: int | None = None,
    time_for_epochs_s: float | None = None,
    train_img_s: float | None = None,
    data_wait_share: float = 0.25,
    device_type: str | None = None,
    device_name: str | None = None,
    threads: int | None = None,
    extra_cell: dict[str, Any] | None = None,
    env: dict[str, Any] | None = None,
    message: str | None = None,
    schema_version: int = SCHEMA_VERSION,
    write_epochs: bool = True,
    conditions: dict[str, Any] | None = None,
    summary_extra: dict[str, Any] | None = None,
) -> Path:
    """Write one fake cell under ``root`` and return its metrics.json path.

    Defaults give an ``ok`` resnet18 O0 cell on a CUDA GPU; ``kind="cpu_baseline"`` defaults to
    the CPU; a non-ok ``status`` writes None summaries and a header-only epochs.csv, as the
    trainer does. ``max_steps`` makes the cell extrapolated. ``conditions`` (see
    :func:`window`) is the record's optional ``conditions``; without it the record has none, as
    records written before timing conditions were measured. ``summary_extra`` overrides summary
    values of an ok cell (its spread: ``train_img_s_low``, ``train_block_img_s``, ...).
    """
    cpu = kind == "cpu_baseline"
    device_type = device_type or ("cpu" if cpu else "cuda")
    device_name = device_name or (CPU_MODEL if device_type == "cpu" else GPU_NAME)
    threads = threads if threads is not None else (4 if device_type == "cpu" else 16)
    cell = {
        "dataset": dataset,
        "model": model,
        "precision": precision,
        "batch_size": batch_size,
        "epochs": epochs,
        "seed": seed,
        "workers": 4,
        "image_size": 224,
        "device": "cpu" if cpu else "auto",
        "max_steps": max_steps,
        "lr": 0.1 * batch_size / 256,
        "momentum": 0.9,
        "weight_decay": 1e-4,
        "lr_schedule": "step",
        **(extra_cell or {}),
    }
    parts = [kind, dataset, f"model~{model}", f"precision~{precision}", f"batch~{batch_size}"]
    parts += [f"epochs~{epochs}", f"seed~{seed}"]
    parts += [f"{k}~{v}" for k, v in sorted((extra_cell or {}).items())]
    cell_dir = Path(root).joinpath(*parts)

    steps_per_epoch = -(-TRAIN_IMAGES // batch_size)
    extrapolated = max_steps is not None
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = dict.fromkeys(SUMMARY_KEYS)
    if status == STATUS_OK:
        total = time_for_epochs_s
        if total is None:
            total = time_for(model, precision, seed, epochs, kind)
        epoch_s = total / epochs
        img_s = train_img_s if train_img_s is not None else TRAIN_IMAGES / (0.8 * epoch_s)
        for epoch in range(1, epochs + 1):
            train_s = 0.8 * epoch_s
            wait_s = data_wait_share * train_s
            rows.append(
                {
                    "epoch": epoch,
                    "train_loss": round(2.3 / epoch, 4),
                    "val_loss": round(2.0 / epoch, 4),
                    "val_top1": top1_for(model, precision, seed, epoch),
                    "val_top5": top5_for(model, precision, seed, epoch),
                    "lr": cell["lr"],
                    "train_s": train_s,
                    "val_s": epoch_s - train_s,
                    "wall_s": epoch_s,
                    "data_wait_s": wait_s,
                    "compute_s": train_s - wait_s,
                    "data_wait_share": data_wait_share,
                    "train_img_s": img_s,
                    "train_images": (max_steps or steps_per_epoch) * batch_size,
                    "peak_mem_mb": peak_mem_for(model, batch_size),
                    "extrapolated": extrapolated,
                }
            )
        summary.update(
            epochs_run=epochs,
            steps_per_epoch=steps_per_epoch,
            steps_timed=max_steps or steps_per_epoch,
            extrapolated=extrapolated,
            wall_s=total + 20.0,
            time_for_epochs_s=total,
            epoch_s_median=epoch_s,
            train_img_s=img_s,
            data_wait_share=data_wait_share,
            final_top1=rows[-1]["val_top1"],
            final_top5=rows[-1]["val_top5"],
            best_top1=max(r["val_top1"] for r in rows),
            final_train_loss=rows[-1]["train_loss"],
            batch_size_used=batch_size,
            steady_epoch_s=epoch_s,  # every fake epoch takes as long as the others
            first_epoch_overhead_s=0.0,
            peak_mem_mb=peak_mem_for(model, batch_size),
            resumed_from_epoch=None,
        )
        summary.update(summary_extra or {})
    elif message is None:
        message = {
            "oom": f"CUDA out of memory at batch_size={batch_size}; try a smaller batch_size",
            "unsupported": f"precision {precision} is not supported on {device_type}",
        }.get(status)

    record = {
        "schema_version": schema_version,
        "status": status,
        "message": message,
        "kind": kind,
        "cell": cell,
        "cell_id": cell_id({**cell, "kind": kind}),
        "device": {"type": device_type, "name": device_name, "threads": threads},
        "environment": environment(**(env or {})),
        "summary": summary,
    }
    if conditions is not None:
        record["conditions"] = conditions
    path = records.write_metrics(cell_dir, record)
    if write_epochs:
        records.write_epochs(cell_dir, rows)
    return path


def window(
    share: float = 0.01,
    *,
    started_at: float = 1_700_000_000.0,
    wall_s: float = 60.0,
    reasons: tuple[str, ...] = (),
    **extra: Any,
) -> dict[str, Any]:
    """A timing-conditions dictionary as nettebench.records.conditions writes it: other
    processes took ``share`` of the job's CPUs; ``reasons`` make it a window under interference."""
    found = {
        "started_at": started_at,
        "ended_at": started_at + wall_s,
        "wall_s": wall_s,
        "cpus": 16,
        "own_cpu_s": 0.9 * wall_s,
        "other_cpu_s": share * wall_s * 16,
        "other_cpu_share": share,
        "steal_share": 0.0,
        "loadavg_start": 1.0,
        "loadavg_end": 1.0,
        "throttled_s": None,
        "gpu_other_processes": 0,
        "gpu_other_util": 0.0,
        "gpu_visibility": "nvidia-smi",
        "interference": bool(reasons),
        "interference_reasons": list(reasons),
    }
    found.update(extra)
    return found


@functools.cache
def ceiling_keys() -> tuple[str, ...]:
    """``nettebench.benchmarks.ceiling.CEILING_KEYS``, read from the source (importing bench
    imports torch)."""
    source = (Path(nettebench.__file__).parent / "benchmarks" / "ceiling.py").read_text(
        encoding="utf-8"
    )
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "CEILING_KEYS" for t in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    raise LookupError("nettebench/benchmarks/ceiling.py defines no CEILING_KEYS")


def make_ceiling(
    metrics_path: str | Path,
    *,
    status: str = "ok",
    img_s: float | None = None,
    message: str | None = None,
    conditions: dict[str, Any] | None = None,
    context: str = "cell job",
) -> Path:
    """Write a ``ceiling.json`` beside ``metrics_path`` as ``nettebench.benchmarks.ceiling`` would;
    its path.

    The model, precision and batch size come from the cell's metrics.json; ``img_s`` defaults
    to :func:`ceiling_for`. A non-ok status writes no timings, as the bench does.
    """
    metrics = json.loads(Path(metrics_path).read_text(encoding="utf-8"))
    cell = metrics["cell"]
    model, precision, batch_size = cell["model"], cell["precision"], cell["batch_size"]
    ok = status == STATUS_OK
    if ok and img_s is None:
        img_s = ceiling_for(model, precision, batch_size)
    step_ms = 1000 * batch_size / img_s if ok and img_s else None
    if not ok and message is None:
        message = f"ceiling {status} at batch_size={batch_size}"
    values = {
        "status": status,
        "message": message,
        "img_s": img_s if ok else None,
        "step_ms_median": step_ms,
        "step_ms_p10": None if step_ms is None else 0.97 * step_ms,
        "step_ms_p90": None if step_ms is None else 1.05 * step_ms,
        "steps": 30,
        "warmup_steps": 10,
        "peak_mem_mb": 0.8 * peak_mem_for(model, batch_size),
        "peak_mem_kind": "cpu_max_rss" if metrics["device"]["type"] == "cpu" else "cuda_allocated",
        "device": metrics["device"],
        "model": model,
        "precision": precision,
        "batch_size": batch_size,
        "batch_size_requested": batch_size,
        "image_size": cell.get("image_size", 224),
        "num_classes": 10,
        "channels_last": False,
        "cell": cell,
        "cell_id": metrics["cell_id"],
        "environment": metrics["environment"],
        "context": context,
        "conditions": conditions,
    }
    record = {key: values.get(key) for key in ceiling_keys()}
    path = Path(metrics_path).parent / "ceiling.json"
    records.atomic_write_text(path, json.dumps(record, indent=2) + "\n")
    return path


def make_study(root: str | Path, *, ceilings: bool = False) -> list[Path]:
    """The small study described at the top of this module; returns the metrics.json paths.

    With ``ceilings``, every matrix cell gets a ceiling.json with the cell's own outcome
    (OOM where the cell ran out of memory, n/a where its precision is unsupported).
    """
    paths = []
    for (model, batch_size), precisions in STUDY_MODELS.items():
        for precision in precisions:
            for seed in STUDY_SEEDS:
                key = (model, batch_size, precision)
                status = "oom" if key in OOM else "unsupported" if key in UNSUPPORTED else "ok"
                path = make_cell(
                    root,
                    model=model,
                    batch_size=batch_size,
                    precision=precision,
                    seed=seed,
                    status=status,
                )
                if ceilings:
                    make_ceiling(path, status=status)
                paths.append(path)
    paths.append(make_cell(root, kind="cpu_baseline", max_steps=5, **CPU_BASELINE))
    return paths


def study_times(model: str, precision: str, epochs: int = STUDY_EPOCHS) -> list[float]:
    """:func:`time_for` of every seed of :data:`STUDY_SEEDS`: what the time table summarises."""
    return [time_for(model, precision, s, epochs) for s in STUDY_SEEDS]


def study_mean_time(model: str, precision: str, epochs: int = STUDY_EPOCHS) -> float:
    """The mean over :data:`STUDY_SEEDS` of :func:`time_for`: what the time table must show."""
    return sum(time_for(model, precision, s, epochs) for s in STUDY_SEEDS) / len(STUDY_SEEDS)
