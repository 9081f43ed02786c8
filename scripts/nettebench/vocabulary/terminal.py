"""A job's line in the terminal its run was started from, apart from its log.

A rule sends its job's output to the job's log (``> {log} 2>&1``), so what a job says reaches
the terminal only when the job fails, at the end, from Snakemake's summary. The few lines a user
must see while the run goes on (a cell resumes from its checkpoint; an image does not decode,
and how to get it back) go through a copy of Snakemake's standard error that the rule opens
before it redirects, named by :data:`ENV`::

    NETTEBENCH_TERMINAL_FD=3 exec python -m nettebench ... 3>&2 > {log} 2>&1

Locally that is the terminal; under SLURM, the job's SLURM log. :func:`say` writes
``nettebench: <line>`` there, and nothing where no rule opened one (a command run by hand, whose
output is the terminal already: the line it prints to its log is the one it would say).

The descriptor is the shell's, so a process the job starts may hold another file under the same
number (torchrun's workers are started with every other descriptor closed, and open their own).
The process the rule started therefore writes the file's identity into :data:`ENV` when this
module is imported (``3:<device>:<inode>``), before it starts any process, and a process that
inherits the variable says its line only if its descriptor is still that file: a forked loader
worker, or the command restarted in place under a library build, but never a socket or a log
that took the number. Stdlib only.
"""

from __future__ import annotations

import os

ENV = "NETTEBENCH_TERMINAL_FD"
PREFIX = "nettebench: "


def _identity(fd: int) -> str:
    stat = os.fstat(fd)
    return f"{stat.st_dev}:{stat.st_ino}"


def claim(environ=os.environ) -> int | None:
    """The terminal's descriptor for this process, or None. A bare number (the rule's) is
    taken as it is and written back with the file's identity, for the processes this one
    starts; a number with an identity is taken only while it still names that file."""
    value = environ.get(ENV, "")
    number, _, identity = value.partition(":")
    if not number.isdigit():
        return None
    fd = int(number)
    try:
        found = _identity(fd)
    except OSError:  # closed here
        return None
    if not identity:
        environ[ENV] = f"{fd}:{found}"
        return fd
    return fd if identity == found else None


_FD = claim()


def say(line: str) -> bool:
    """Write ``nettebench: <line>`` to the terminal (one write: a line of a few hundred bytes
    reaches a pipe whole, between Snakemake's own lines); whether there was one to write to."""
    if _FD is None:
        return False
    try:
        os.write(_FD, f"{PREFIX}{line}\n".encode(errors="replace"))
    except OSError:
        return False
    return True
