"""Train one cell of the study and write its ``metrics.json`` and ``epochs.csv``.

Runs with or without Snakemake::

    python -m nettebench.training --data results/data/imagenette2-320/dataset.json \\
        --out-dir /tmp/cell --dataset imagenette2-320 --model resnet50 --precision O1 \\
        --batch-size 128 --epochs 10

Needs only torch, torchvision, numpy, pandas-free code and tqdm, so it also runs on a GPU machine
that has no Snakemake. Every parameter of :class:`nettebench.vocabulary.cell.CellSpec` is an option
with the same default. Outcomes that are results rather than crashes (out of memory, a precision the
device cannot run) are written to metrics.json with exit status 0, so one bad cell never stops a
study.

What the run came to is written by :mod:`.outcome`. A command that extends the trainer (the
workflow's matrix cell job, :mod:`nettebench.benchmarks.cell_job`, which measures the cell's
compute ceiling right after its epochs) passes its own parser and an ``after_epochs`` hook.

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
import gc
import os
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from nettebench.builds import activate as libraries
from nettebench.builds.activate import LibraryError
from nettebench.datasets.info import load_data_root
from nettebench.models.errors import PretrainedWeightsUnavailable
from nettebench.records import conditions, environment
from nettebench.records import files as records
from nettebench.study.cell_options import CommandParser, add_cell_options, cell_from_args
from nettebench.training import checkpoint, distributed, finished, launch, outcome, validity
from nettebench.training.apex import ApexAmpUnavailable, ApexUnsupported
from nettebench.training.interrupts import Interrupted, StopOnSignal, signal_name
from nettebench.vocabulary.cell import CellSpec
from nettebench.vocabulary.dataset_errors import DatasetError

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
    # one GPU per process of a data-parallel cell (cuda:LOCAL_RANK)
    return distributed.local_device(torch.empty(0, device=requested).device)


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
    after_epochs: AfterEpochs | None = None,
    weights: str | Path | None = None,
) -> dict[str, Any]:
    """Train ``cell`` on the dataset at ``data``; write and return its metrics record.

    A cell that names a library build (``torchvision``, ``apex``) runs against it: the build's
    prefix under ``builds_dir`` (default: $NETTEBENCH_BUILDS_DIR or results/builds) goes first on
    the import path before anything imports the library. ``stop`` ends the epochs early on a
    signal (:class:`Interrupted`, its ``epochs_done`` set); with ``stamp`` (the result's
    :func:`validity.key`, from :func:`main`) the results are recorded in ``finished.json``
    first. The checkpoint is keyed by ``stamp`` too; without one, by a key built here (the
    cell, its inputs, packages and hardware, but no command line).

    ``after_epochs(device, record, epochs_s)`` runs in this process right after the epochs
    (whatever the outcome; ``epochs_s``: the wall time the epochs really took here, not the
    extrapolated one), before the record is written and the checkpoint removed, and returns the
    files it wrote beside the results: what is measured there (the cell's compute ceiling,
    :mod:`nettebench.benchmarks.cell_job`) shares the cell's machine, device, threads and moment,
    and a job killed meanwhile resumes from the checkpoint. Its time is not part of the cell's
    ``wall_s``.
    """
    libraries.activate(cell, builds_dir)
    # Boundary (see the package docstring): imported after activate(), because it imports
    # torchvision, and a cell's torchvision build must be first on the path before that; and
    # before the environment thread starts, which reads torchvision's version: two threads
    # importing torchvision at once can each find it half initialised.
    from nettebench.training.fit import fit

    started_at = process_start_time() if started_at is None else started_at
    out_dir = Path(out_dir)
    if threads:
        torch.set_num_threads(distributed.threads_share(threads))  # a process's share
    device = resolve_device(cell.device)
    distributed.join(cell, device)  # processes > 1: this worker's process group
    if stamp is None:
        stamp_for_resume = validity.key(
            cell, device=device, data=data, store_dir=store_dir, builds_dir=builds_dir
        )
    else:
        stamp_for_resume = stamp
    record = outcome.skeleton(cell, kind, device)
    # nvidia-smi, git and scontrol take a while: they run beside the training, not before it
    # (wall_s runs from process start), and the record waits for them only when it is written.
    collecting = _in_background(environment.collect)
    result = _train(
        fit, cell, data, out_dir, device, warmup_steps, started_at, store_dir, stop,
        stamp_for_resume, weights,
    )  # fmt: skip
    if weights is not None and not Path(weights).is_file():  # no final weights: say so
        checkpoint.save_weights(weights, None, cell.cell_id())
    trained_at = time.time()
    extra_files: tuple[Path, ...] = ()
    if after_epochs is not None and distributed.runs_after_epochs(result["status"]):
        gc.collect()  # the cell's model, optimiser and loaders go before anything else runs
        if device.type == "cuda":
            torch.cuda.empty_cache()
        record["environment"] = collecting.result()
        extra_files = tuple(after_epochs(device, record, _measured_s(result)) or ())
    if not distributed.writes_results(result["status"]):  # rank 0 writes a data-parallel cell's
        return distributed.rank_record(record, result, started_at)
    record = outcome.finish(
        record,
        out_dir,
        started_at,
        collecting,
        ended_at=trained_at,
        stop=stop,
        stamp=stamp,
        extra_files=extra_files,
        **result,
    )
    distributed.after_outcome(record)
    return record


# A hook run right after a cell's epochs: (device, record, epochs_s) -> the files it wrote.
AfterEpochs = Callable[[torch.device, dict[str, Any], float], list[Path] | None]


def _measured_s(result: dict[str, Any]) -> float:
    """Seconds the epochs took in this process (their timing window; without one, the rows')."""
    fit = result.get("fit")
    if fit is not None and fit.conditions:
        return float(fit.conditions["wall_s"])
    return sum(float(row["wall_s"]) for row in result["rows"] if not row["extrapolated"])


def _train(
    fit, cell, data, out_dir, device, warmup_steps, started_at, store_dir, stop, key, weights
):
    """Train the cell with :func:`~nettebench.training.fit.fit`; its rows, status, message and
    fit result as :func:`outcome.finish` takes them."""
    reason = outcome.unsupported_reason(cell, device)
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
            stop=stop,
            probe=conditions.Probe(gpu=conditions.gpu_target(device), pid=distributed.job_pid()),
            resume_key=key,
            weights=None if weights is None else Path(weights),
        )
    except (torch.OutOfMemoryError, MemoryError) as error:
        message = outcome.oom_message(cell, device, error)
        return {"rows": rows, "status": records.STATUS_OOM, "message": message}
    except ApexUnsupported as error:
        return {"rows": rows, "status": records.STATUS_UNSUPPORTED, "message": str(error)}
    except Interrupted as interrupted:
        interrupted.epochs_done = len(rows)
        raise
    except Exception as error:
        if stop is None or stop.requested is None:
            raise
        # On the way out after a signal (say, loader workers a SIGTERM to the group ended first,
        # reported by torch wherever the trainer was): the stop, not an error of the cell.
        raise Interrupted(stop.requested, forced=True, cause=error) from error
    return {"rows": rows, "status": records.STATUS_OK, "message": None, "fit": result}


