"""A command's start: its imports with Python's cyclic garbage collector paused.

Every training, ceiling, inference and profile job imports torch, torchvision and, through
``torch.optim`` or DDP, ``torch._dynamo``: half a million objects (modules, classes, functions)
that live as long as the process. CPython's collector runs a pass after every 700 new container
objects, and every so often a full pass over all of them, so the import pays again and again for
objects it cannot free: measured on the 2-core EPYC, importing those three took 4.8 CPU-s with
the collector and 3.8 without it (medians of 8 runs each), and 80 of the test suite's CPU-seconds
went to collections in its torch processes; with the pause, four of the suite's end-to-end test
files took 10-14 % less CPU, side by side with the code before it (docs/measurements.md).

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

Stdlib only: the root package imports it before anything else.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Sequence

_paused = False


def pause_while_importing(argv: Sequence[str] | None = None) -> bool:
    """Turn the collector off when this process is a ``python -m`` command still importing
    (``argv[0] == "-m"``) and the collector is on; say whether it did."""
    global _paused
    argv = sys.argv if argv is None else argv
    if list(argv[:1]) != ["-m"] or not gc.isenabled():
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


def run(main: Callable[[], int]) -> int:
    """A command module's ``if __name__ == "__main__":`` block: resume the collector, then run
    the command and return its exit status."""
    resume()
    return main()
