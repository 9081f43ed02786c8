"""The sentence a failed job wrote, shown where the user looks: at the end of Snakemake's output.

A job that fails with a problem the user must fix (a JPEG that does not decode, weights that
cannot be downloaded, a library that is missing) says so in one line, ``error: ...``, in its log
file, and a training cell stopped by Ctrl-C or SIGTERM says what it kept (``interrupted by
SIGINT: ... kept the checkpoint after epoch 2/3``); Snakemake's terminal shows only the shell
command, ``CalledProcessError`` and the log's path. The workflow's ``onerror:`` handler calls
:func:`summary` with Snakemake's own log of the run: every failed job (``Error in rule <rule>:``
with its ``log: <path>``) is found there, its log's first such line is printed with the rule and
the log's path, and after an interruption one line says how to resume. Snakemake's own report of
the failed jobs comes before these lines; no public setting switches it off.

Imports the standard library only: Snakemake imports it while it parses the workflow.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

_FAILED_JOB = re.compile(r"^Error in rule (?P<rule>\S+):\n(?P<body>(?:[ \t]+.*\n?)*)", re.MULTILINE)
_LOG_LINE = re.compile(r"^\s+log: (?P<paths>.+?) \(check log file\(s\) for error details\)$", re.M)
ERROR_PREFIX = "error: "
INTERRUPTED_PREFIX = "interrupted by "  # nettebench.training.interrupts' first line
RESUME = (
    "nettebench: run the same command again to resume: every finished cell is kept, and each "
    "interrupted cell goes on from its last checkpoint"
)


def failed_jobs(snakemake_log: str) -> list[tuple[str, list[str]]]:
    """(rule, its job's log files) for every ``Error in rule`` block of Snakemake's log."""
    jobs = []
    for block in _FAILED_JOB.finditer(snakemake_log):
        found = _LOG_LINE.search(block["body"])
        paths = found["paths"].split(", ") if found else []
        jobs.append((block["rule"], paths))
    return jobs


def first_error(job_log: Path) -> str | None:
    """The first line of a job's log that starts with ``error: `` (without the prefix) or
    ``interrupted by `` (as written)."""
    try:
        lines = job_log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith(ERROR_PREFIX):
            return line[len(ERROR_PREFIX) :]
        if line.startswith(INTERRUPTED_PREFIX):
            return line
    return None


def summary(snakemake_logs: Iterable[str | Path], workdir: Path = Path(".")) -> list[str]:
    """One line per failed job that wrote an ``error:`` or ``interrupted by`` line:
    ``nettebench: <rule>: <sentence> (log: <path>)``, then :data:`RESUME` if a job was
    interrupted; jobs without such a line (a traceback) are left to Snakemake's own report."""
    lines = []
    for snakemake_log in snakemake_logs:
        try:
            text = Path(snakemake_log).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for rule, paths in failed_jobs(text):
            for path in paths:
                sentence = first_error(workdir / path)
                if sentence:
                    lines.append(f"nettebench: {rule}: {sentence} (log: {path})")
    interrupted = any(f": {INTERRUPTED_PREFIX}" in line for line in lines)
    return list(dict.fromkeys(lines)) + ([RESUME] if interrupted else [])
