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

SIGINT or SIGTERM stops the cell before its next step with exit status 128 + the signal, the
checkpoint of its last finished epoch kept for the rerun (:mod:`.interrupts`). A finished cell
leaves ``finished.json``, from which a rerun restores its results instead of training again
(:mod:`.finished`; ``--retrain`` trains anyway).
"""

from __future__ import annotations

import time

_IMPORTED_AT = time.time()  # before the heavy imports, in case the process start is unknown
# ruff: noqa: E402 (the imports below come after that clock on purpose)

import argparse
import contextlib
import gc
import math
import os
import statistics
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from nettebench.builds import activate as libraries
from nettebench.builds.activate import LibraryError
from nettebench.datasets import DatasetError
from nettebench.datasets.info import load_data_root
from nettebench.models.errors import PretrainedWeightsUnavailable
from nettebench.records import environment
from nettebench.records import files as records
from nettebench.study import precision
from nettebench.study.cell import CellSpec, add_cell_options, cell_from_args
from nettebench.training import checkpoint, finished
from nettebench.training.apex import ApexAmpUnavailable, ApexUnsupported
from nettebench.training.interrupts import Interrupted, StopOnSignal, signal_name

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


def resolve_device(requested: str) -> torch.device:
    """The run's one device object: ``auto`` means CUDA when a GPU is visible, else the CPU.

    Canonical: exactly the device its tensors report (``cuda`` is ``cuda:0``, ``cpu:0`` is
    ``cpu``), so code comparing a tensor's device with it never mistakes one for another.
    """
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if torch.device(requested).type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: device cuda was asked for but torch sees no CUDA GPU")
    return torch.empty(0, device=requested).device


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
    stop: StopOnSignal | None = None,
    stamp: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train ``cell`` on the dataset at ``data``; write and return its metrics record.

    A cell that names a library build (``torchvision``, ``apex``) runs against it: the build's
    prefix under ``builds_dir`` (default: $NETTEBENCH_BUILDS_DIR or results/builds) goes first on
    the import path before anything imports the library. ``stop`` ends the epochs early on a
    signal (:class:`Interrupted`, its ``epochs_done`` set); with ``stamp`` (the cell's
    :func:`finished.fingerprint`) the results are recorded in ``finished.json`` first.
    """
    libraries.activate(cell, builds_dir)

    # Boundary (see the package docstring): imported after activate(), because it imports
    # torchvision, and a cell's torchvision build must be first on the path before that.
    from nettebench.training.fit import fit

    started_at = process_start_time() if started_at is None else started_at
    out_dir = Path(out_dir)
    if threads:
        torch.set_num_threads(threads)
    device = resolve_device(cell.device)
    record = _record_skeleton(cell, kind, device)
    # nvidia-smi, git and scontrol take a while: they run beside the training, not before it
    # (wall_s runs from process start), and the record waits for them only when it is written.
    collecting = _in_background(environment.collect)

    reason = unsupported_reason(cell, device)
    if reason:
        return _finish(
            record,
            out_dir,
            [],
            started_at,
            collecting,
            status=records.STATUS_UNSUPPORTED,
            message=reason,
            stop=stop,
            stamp=stamp,
        )

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
            stop=stop,
        )
    except (torch.OutOfMemoryError, MemoryError) as error:
        return _finish(
            record,
            out_dir,
            rows,
            started_at,
            collecting,
            status=records.STATUS_OOM,
            message=oom_message(cell, device, error),
            stop=stop,
            stamp=stamp,
        )
    except ApexUnsupported as error:
        return _finish(
            record,
            out_dir,
            rows,
            started_at,
            collecting,
            status=records.STATUS_UNSUPPORTED,
            message=str(error),
            stop=stop,
            stamp=stamp,
        )
    except Interrupted as interrupted:
        interrupted.epochs_done = len(rows)
        raise
    except Exception as error:
        if stop is None or stop.requested is None:
            raise
        # On the way out after a signal (say, loader workers a SIGTERM to the group ended first,
        # reported by torch wherever the trainer was): the stop, not an error of the cell.
        raise Interrupted(stop.requested, forced=True, cause=error) from error
    return _finish(
        record,
        out_dir,
        rows,
        started_at,
        collecting,
        status=records.STATUS_OK,
        message=None,
        fit=result,
        stop=stop,
        stamp=stamp,
    )


def unsupported_reason(cell: CellSpec, device: torch.device) -> str | None:
    """Why ``device`` cannot run the cell's precision, or None. A native cell asks the precision
    table; an apex cell is apex's to refuse (:class:`~nettebench.training.apex.ApexUnsupported`
    when its runner is built), in its own words."""
    if cell.amp_backend == "apex":
        return None
    return precision.unsupported_reason(cell.precision, device.type)


