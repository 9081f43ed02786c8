"""Train one cell of the study and write its ``metrics.json`` and ``epochs.csv``.

Runs with or without Snakemake::

    python -m nettebench.training --data results/data/imagenette2-320/dataset.json \\
        --out-dir /tmp/cell --dataset imagenette2-320 --model resnet50 --precision O1 \\
        --batch-size 128 --epochs 10

Needs only torch, torchvision, numpy, pandas-free code and tqdm, so it also runs on a GPU machine
that has no Snakemake. Every parameter of :class:`nettebench.study.cell.CellSpec` is an option with
the same default. Outcomes that are results rather than crashes (out of memory, a precision the
device cannot run) are written to metrics.json with exit status 0, so one bad cell never stops a
study.
"""

from __future__ import annotations

import time

_IMPORTED_AT = time.time()  # before the heavy imports, in case the process start is unknown
# ruff: noqa: E402 (the imports below come after that clock on purpose)

import argparse
import gc
import math
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nettebench.builds import activate as libraries
from nettebench.builds.activate import LibraryError
from nettebench.datasets import DatasetError
from nettebench.datasets.info import load_data_root
from nettebench.models.errors import PretrainedWeightsUnavailable
from nettebench.records import conditions, environment
from nettebench.records import files as records
from nettebench.study import precision
from nettebench.study.cell import CellSpec, add_cell_options, cell_from_args
from nettebench.training import checkpoint
from nettebench.training.apex import ApexAmpUnavailable

WARMUP_STEPS = 5  # first-epoch steps excluded from img/s (autotuning, allocator, workers)
KINDS = ("matrix", "cpu_baseline")


