"""Train one cell of the study and write its ``metrics.json`` and ``epochs.csv``.

Runs with or without Snakemake::

    python -m nettebench training --data results/data/imagenette2-320/dataset.json \\
        --out-dir /tmp/cell --dataset imagenette2-320 --model resnet50 --precision O1 \\
        --batch-size 128 --epochs 10

Needs only torch, torchvision, numpy, pandas-free code and tqdm, so it also runs on a GPU machine
that has no Snakemake. Every parameter of :class:`nettebench.vocabulary.cell.CellSpec` is an
option with the same default. Outcomes that are results rather than crashes (out of memory, a
precision the device cannot run) are written to metrics.json with exit status 0, so one bad cell
never stops a study.

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
import dataclasses
import gc
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from nettebench.builds import activate as libraries
from nettebench.builds.activate import LibraryError
from nettebench.datasets.info import load_data_root
from nettebench.models.errors import ModelLibraryMissing, PretrainedWeightsUnavailable
from nettebench.records import conditions, environment
from nettebench.study.cell_options import CommandParser, add_cell_options, cell_from_args
from nettebench.training import checkpoint, finished, launch, outcome, startup, validity
from nettebench.training.apex import ApexAmpUnavailable, ApexUnsupported
from nettebench.training.context import (
    WARMUP_STEPS,
    AfterEpochs,
    RunContext,
    RunOptions,
    Trained,
)
from nettebench.training.distributed import DataParallel
from nettebench.training.interrupts import Interrupted, StopOnSignal, signal_name
from nettebench.vocabulary import commands
from nettebench.vocabulary.cell import CellSpec
from nettebench.vocabulary.dataset_errors import DatasetError
from nettebench.vocabulary.record_keys import STATUS_OK, STATUS_OOM, STATUS_UNSUPPORTED

KINDS = ("matrix", "cpu_baseline")


def process_start_time() -> float:
    """When this process started (Unix time), so wall time includes interpreter and imports.

    The kernel's start time for it (``/proc/self/stat`` field 22, clock ticks on the boot clock)
    subtracted from the boot clock now gives its age, which the wall clock now turns into a time.
    Adding the start ticks to ``/proc/stat``'s ``btime`` instead, as this did before, is off by
    as much as a second: btime is whole seconds and drifts from the wall clock (0.6 s on the
    2-core test VM), and every cell's ``wall_s`` carried the error.
    """
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            # Field 22 (starttime); the command name may hold spaces.
            start_ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - age
    except (OSError, ValueError, IndexError, AttributeError):  # no /proc, no CLOCK_BOOTTIME
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
    return DataParallel.from_env().device(torch.empty(0, device=requested).device)


def run_cell(
    cell: CellSpec,
    data: str | Path,
    out_dir: str | Path,
    options: RunOptions | None = None,
    **chosen: Any,
) -> dict[str, Any]:
    """Train ``cell`` on the dataset at ``data``; write and return its metrics record.

    ``options`` (:class:`~.context.RunOptions`), or its fields as keywords (``threads=2``):

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
    options = dataclasses.replace(options or RunOptions(), **chosen)
    libraries.activate(cell, options.builds_dir)
    # Boundary (see the package docstring): imported after activate(), because it imports
    # torchvision, and a cell's torchvision build must be first on the path before that; and
    # before the environment thread starts, which reads torchvision's version: two threads
    # importing torchvision at once can each find it half initialised.
    from nettebench.training.fit import fit

    startup.mark("imports")
    run = _started(cell, data, out_dir, options)
    record = outcome.skeleton(cell, options.kind, run.device)
    # nvidia-smi, git and scontrol take a while: they run beside the training, not before it
    # (wall_s runs from process start), and the record waits for them only when it is written.
    collecting = _in_background(environment.collect)
    trained = _train(fit, run)
    if run.weights is not None and not run.weights.is_file():  # no final weights: say so
        checkpoint.save_weights(run.weights, None, cell.cell_id())
    trained_at = time.time()
    extra_files: tuple[Path, ...] = ()
    if options.after_epochs is not None and run.parallel.runs_after_epochs(trained.status):
        gc.collect()  # the cell's model, optimiser and loaders go before anything else runs
        if run.device.type == "cuda":
            torch.cuda.empty_cache()
        record["environment"] = startup.waited("environment", collecting)
        extra_files = tuple(options.after_epochs(run.device, record, _measured_s(trained)) or ())
        startup.mark("after_epochs")  # a matrix cell job's hook: its compute ceiling

    def write() -> dict[str, Any]:
        conditions.settle()  # nvidia-smi's queries at the epochs' edges, run beside them
        startup.waited("environment", collecting)
        record["startup"] = startup.summary()
        return outcome.finish(
            record, run, trained, collecting, ended_at=trained_at, extra_files=extra_files
        )

    # rank 0 writes a data-parallel cell's outcome (or the process that ran out of memory)
    return run.parallel.settle(record, trained, run.started_at, write)


def _started(cell: CellSpec, data, out_dir, options: RunOptions) -> RunContext:
    """The run's context: its clock, device, this process's part in a data-parallel cell (its
    threads and process group started) and the result's key."""
    started_at = process_start_time() if options.started_at is None else options.started_at
    parallel = DataParallel.from_env()
    device = resolve_device(cell.device)
    parallel.start(cell, device, options.threads)  # processes > 1: its share, its group
    startup.mark("device_probe")
    key = options.stamp
    if key is None:
        key = validity.key(
            cell,
            device=device,
            data=data,
            store_dir=options.store_dir,
            builds_dir=options.builds_dir,
        )
    return RunContext(
        cell=cell,
        data=data,
        out_dir=Path(out_dir),
        device=device,
        started_at=started_at,
        parallel=parallel,
        warmup_steps=options.warmup_steps,
        store_dir=options.store_dir,
        stop=options.stop,
        key=key,
        stamp=options.stamp,
        weights=None if options.weights is None else Path(options.weights),
    )


