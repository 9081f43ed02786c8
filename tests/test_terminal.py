"""A job's line in the terminal (nettebench.vocabulary.terminal): through the descriptor the rule
opens, never through one a started process took for something else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nettebench.vocabulary import terminal

SCRIPTS = str(Path(terminal.__file__).parents[2])
SAY = "from nettebench.vocabulary import terminal; print('to the log'); terminal.say('{}')"


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_job_started_as_the_rule_starts_it_says_its_line_in_the_terminal(tmp_path):
    """``NETTEBENCH_TERMINAL_FD=3 exec ... 3>&2 > log 2>&1``, as rules/train.smk writes it: the
    line reaches the shell's standard error, the job's own output only its log."""
    log = tmp_path / "job.log"
    shell = f'NETTEBENCH_TERMINAL_FD=3 exec {sys.executable} -c "{SAY.format("a cell resumes")}"'
    done = subprocess.run(
        ["bash", "-c", f"{shell} 3>&2 > {log} 2>&1"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SCRIPTS}, check=True,
    )  # fmt: skip
    assert done.stderr == "nettebench: a cell resumes\n" and done.stdout == ""
    assert log.read_text() == "to the log\n"


def test_without_a_descriptor_from_the_rule_nothing_is_said(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != terminal.ENV}
    done = subprocess.run(
        python(SAY.format("x")), capture_output=True, text=True,
        env={**env, "PYTHONPATH": SCRIPTS}, check=True,
    )  # fmt: skip
    assert (done.stdout, done.stderr) == ("to the log\n", "")


def test_a_process_the_job_starts_says_nothing_through_a_number_it_reused(tmp_path):
    """The job's process writes the file's identity into the variable; a process it starts with
    its other descriptors closed (as torchrun starts the cell's workers) and that opened a file
    of its own under the same number finds another file there, and leaves it alone."""
    child = tmp_path / "child.py"
    child.write_text(
        "import os, sys\n"
        "own = open(sys.argv[1], 'w')\n"  # takes the lowest free number: the one the job had
        f"assert own.fileno() == int(os.environ['{terminal.ENV}'].split(':')[0])\n"
        "from nettebench.vocabulary import terminal\n"
        "print(terminal.say('through the number'))\n"
    )
    own = tmp_path / "own.txt"
    job = (
        "import subprocess, sys\n"
        "from nettebench.vocabulary import terminal\n"  # claims the descriptor, notes its file
        "terminal.say('from the job')\n"
        f"subprocess.run([sys.executable, {str(child)!r}, {str(own)!r}], check=True)\n"
    )
    done = subprocess.run(
        ["bash", "-c", f'NETTEBENCH_TERMINAL_FD=3 exec {sys.executable} -c "{job}" 3>&2'],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SCRIPTS}, check=True,
    )  # fmt: skip
    assert done.stderr == "nettebench: from the job\n", done.stderr
    assert done.stdout == "False\n" and own.read_text() == ""


def test_claim_takes_a_bare_number_and_then_only_the_same_file():
    read, write = os.pipe()
    other_read, other_write = os.pipe()
    try:
        environ = {terminal.ENV: str(write)}
        assert terminal.claim(environ) == write
        number, device, inode = environ[terminal.ENV].split(":")
        stat = os.fstat(write)
        assert (int(number), int(device), int(inode)) == (write, stat.st_dev, stat.st_ino)
        assert terminal.claim(dict(environ)) == write  # a forked worker: the same file
        moved = {terminal.ENV: f"{other_write}:{device}:{inode}"}
        assert terminal.claim(moved) is None  # that number now names another file
    finally:
        for fd in (read, write, other_read, other_write):
            os.close(fd)
    assert terminal.claim({terminal.ENV: str(write)}) is None  # closed
    assert terminal.claim({}) is None and terminal.claim({terminal.ENV: "x"}) is None
