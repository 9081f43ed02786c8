"""The workflow's side of an interrupt: finding the jobs' processes and passing a signal on
(nettebench.study.job_signals, through psutil). The forwarding itself is tested in
tests/test_interrupts.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from nettebench.study import job_signals

_PARENT = "import subprocess; subprocess.run(['sleep', '30'])"


def _parent_pid_of(pid: int) -> int:
    """The kernel's own word: field 4 of /proc/<pid>/stat (after the command in parentheses)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_signal_reaches_every_process_below_and_parents_come_first():
    parent = subprocess.Popen([sys.executable, "-c", _PARENT])
    try:
        deadline = time.monotonic() + 20
        while not job_signals.descendants(parent.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        (child,) = job_signals.descendants(parent.pid)
        assert _parent_pid_of(child) == parent.pid
        mine = job_signals.descendants(os.getpid())
        assert mine.index(parent.pid) < mine.index(child)
        assert job_signals.signal_descendants(parent.pid, signal.SIGTERM) == [child]
        # sleep ends on SIGTERM; subprocess.run returns and the parent exits by itself.
        assert parent.wait(timeout=10) == 0
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_a_process_that_has_ended_has_nothing_below_it():
    ended = subprocess.Popen(["true"])
    ended.wait()
    assert job_signals.descendants(ended.pid) == []
    assert job_signals.signal_descendants(ended.pid, signal.SIGTERM) == []