def _measured_s(trained: Trained) -> float:
    """Seconds the epochs took in this process (their timing window; without one, the rows')."""
    if trained.fit is not None and trained.fit.conditions:
        return float(trained.fit.conditions["wall_s"])
    return sum(float(row["wall_s"]) for row in trained.rows if not row["extrapolated"])


def _train(fit, run: RunContext) -> Trained:
    """Train the cell with :func:`~nettebench.training.fit.fit`; what it came to."""
    cell, device, stop = run.cell, run.device, run.stop
    reason = outcome.unsupported_reason(cell, device)
    if reason:
        return Trained([], STATUS_UNSUPPORTED, reason)
    rows: list[dict[str, Any]] = []
    probe = conditions.Probe(
        gpu=conditions.gpu_target(device), pid=run.parallel.job_pid, background=True
    )
    try:
        result = fit(dataclasses.replace(run, probe=probe), rows)
    except (torch.OutOfMemoryError, MemoryError) as error:
        return Trained(rows, STATUS_OOM, outcome.oom_message(cell, device, error))
    except ApexUnsupported as error:
        return Trained(rows, STATUS_UNSUPPORTED, str(error))
    except Interrupted as interrupted:
        interrupted.epochs_done = checkpoint.saved_epochs(rows)
        raise
    except Exception as error:
        if stop is None or stop.requested is None:
            raise
        # On the way out after a signal (say, loader workers a SIGTERM to the group ended first,
        # reported by torch wherever the trainer was): the stop, not an error of the cell.
        raise Interrupted(stop.requested, forced=True, cause=error) from error
    return Trained(rows, STATUS_OK, None, result)


def _in_background(function) -> Future:
    """``function()`` running in a thread of its own; its Future."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nettebench-environment")
    future = pool.submit(function)
    pool.shutdown(wait=False)  # the thread ends with the function
    return future


COMMAND = ("training",)  # python -m nettebench training (vocabulary.commands.SINGLE)


def build_parser() -> argparse.ArgumentParser:
    """Options: the data and output paths, then one per CellSpec parameter (same defaults)."""
    parser = CommandParser(prog=commands.prog(*COMMAND), description=__doc__)
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
    command: Sequence[str] = COMMAND,
) -> int:
    """Run one cell; a problem the user must fix (missing weights, apex, data) is one line, and
    so is an interruption.

    A command that extends the trainer (:mod:`nettebench.benchmarks.cell_job`) passes its own
    ``parser`` (:func:`build_parser` plus its options), ``after_epochs``, which makes
    :func:`run_cell`'s hook from the parsed options, and ``command``, the words that name it
    after ``python -m nettebench`` (the processes of a data-parallel cell run that command)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    fix = (
        ApexAmpUnavailable,
        PretrainedWeightsUnavailable,
        ModelLibraryMissing,
        DatasetError,
        LibraryError,
    )
    with StopOnSignal() as stop:
        try:
            started_at = process_start_time()
            startup.start(started_at)  # the phases from process start to the first step, and after
            return commands.run(
                parser or build_parser(),
                lambda args: _main(args, argv, started_at, stop, after_epochs, command),
                argv,
                errors=fix,
                describe=error_line,
            )
        except Interrupted as interrupted:  # before the cell was known: nothing to keep
            # No error: its own line and exit status, 128 + the signal (what a shell reports
            # for a process a signal ended, what a requeue reads), which run's cannot carry.
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


def _main(
    args: argparse.Namespace,
    argv: list[str],
    started_at: float,
    stop: StopOnSignal,
    after_epochs,
    command,
) -> int:
    _print_slurm_job()
    if args.dataset is None:
        args.dataset = load_data_root(args.data).name
    cell = cell_from_args(args)
    launch.prepare(cell, args.threads)  # processes > 1: the environment its processes will see
    key = result_key(cell, args)
    startup.mark("key")
    try:
        retrain = finished.retrain_requested(args.retrain)
        if not retrain:
            # weights asked for: no result finished.json holds, so gone means train again
            needs = () if args.weights is None else (Path(args.weights),)
            restored, said = finished.restore(args.out_dir, key, needs)
            if said:
                verdict = "restored" if restored else "not restored"
                print(f"{verdict}: {cell.path()}: {said}", file=sys.stderr, flush=True)
            if restored:
                return 0
        for line in checkpoint.discard_stale(args.out_dir, key, retrain):
            print(line, file=sys.stderr, flush=True)
        if DataParallel.from_env().launches(cell):  # processes > 1: torchrun runs it N times
            return launch.launch(command, argv, cell, args.threads, args.out_dir)
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
    device = resolve_device(cell.device)
    startup.mark("device_probe")
    return validity.key(
        cell,
        device=device,
        data=args.data,
        options=vars(args),
        depends_on=args.depends_on,
        store_dir=args.store or Path(args.out_dir) / "store",
        builds_dir=args.builds_dir,
    )


def _run(cell: CellSpec, args, started_at: float, stop: StopOnSignal, stamp, hook):
    options = RunOptions(
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
    return run_cell(cell, args.data, args.out_dir, options)


def _print_slurm_job() -> None:
    """Under SLURM, the job's log starts with the job id, node and the scheduler's own log."""
    line = environment.slurm_job_line()
    if line:
        print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":  # run as python -m nettebench training
    sys.exit(commands.moved(__spec__.name))