def _in_background(function) -> Future:
    """``function()`` running in a thread of its own; its Future."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nettebench-environment")
    future = pool.submit(function)
    pool.shutdown(wait=False)  # the thread ends with the function
    return future


def _record_skeleton(cell: CellSpec, kind: str, device) -> dict[str, Any]:
    return {
        "schema_version": records.SCHEMA_VERSION,
        "status": None,
        "message": None,
        "kind": kind,
        "cell": cell.as_dict(),
        "cell_id": cell.cell_id(),
        "device": environment.device_info(device),
        "environment": None,  # collected beside the training (see run_cell)
        "summary": dict.fromkeys(records.SUMMARY_KEYS),
    }


def _finish(
    record,
    out_dir: Path,
    rows,
    started_at: float,
    collecting: Future,
    *,
    status,
    message,
    fit=None,
    stop: StopOnSignal | None = None,
    stamp: dict[str, Any] | None = None,
):
    """Write the cell's outcome; no signal cuts it short (a cell whose last epoch ended is
    finished). ``finished.json`` first, the results, then the checkpoint goes."""
    with stop.critical() if stop else contextlib.nullcontext():
        return _write_outcome(
            record, out_dir, rows, started_at, collecting, status, message, fit, stamp
        )


def _write_outcome(
    record, out_dir: Path, rows, started_at, collecting, status, message, fit, stamp
):
    record["status"] = status
    record["message"] = message
    earlier_wall_s = 0.0
    if rows:
        record["summary"] = _summary(rows)
    if fit is not None:
        record["summary"]["batch_size_used"] = fit.batch_size
        record["summary"]["resumed_from_epoch"] = fit.resumed_from_epoch
        record["summary"]["compile_s"] = fit.compile_s
        record["summary"]["store_mode"] = fit.placement
        earlier_wall_s = fit.earlier_wall_s
    record["environment"] = collecting.result()
    record["summary"]["wall_s"] = earlier_wall_s + time.time() - started_at
    if stamp is not None:
        finished.write(out_dir, stamp, finished.result_texts(record, rows))
    records.write_epochs(out_dir, rows)
    records.write_metrics(out_dir, record)
    checkpoint.remove(out_dir)
    if message:
        print(f"{status}: {message}", file=sys.stderr, flush=True)
    return record


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    train_s = sum(r["train_s"] for r in rows)
    img_s = [r["train_img_s"] for r in rows if not math.isnan(r["train_img_s"])]
    last = rows[-1]
    later = [r["wall_s"] for r in rows[1:]]
    steady = statistics.median(later) if later else None
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
        "first_epoch_overhead_s": rows[0]["wall_s"] - steady if steady is not None else None,
        "peak_mem_mb": max(r["peak_mem_mb"] for r in rows),
        "resumed_from_epoch": None,
        "compile_s": None,
        "store_mode": None,
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
    parser.add_argument(
        "--retrain",
        action="store_true",
        help="train even when finished.json holds this cell's result, unchanged "
        f"(also ${finished.RETRAIN_ENV}=1)",
    )
    libraries.add_builds_dir_option(parser)
    add_cell_options(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one cell; a problem the user must fix (missing weights, apex, data) is one line, and
    so is an interruption."""
    with StopOnSignal() as stop:
        try:
            return _main(argv, stop)
        except (
            ApexAmpUnavailable,
            PretrainedWeightsUnavailable,
            DatasetError,
            LibraryError,
        ) as error:
            print(f"error: {error_line(error)}", file=sys.stderr)
            return 1
        except Interrupted as interrupted:  # before the cell was known: nothing to keep
            name = signal_name(interrupted.signum)
            print(f"interrupted by {name} before the cell started", file=sys.stderr)
            return interrupted.exit_code


def error_line(error: BaseException) -> str:
    """The error's message; for one re-raised from a DataLoader worker (whose text starts with
    "Caught <Error> in DataLoader worker process N."), the original message, so that the first
    line still names the file."""
    text = str(error)
    if text.startswith("Caught ") and "Original Traceback" in text:
        last = text.strip().splitlines()[-1]
        return last.split(": ", 1)[1] if ": " in last else last
    return text


def _main(argv: list[str] | None, stop: StopOnSignal) -> int:
    started_at = process_start_time()
    args = build_parser().parse_args(argv)
    _print_slurm_job()
    if args.dataset is None:
        args.dataset = load_data_root(args.data).name
    cell = cell_from_args(args)
    # Before the cell's build is activated, so a rerun computes the same fingerprint.
    stamp = finished.fingerprint(
        cell,
        kind=args.kind,
        data=args.data,
        warmup_steps=args.warmup_steps,
        store_dir=args.store or Path(args.out_dir) / "store",
        builds_dir=args.builds_dir,
    )
    try:
        if not finished.retrain_requested(args.retrain) and finished.restore(args.out_dir, stamp):
            print(
                f"restored: {cell.path()} had finished (its results are in "
                f"{Path(args.out_dir) / finished.FINISHED_FILE}, and nothing it depends on "
                "changed), so it is not trained again; --retrain trains it anyway",
                file=sys.stderr,
            )
            return 0
        record = _run(cell, args, started_at, stop, stamp)
    except Interrupted as interrupted:
        path = Path(args.out_dir) / checkpoint.CHECKPOINT_FILE
        print(interrupted.message(cell, path), file=sys.stderr, flush=True)
        code = interrupted.exit_code
    else:
        summary = record["summary"]
        if stop.requested is not None:
            late = signal_name(stop.requested)
            print(f"{late} came after the last epoch: finished", file=sys.stderr)
        print(f"{record['status']}: {cell.path()}  wall {summary['wall_s']:.1f} s", file=sys.stderr)
        return 0
    # The loaders' iterators the interruption left (its traceback held them) shut their workers
    # down now, before Python's exit ends them.
    gc.collect()
    return code


def _run(cell: CellSpec, args, started_at: float, stop: StopOnSignal, stamp) -> dict[str, Any]:
    return run_cell(
        cell,
        args.data,
        args.out_dir,
        kind=args.kind,
        threads=args.threads,
        warmup_steps=args.warmup_steps,
        started_at=started_at,
        store_dir=args.store,
        builds_dir=args.builds_dir,
        stop=stop,
        stamp=stamp,
    )


def _print_slurm_job() -> None:
    """Under SLURM, the job's log starts with the job id, node and the scheduler's own log."""
    line = environment.slurm_job_line()
    if line:
        print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
