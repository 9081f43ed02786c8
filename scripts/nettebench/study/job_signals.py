"""Ctrl-C or SIGTERM to Snakemake stops the running jobs in seconds, and Snakemake sees them end.

Snakemake 9's local executor never signals its jobs (snakemake/snakemake#448): on SIGINT it
raises KeyboardInterrupt in its scheduler, prints "Terminating processes on user request" and
waits for every running job to end by itself (a training cell: to its last epoch). Jobs that end
after that are never post-processed, so their outputs stay marked incomplete and the next run
trains them again. On SIGTERM it "will exit after finishing currently running jobs", again as
long as they take.

:func:`forward_interrupts`, called from the workflow's ``onstart:`` handler (after the scheduler
exists, before the first job), changes both for local runs: SIGINT and SIGTERM are passed on
(the same signal) to every process Snakemake started, so each trainer stops before its next step
and keeps its checkpoint (:mod:`nettebench.training.interrupts`), and then handed to the
scheduler's own graceful exit. Snakemake waits the few seconds the jobs need and post-processes
each one as it ends: a job that finished is recorded as done, an interrupted one is cleaned up.
A terminal's Ctrl-C reaches the jobs directly as well, milliseconds apart; the trainer counts
the two as one request.

Cluster executors keep Snakemake's own handling (Ctrl-C cancels the cluster jobs, whose
scheduler then signals the trainers); jobs Snakemake runs inside a cluster job skip the
``onstart:`` handler. The jobs are found and signalled through psutil, which checks that a pid
still names the process it found before it signals it.

Imports the standard library and psutil, which Snakemake itself requires: Snakemake imports this
module while it parses the workflow, and no job imports it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable

import psutil

FORWARDED = (signal.SIGINT, signal.SIGTERM)


def _processes_below(pid: int) -> list[psutil.Process]:
    """Every process below ``pid``, each before its own descendants; none if ``pid`` is gone."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:  # gone meanwhile (ZombieProcess is one too)
        return []


def descendants(pid: int) -> list[int]:
    """The pid of every process below ``pid``, each before its own descendants."""
    return [process.pid for process in _processes_below(pid)]


def signal_descendants(pid: int, signum: int) -> list[int]:
    """Send ``signum`` to every process below ``pid``; return the pids it reached."""
    reached = []
    for process in _processes_below(pid):
        try:
            process.send_signal(signum)  # refused where the pid now names another process
            reached.append(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return reached


def forward_interrupts(graceful_exit: Callable[..., object] | None = None) -> None:
    """From now on, SIGINT and SIGTERM to this process go to its jobs first, then to
    ``graceful_exit`` (default: the SIGTERM handler installed now, which in Snakemake is the
    scheduler's "exit after the running jobs" handler). Must run in the main thread."""
    graceful = graceful_exit or signal.getsignal(signal.SIGTERM)
    if not callable(graceful):
        return  # no scheduler handler to hand over to: keep Snakemake's defaults

    def forward(signum: int, frame: object) -> None:
        reached = signal_descendants(os.getpid(), signum)
        name = signal.Signals(signum).name
        print(
            f"nettebench: {name}: passed on to {len(reached)} job process(es); each training "
            "cell stops before its next step and keeps its last checkpoint. Snakemake exits "
            "once they have ended; run it again to resume.",
            file=sys.stderr,
            flush=True,
        )
        # From a thread: the scheduler's handler takes the scheduler's lock, which the main
        # thread (where this handler runs) may be holding right now.
        threading.Thread(target=graceful, args=(signal.SIGTERM, None), daemon=True).start()

    for signum in FORWARDED:
        signal.signal(signum, forward)