def _in_background(function) -> Future:
    """``function()`` running in a thread of its own; its Future."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nettebench-environment")
    future = pool.submit(function)
    pool.shutdown(wait=False)  # the thread ends with the function
    return future


def build_parser() -> argparse.ArgumentParser:
    """Options: the data and output paths, then one per CellSpec parameter (same defaults)."""
    parser = CommandParser(prog="python -m nettebench.training", description=__doc__)
    parser.add_argument(
        "--data",
        required=True,
        help="dataset.json, or a folder holding train/ and val/ class folders",
    )
    parser.add_argument("--out-dir", required=True, help="where metrics.json and epochs.csv go")
    parser.add_argument("--kind", choices=KINDS, default="matrix", help="the record's kind")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument(
        "--warmup-steps",
        type=int,
        default=WARMUP_STEPS,
        help="first-epoch steps left out of img/s",
    )
    parser.add_argument(
        "--store",
        default=None,
        help="decoded store for loader cached (built there if missing; default: <out-dir>/store)",
    )
    parser.add_argument(
        "--retrain",
        action="store_true",
        help="train from scratch even when finished.json or the checkpoint holds this cell's "
        f"result, unchanged (also ${finished.RETRAIN_ENV}=1)",
    )
    parser.add_argument(
        "--depends-on",
        nargs="*",
        default=[],
        metavar="FILE",
        help="files the result depends on (the workflow passes its rule's inputs): a restore or "
        "resume needs each to hold what it held when the result was made",
    )
    parser.add_argument(
        "--weights",
        default=None,
        help="also write the final weights here (fp32), for inference accuracy by precision",
    )
    libraries.add_builds_dir_option(parser)
    add_cell_options(parser)
    return parser


def main(
    argv: list[str] | None = None,
    *,
    parser: argparse.ArgumentParser | None = None,
    after_epochs: Callable[[argparse.Namespace], AfterEpochs | None] | None = None,
) -> int:
    """Run one cell; a problem the user must fix (missing weights, apex, data) is one line, and
    so is an interruption.

    A command that extends the trainer (:mod:`nettebench.benchmarks.cell_job`) passes its own
    ``parser`` (:func:`build_parser` plus its options) and ``after_epochs``, which makes
    :func:`run_cell`'s hook from the parsed options."""
    with StopOnSignal() as stop:
        try:
            return _main(argv, stop, parser or build_parser(), after_epochs)
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