def process_start_time() -> float:
    """When this process started (Unix time), so wall time includes interpreter and imports."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            # Field 22 (starttime, clock ticks after boot); the command name may hold spaces.
            start_ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat", encoding="ascii") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith("btime"))

        return boot + start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _IMPORTED_AT


def resolve_device(requested: str):
    """``auto`` means CUDA when a GPU is visible, else the CPU."""

    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: device cuda was asked for but torch sees no CUDA GPU")
    return torch.device(requested)


def run_cell(
    cell: CellSpec,
    data: str | Path,
    out_dir: str | Path,
    *,
    kind: str = "matrix",
    threads: int | None = None,
    warmup_steps: int = WARMUP_STEPS,
    started_at: float | None = None,
    store_dir: str | Path | None = None,
    builds_dir: str | Path | None = None,
    after_epochs: Callable[[torch.device, dict[str, Any], float], None] | None = None,
) -> dict[str, Any]:
    """Train ``cell`` on the dataset at ``data``; write and return its metrics record.

    A cell that names a library build (``torchvision``, ``apex``) runs against it: the build's
    prefix under ``builds_dir`` (default: $NETTEBENCH_BUILDS_DIR or results/builds) goes first on
    the import path before anything imports the library.

    ``after_epochs(device, record, epochs_s)`` runs in this process right after the epochs
    (whatever the outcome; ``epochs_s``: the wall time the epochs really took here, not the
    extrapolated one), before the record is written and the checkpoint removed: what is
    measured there (the cell's compute ceiling, :mod:`nettebench.benchmarks.cell_job`) shares
    the cell's machine, device, threads and moment, and a job killed meanwhile resumes from the
    checkpoint. Its time is not part of the cell's ``wall_s``.
    """
    libraries.activate(cell, builds_dir)
    started_at = process_start_time() if started_at is None else started_at
    out_dir = Path(out_dir)
    if threads:
        torch.set_num_threads(threads)
    device = resolve_device(cell.device)
    record = _record_skeleton(cell, kind, device)
    outcome = _train(cell, data, out_dir, device, warmup_steps, started_at, store_dir)
    trained_at = time.time()
    if after_epochs is not None:
        gc.collect()  # the cell's model, optimiser and loaders go before anything else runs
        if device.type == "cuda":
            torch.cuda.empty_cache()
        after_epochs(device, record, _measured_s(outcome))
    return _finish(record, out_dir, started_at=started_at, ended_at=trained_at, **outcome)


def _measured_s(outcome: dict[str, Any]) -> float:
    """Seconds the epochs took in this process (their timing window; without one, the rows')."""
    fit = outcome.get("fit")
    if fit is not None and fit.conditions:
        return float(fit.conditions["wall_s"])
    return sum(float(row["wall_s"]) for row in outcome["rows"] if not row["extrapolated"])


def _train(cell, data, out_dir, device, warmup_steps, started_at, store_dir) -> dict[str, Any]:
    """Train the cell; its rows, outcome and fit result as :func:`_finish` takes them."""
    # Boundary (see the package docstring): imported after activate(), because it imports
    # torchvision, and a cell's torchvision build must be first on the path before that.
    from nettebench.training.fit import fit

    reason = precision.unsupported_reason(cell.precision, device.type)
    if reason:
        return {"rows": [], "status": records.STATUS_UNSUPPORTED, "message": reason}

    rows: list[dict[str, Any]] = []
    try:
        result = fit(
            cell,
            load_data_root(data),
            out_dir,
            device,
            warmup_steps=warmup_steps,
            rows=rows,
            started_at=started_at,
            data_path=data,
            store_dir=store_dir,
            probe=conditions.Probe(gpu=conditions.gpu_target(device)),
        )
    except (torch.OutOfMemoryError, MemoryError) as error:
        message = oom_message(cell, device, error)
        return {"rows": rows, "status": records.STATUS_OOM, "message": message}
    return {"rows": rows, "status": records.STATUS_OK, "message": None, "fit": result}


def _record_skeleton(cell: CellSpec, kind: str, device) -> dict[str, Any]:
    return {
        "schema_version": records.SCHEMA_VERSION,
        "status": None,
        "message": None,
        "kind": kind,
        "cell": cell.as_dict(),
        "cell_id": cell.cell_id(),
        "device": environment.device_info(device),
        "environment": environment.collect(),
        "summary": dict.fromkeys(records.SUMMARY_KEYS),
    }


def _finish(
    record,
    out_dir: Path,
    rows,
    started_at: float,
    *,
    status,
    message,
    fit=None,
    ended_at: float | None = None,
):
    """Write the cell's outcome; the checkpoint goes once the results are safely written.

    ``ended_at`` (default: now) ends the cell's ``wall_s``."""
    record["status"] = status
    record["message"] = message
    earlier_wall_s = 0.0
    if rows:
        record["summary"] = _summary(rows)
    if fit is not None:
        record["summary"]["batch_size_used"] = fit.batch_size
        record["summary"]["resumed_from_epoch"] = fit.resumed_from_epoch
        record["summary"]["compile_s"] = fit.compile_s
        earlier_wall_s = fit.earlier_wall_s
    record["conditions"] = run_conditions(fit.conditions if fit else None, rows)
    ended_at = time.time() if ended_at is None else ended_at
    record["summary"]["wall_s"] = earlier_wall_s + ended_at - started_at
    records.write_epochs(out_dir, rows)
    records.write_metrics(out_dir, record)
    checkpoint.remove(out_dir)
    if message:
        print(f"{status}: {message}", file=sys.stderr, flush=True)
    return record


def run_conditions(
    window: dict[str, Any] | None, rows: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """metrics.json's ``conditions``: the window of this process's epochs, and every epoch
    (resumed ones too) whose own window was under interference, which marks the cell too."""
    disturbed = [r["epoch"] for r in rows if r.get("interference") is True]
    if window is None and not rows:
        return None
    found = dict(window or {})
    found["epochs_under_interference"] = disturbed
    if disturbed:
        found["interference"] = True
        found["interference_reasons"] = [
            *found.get("interference_reasons", []),
            f"epoch(s) {', '.join(map(str, disturbed))} of {len(rows)} timed under interference",
        ]
    return found


def first_epoch_overhead(walls: list[float]) -> tuple[float | None, float | None, str | None]:
    """(overhead, noise, anomaly) of a cell's epoch wall times.

    The overhead is the first epoch's time beyond the median of the later ones, never below 0.
    Its noise is the largest deviation of a later epoch from that median. A first epoch faster
    than the fastest later one by more than the noise (and more than a tenth of an epoch: two
    or three later epochs say little about their spread) cannot be warm-up: conditions changed
    between epochs, which the anomaly text says (None when nothing is wrong)."""
    later = walls[1:]
    if not later:
        return None, None, None
    steady = statistics.median(later)
    noise = max(abs(w - steady) for w in later) if len(later) > 1 else None
    excess = walls[0] - steady
    anomaly = None
    margin = max(noise or 0.0, ANOMALY_FLOOR * steady)
    if noise is not None and walls[0] < min(later) - margin:
        anomaly = (
            f"first epoch {-excess:.1f} s faster than the later epochs' median {steady:.1f} s "
            f"(noise {noise:.1f} s): conditions changed between epochs"
        )
    return max(excess, 0.0), noise, anomaly


# A first epoch must be this share of an epoch faster than every later one to be an anomaly.
ANOMALY_FLOOR = 0.10


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    train_s = sum(r["train_s"] for r in rows)
    img_s = [r["train_img_s"] for r in rows if not math.isnan(r["train_img_s"])]
    last = rows[-1]
    later = [r["wall_s"] for r in rows[1:]]
    steady = statistics.median(later) if later else None
    overhead, noise, anomaly = first_epoch_overhead([r["wall_s"] for r in rows])
    if any(r["extrapolated"] for r in rows):
        # epochs scaled from a few steps: the first from its post-warm-up steps, the later ones
        # from all of theirs (loader start included), so the two do not compare
        anomaly = None
    return {
        "epochs_run": len(rows),
        "steps_per_epoch": last["_steps_per_epoch"],
        "steps_timed": last["_steps_run"],
        "extrapolated": any(r["extrapolated"] for r in rows),
        "wall_s": None,
        "time_for_epochs_s": sum(r["wall_s"] for r in rows),
        "epoch_s_median": statistics.median(r["wall_s"] for r in rows),
        "train_img_s": statistics.median(img_s) if img_s else None,
        "data_wait_share": sum(r["data_wait_s"] for r in rows) / train_s if train_s else None,
        "final_top1": last["val_top1"],
        "final_top5": last["val_top5"],
        "best_top1": max(r["val_top1"] for r in rows),
        "final_train_loss": last["train_loss"],
        "batch_size_used": None,
        "steady_epoch_s": steady,
        "first_epoch_overhead_s": overhead,
        "first_epoch_overhead_noise_s": noise,
        "anomalies": [anomaly] if anomaly else [],
        "peak_mem_mb": max(r["peak_mem_mb"] for r in rows),
        "resumed_from_epoch": None,
        "compile_s": None,
    }


def oom_message(cell: CellSpec, device, error: BaseException) -> str:
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if cell.batch_size == "auto":
        hint = "even batch size 1 does not fit: try a smaller image_size or model"
    else:
        hint = (
            f"lower batch_size for this cell (e.g. {max(cell.batch_size // 2, 1)}, or auto) "
            "in the matrix; large models need their batch size tuned per card"
        )
    return (
        f"out of memory at batch size {cell.batch_size} on {device.type}: {first_line}. "
        f"Hint: {hint}."
    )


def build_parser() -> argparse.ArgumentParser:
    """Options: the data and output paths, then one per CellSpec parameter (same defaults)."""
    parser = argparse.ArgumentParser(
        prog="python -m nettebench.training",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--data",
        required=True,
        help="dataset.json, or a folder holding train/ and val/ class folders",
    )
    parser.add_argument("--out-dir", required=True, help="where metrics.json and epochs.csv go")
    parser.add_argument("--kind", choices=KINDS, default="matrix")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--warmup-steps", type=int, default=WARMUP_STEPS)
    parser.add_argument(
        "--store",
        default=None,
        help="decoded store for loader cached (built there if missing; default: <out-dir>/store)",
    )
    libraries.add_builds_dir_option(parser)
    add_cell_options(parser)
    return parser


def main(
    argv: list[str] | None = None,
    *,
    parser: argparse.ArgumentParser | None = None,
    after_epochs: Callable[[argparse.Namespace], Callable | None] | None = None,
) -> int:
    """Run one cell; a problem the user must fix (missing weights, apex, data) is one line.

    A command that extends the trainer (:mod:`nettebench.benchmarks.cell_job`) passes its own
    ``parser`` (:func:`build_parser` plus its options) and ``after_epochs``, which makes
    :func:`run_cell`'s hook from the parsed options."""
    try:
        return _main(argv, parser or build_parser(), after_epochs)
    except (ApexAmpUnavailable, PretrainedWeightsUnavailable, DatasetError, LibraryError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def _main(argv: list[str] | None, parser: argparse.ArgumentParser, after_epochs) -> int:
    started_at = process_start_time()
    args = parser.parse_args(argv)
    _print_slurm_job()
    if args.dataset is None:
        args.dataset = load_data_root(args.data).name
    cell = cell_from_args(args)
    record = run_cell(
        cell,
        args.data,
        args.out_dir,
        kind=args.kind,
        threads=args.threads,
        warmup_steps=args.warmup_steps,
        started_at=started_at,
        store_dir=args.store,
        builds_dir=args.builds_dir,
        after_epochs=after_epochs(args) if after_epochs else None,
    )
    summary = record["summary"]
    print(f"{record['status']}: {cell.path()}  wall {summary['wall_s']:.1f} s", file=sys.stderr)
    return 0


def _print_slurm_job() -> None:
    """Under SLURM, the job's log starts with the job id, node and the scheduler's own log."""
    line = environment.slurm_job_line()
    if line:
        print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
