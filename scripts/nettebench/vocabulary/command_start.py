"""A command's start and end: its imports with Python's cyclic garbage collector paused, and
its exit without Python's teardown of what they made.

Every training, ceiling, inference and profile job imports torch and torchvision, and a
data-parallel or compiled cell ``torch._dynamo`` too: up to half a million objects (modules,
classes, functions) that live as long as the process. CPython's collector runs a pass after
every 700 new container objects, and every so often a full pass over all of them, so the import
pays again and again for objects it cannot free: measured on the 2-core EPYC, importing torch,
torchvision and ``torch._dynamo`` took 4.8 CPU-s with the collector and 3.8 without it (medians
of 8 runs each), and 80 of the test suite's CPU-seconds went to collections in its torch
processes; with the pause, four of the suite's end-to-end test files took 10-14 % less CPU, side
by side with the code before it (docs/measurements.md).

So a command run as ``python -m nettebench.<...>`` imports with the collector off:
``nettebench/__init__.py`` calls :func:`pause_while_importing` while Python is still locating
the module to run (the only time ``sys.argv[0]`` is ``"-m"``), and the command's entry
(:func:`run` in a module's ``__main__`` block, :func:`resume` in
:func:`nettebench.vocabulary.commands.main`) turns it back on before the command's work: what
the imports made is moved out of every later pass (:func:`gc.freeze`), and the collector runs as
before for everything made after. The import's own garbage cycles (about 9,400 objects, a
full pass's worth of 0.26 CPU-s to find) are frozen with the rest rather than collected.

A process that imports the package as a library (pytest, Snakemake parsing the Snakefile, a
``python -c``) never has its collector touched by this module: ``tests/test_command_start.py``
checks both, and that every command's entry resumes. Snakemake's own process, whose imports are
done before any workflow code runs, is frozen by the Snakefile's first step (``gc.freeze()``; a
dry run of the quick start 2.0 -> 1.6 CPU-s), which the same test file checks.

The same half a million objects cost again at the end: after the command's work, Python's
finalization clears every module and frees each object one by one, about 0.5-0.7 CPU-s of a torch
process's life that nobody waits for (measured on the 2-core EPYC: ``import torch, torchvision,
torch._dynamo`` then a normal exit against ``os._exit``; docs/measurements.md). So a command
started as ``python -m`` ends through :func:`end`: it does what Python's own exit does that
anyone can observe, in Python's order (non-daemon threads joined, among them a checkpoint still
being written; every :mod:`atexit` handler, among them logging's and multiprocessing's, which
ends the DataLoader's workers; standard output and error flushed), then leaves with the command's
status through :func:`os._exit`, skipping only the freeing of memory the process hands back
anyway. What Python frees at that point runs no code of ours that writes anything: the files a
command writes are closed by its ``with`` blocks before :func:`end` runs. A process that runs the
command some other way (``python -m cProfile -m ...``, ``runpy``, a test calling ``main``) ends
as Python ends it, so profilers and debuggers still see the end.

Stdlib only: the root package imports it before anything else.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import NoReturn

_paused = False
_started_as_command = False  # this interpreter's ``-m`` is a nettebench module (see end)


def pause_while_importing(argv: Sequence[str] | None = None) -> bool:
    """Turn the collector off when this process is a ``python -m`` command still importing
    (``argv[0] == "-m"``) and the collector is on; say whether it did. Such a process is noted
    as a command whether or not the collector was on: :func:`end` skips its teardown."""
    global _paused, _started_as_command
    argv = sys.argv if argv is None else argv
    if list(argv[:1]) != ["-m"]:
        return False
    _started_as_command = True
    if not gc.isenabled():
        return False
    gc.disable()
    _paused = True
    return True


def resume() -> None:
    """The imports are done: freeze what they made and turn the collector back on. Does nothing
    when :func:`pause_while_importing` did not pause it (so a second call, or a library import,
    changes nothing)."""
    global _paused
    if not _paused:
        return
    gc.freeze()
    gc.enable()
    _paused = False


def run(main: Callable[[], int | None]) -> NoReturn:
    """A command module's ``if __name__ == "__main__":`` block: resume the collector, run the
    command, and end the process with its exit status (:func:`end`)."""
    resume()
    end(main())


def end(status: int | None) -> NoReturn:
    """End the process with ``status`` (``None``: 0), as ``sys.exit(status)`` would. In a process
    started as ``python -m nettebench.<...>``, everything Python's exit does that can be observed
    happens first, in Python's order, and the teardown of the objects is skipped (the module's
    docstring says why); any other process (a profiler or runpy running the command) exits
    through ``sys.exit``. An error escaping the command never reaches here: it ends the process
    as it always did, traceback and all."""
    if not _started_as_command or not isinstance(status, int | None):
        sys.exit(status)
    code = 0 if status is None else status
    threading._shutdown()  # what Python's exit does first: join the non-daemon threads
    atexit._run_exitfuncs()  # then the atexit handlers (errors printed, as Python does)
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe: Python's exit says 120
            code = code or 120
    os._exit(code)
