"""A process pool that always ends: workers that die of SIGTERM, shut down without signals.

The commands that decode or write images in several processes (the store build, the synthetic
dataset, the image check) fork their workers from a process whose SIGINT and SIGTERM handlers may
only set a flag (the trainer's :class:`~nettebench.training.interrupts.StopOnSignal` builds a
``cached`` cell's store) and which may hold other threads. ``multiprocessing.Pool``'s context
manager ends with ``terminate()``: it takes the task queue's lock from the workers and sends each
one SIGTERM. A worker that inherited a handler which does not end it then waits for that lock
forever, and the parent waits for the worker: a trainer hung there for 20 minutes in the test
suite (``tests/test_loader_bench.py``, 2026-12-03: the parent in ``Pool.join``, one worker alive
waiting for the queue's lock, the other gone).

So :func:`worker_pool`'s workers restore SIGTERM's default (the kernel ends them, no Python code
runs) and ignore SIGINT (a terminal's Ctrl-C reaches the parent, which stops them), and a pool
whose work finished is closed and joined, its workers leaving through the queue's end markers,
with no signal at all. Only a pool left by an exception is terminated.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
from collections.abc import Callable, Iterator
from multiprocessing.pool import Pool
from typing import Any


def _start_worker(initializer: Callable[..., Any] | None, initargs: tuple) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)


@contextlib.contextmanager
def worker_pool(
    jobs: int, initializer: Callable[..., Any] | None = None, initargs: tuple = ()
) -> Iterator[Pool]:
    """``multiprocessing.Pool(jobs, initializer, initargs)`` whose end cannot hang (above)."""
    pool = multiprocessing.Pool(jobs, initializer=_start_worker, initargs=(initializer, initargs))
    try:
        yield pool
    except BaseException:
        pool.terminate()
        raise
    else:
        pool.close()
    finally:
        pool.join()