def _main(argv: list[str] | None, stop: StopOnSignal, parser, after_epochs) -> int:
    started_at = process_start_time()
    args = parser.parse_args(argv)
    _print_slurm_job()
    if args.dataset is None:
        args.dataset = load_data_root(args.data).name
    cell = cell_from_args(args)
    launch.prepare(cell, args.threads)  # processes > 1: the environment its processes will see
    key = result_key(cell, args)
    try:
        retrain = finished.retrain_requested(args.retrain)
        # weights asked for but gone: they are no result finished.json holds, so train again
        keeps = args.weights is None or Path(args.weights).is_file()
        if not retrain and keeps:
            restored, said = finished.restore(args.out_dir, key)
            if said:
                verdict = "restored" if restored else "not restored"
                print(f"{verdict}: {cell.path()}: {said}", file=sys.stderr, flush=True)
            if restored:
                return 0
        for line in checkpoint.discard_stale(args.out_dir, key, retrain):
            print(line, file=sys.stderr, flush=True)
        if distributed.launches(cell):  # processes > 1: torchrun runs this command N times
            return launch.launch(parser.prog, argv, cell, args.threads, args.out_dir)
        hook = after_epochs(args) if after_epochs else None
        record = _run(cell, args, started_at, stop, key, hook)
    except Interrupted as interrupted:
        path = Path(args.out_dir) / checkpoint.CHECKPOINT_FILE
        try:
            checkpoint.wait()  # the last epoch's checkpoint is on disk before the line says so
        except Exception as error:
            print(f"the last checkpoint save failed: {error}", file=sys.stderr)
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


def result_key(cell: CellSpec, args: argparse.Namespace) -> dict:
    """The result's key (:mod:`.validity`) from the parsed options: after the cell's builds and
    package environment are activated (its ``packages`` are what the cell imports; activating
    may restart this process once) and on the device the run resolves."""
    libraries.activate(cell, args.builds_dir)
    return validity.key(
        cell,
        device=resolve_device(cell.device),
        data=args.data,
        options=vars(args),
        depends_on=args.depends_on,
        store_dir=args.store or Path(args.out_dir) / "store",
        builds_dir=args.builds_dir,
    )


def _run(cell: CellSpec, args, started_at: float, stop: StopOnSignal, stamp, hook):
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
        after_epochs=hook,
        weights=args.weights,
    )


def _print_slurm_job() -> None:
    """Under SLURM, the job's log starts with the job id, node and the scheduler's own log."""
    line = environment.slurm_job_line()
    if line:
        print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
