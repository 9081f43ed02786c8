"""Start a data-parallel cell's processes with torch's own launcher, inside the cell's job.

A cell with ``processes: N`` > 1 is trained by N copies of the very command its job ran
(``python -m nettebench benchmarks cell-job ...``), started by torchrun's elastic agent in this
process exactly as ::

    torchrun --standalone --nproc-per-node N --max-restarts 0 --shutdown-timeout 10 \\
        -m nettebench benchmarks cell-job ...

would (:func:`torchrun_args`; ``--standalone`` spelled out: a c10d rendezvous at a free port of
this node), through the agent's API rather than a shell, so the job's exit status and messages
stay ours. The processes get the job's options unchanged (each takes its share of
``--threads``), so they compute the job's result key. The same cell spans nodes when torchrun
itself is run once per node with a shared rendezvous (README, "Data-parallel cells"); the
processes it starts then train at once: they see ``LOCAL_RANK``.

What the agent does is what a cell needs: a SIGINT or SIGTERM to the job is forwarded to every
process, which stop before the same step (:func:`nettebench.training.distributed.agreed`), and
those still running after ``--shutdown-timeout`` seconds are killed; a process that dies ends
the others at once (``--max-restarts 0``: a restart would repeat a crash). This module turns
the agent's outcome into the job's: 0 for a finished cell or one whose out-of-memory was
recorded, 128 + the signal for an interruption, 1 with the failing process named otherwise.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from nettebench.training import checkpoint
from nettebench.training.interrupts import signal_name
from nettebench.vocabulary.outputs import METRICS_FILE
from nettebench.vocabulary.record_keys import STATUS_OK

SHUTDOWN_TIMEOUT_S = 10  # after forwarding a signal, the agent kills what still runs
MONITOR_INTERVAL_S = 0.5  # how often the agent looks for a process that ended
# Options torchrun gained after torch 2.11, the oldest release supported: left out where the
# installed torchrun does not know them (its agent then uses its own default), chosen by what
# its parser accepts, not by version. torch 2.11's has no --shutdown-timeout.
NEWER_OPTIONS = ("--shutdown-timeout",)


def process_threads(threads: int | None, processes: int) -> int:
    """Torch threads of each process: the job's threads (default: the CPUs it may use) shared
    out, at least one each."""
    total = threads or len(os.sched_getaffinity(0))
    return max(1, total // processes)


def torchrun_args(
    command: Sequence[str], argv: list[str], processes: int, threads: int | None
) -> list[str]:
    """torchrun's command line for the cell's processes (each with its share of the threads):
    ``-m nettebench <command words> <argv>``, the package's one form of the command
    (torchrun's ``-m`` takes the module, ``nettebench``; the words are the script's arguments)."""
    return [
        # what torchrun's --standalone sets (its run() does, not its parser): a rendezvous
        # on this node at a free port, under an id of its own
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=localhost:0",
        f"--rdzv-id={uuid.uuid4()}",
        "--nnodes=1",
        f"--nproc-per-node={processes}",
        "--max-restarts=0",
        f"--shutdown-timeout={SHUTDOWN_TIMEOUT_S}",
        f"--monitor-interval={MONITOR_INTERVAL_S}",
        "-m",
        "nettebench",
        *command,
        *argv,
    ]


def known_to(parser, args: list[str]) -> list[str]:
    """``args`` without those of :data:`NEWER_OPTIONS` that torchrun's ``parser`` does not know
    (any other unknown option still fails torchrun's own parse, loudly)."""

    def unknown(arg: str) -> bool:
        return bool(parser.parse_known_args([arg, "-m", "module"])[1])

    return [a for a in args if not (a.split("=")[0] in NEWER_OPTIONS and unknown(a))]


def prepare(cell, threads: int | None) -> None:
    """Before anything reads the environment (the result's key does): give this process the
    variables torchrun gives the cell's processes, so the job and its processes agree on what
    the result depends on. ``OMP_NUM_THREADS`` is each process's share of the job's threads
    (torchrun would say 1), ``TORCH_NCCL_ASYNC_ERROR_HANDLING`` torchrun's default."""
    if cell.processes == 1 or "LOCAL_RANK" in os.environ:
        return
    os.environ.setdefault("OMP_NUM_THREADS", str(process_threads(threads, cell.processes)))
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")


def launch(command: Sequence[str], argv: Sequence[str], cell, threads: int | None, out_dir) -> int:
    """Run the cell's ``cell.processes`` processes, each ``python -m nettebench <command>
    <argv>`` (``command``: the words naming the job's command, ``("benchmarks", "cell-job")``);
    the job's exit status (module docstring)."""
    # torchrun's elastic agent (~0.1 s of imports): only a cell of several processes needs it
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch

    parser = torchrun.get_args_parser()
    args = known_to(parser, torchrun_args(command, list(argv), cell.processes, threads))
    print(f"data-parallel: torchrun {shlex.join(args)}", file=sys.stderr, flush=True)
    config, entrypoint, entry_args = torchrun.config_from_args(parser.parse_args(args))
    started = time.time()
    try:
        elastic_launch(config, entrypoint)(*entry_args)
    except SignalException as stop:
        return _interrupted(cell, out_dir, int(stop.sigval))
    except ChildFailedError as error:
        return _failed(cell, out_dir, error, started)
    return 0


def _interrupted(cell, out_dir, signum: int) -> int:
    kept = Path(out_dir) / checkpoint.CHECKPOINT_FILE
    where = f"kept the checkpoint on disk ({kept})" if kept.is_file() else "no checkpoint yet"
    print(
        f"interrupted by {signal_name(signum)}: {cell.path()} stopped in all "
        f"{cell.processes} processes; {where}; run it again to resume",
        file=sys.stderr,
        flush=True,
    )
    return 128 + signum


def _recorded_outcome(out_dir, started: float) -> str | None:
    """The status a process wrote to metrics.json during this launch (an out-of-memory), if any."""
    path = Path(out_dir) / METRICS_FILE
    if not path.is_file() or path.stat().st_mtime < started:
        return None
    return json.loads(path.read_text()).get("status")


def _failed(cell, out_dir, error, started: float) -> int:
    status = _recorded_outcome(out_dir, started)
    if status is not None and status != STATUS_OK:
        print(f"{status}: {cell.path()} (recorded by the process it happened in)", file=sys.stderr)
        return 0
    stops = {128 + signal.SIGINT, 128 + signal.SIGTERM}
    codes = {failure.exitcode for failure in error.failures.values()}
    if codes <= stops:  # every process stopped on a signal sent to one of them
        return _interrupted(cell, out_dir, min(codes) - 128)
    rank, failure = error.get_first_failure()
    how = (
        f"was killed by {failure.signal_name()}"
        if failure.exitcode < 0
        else f"exited with status {failure.exitcode}"
    )
    kept = Path(out_dir) / checkpoint.CHECKPOINT_FILE
    print(
        f"error: {cell.path()}: process {rank} of {cell.processes} (pid {failure.pid}) {how}; "
        "the others were stopped"
        + (f", the checkpoint kept ({kept}) for a rerun" if kept.is_file() else "")
        + "; its own messages are above",
        file=sys.stderr,
        flush=True,
    )
    return 1
