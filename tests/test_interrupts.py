"""Signals in the trainer and in the workflow: where a stop is raised, what is passed on.

The end-to-end behaviour (real Snakemake runs, every way of sending a signal) is in
tests/test_faults.py; these pin down the pieces.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from nettebench.data.pil import _seed_worker
from nettebench.study import job_signals
from nettebench.training import interrupts
from nettebench.training.interrupts import Interrupted, StopOnSignal, stop_between_batches
from nettebench.vocabulary.cell import CellSpec


def _signal_self(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(0.05)  # the handler runs in the main thread at its next bytecode


def test_outside_the_epochs_a_signal_stops_at_once():
    with StopOnSignal() as stop, pytest.raises(Interrupted) as caught:
        _signal_self(signal.SIGTERM)
    assert caught.value.signum == signal.SIGTERM and caught.value.exit_code == 143
    assert stop.requested == signal.SIGTERM


def test_inside_the_epochs_a_signal_only_asks_and_the_next_check_stops():
    with StopOnSignal() as stop:
        stop.defer()
        _signal_self(signal.SIGINT)  # no exception here
        assert stop.requested == signal.SIGINT
        with pytest.raises(Interrupted) as caught:
            stop.check()
    assert caught.value.exit_code == 130 and not caught.value.forced


def test_a_repeat_soon_after_is_the_same_request_a_late_one_stops_at_once(monkeypatch):
    """On the handler's clock, set by the test (a loaded machine could stall between two
    signals sent "at once"): the second signal at +0.1 s, the third at the limit."""
    now = [1000.0]
    monkeypatch.setattr(interrupts.time, "monotonic", lambda: now[0])
    with StopOnSignal() as stop:
        stop.defer()
        _signal_self(signal.SIGINT)
        now[0] += 0.1
        _signal_self(signal.SIGINT)  # a terminal's Ctrl-C and the workflow's copy of it
        now[0] = 1000.0 + interrupts.FORCE_AFTER_S  # the limit after the first
        with pytest.raises(Interrupted) as caught:
            _signal_self(signal.SIGINT)
    assert caught.value.forced


def test_while_results_are_written_no_signal_cuts_in(monkeypatch):
    monkeypatch.setattr(interrupts, "FORCE_AFTER_S", 0.0)
    with StopOnSignal() as stop:
        with stop.critical():
            _signal_self(signal.SIGTERM)
            _signal_self(signal.SIGTERM)
        assert stop.requested == signal.SIGTERM


def test_the_previous_handlers_come_back():
    before = signal.getsignal(signal.SIGINT)
    with StopOnSignal():
        assert signal.getsignal(signal.SIGINT) != before
    assert signal.getsignal(signal.SIGINT) == before


def test_wrapped_batches_stop_before_the_next_batch_after_a_signal():
    with StopOnSignal() as stop:
        stop.defer()
        seen = []
        with pytest.raises(Interrupted):
            for batch in stop_between_batches([1, 2, 3], stop):
                seen.append(batch)
                if batch == 1:
                    _signal_self(signal.SIGTERM)
    assert seen == [1]
    assert len(stop_between_batches([1, 2, 3], stop)) == 3
    assert stop_between_batches([1], None) == [1]


class _WorkersDie:
    """A loader whose workers die, the way a Ctrl-C to the whole group can end them."""

    def __init__(self, ctrl_c: bool) -> None:
        self.ctrl_c = ctrl_c

    def __iter__(self):
        yield 1
        if self.ctrl_c:
            _signal_self(signal.SIGINT)
        raise RuntimeError("DataLoader worker (pid 1) exited unexpectedly")

    def __len__(self):
        return 2


def test_a_loader_that_dies_after_a_signal_is_the_stop_not_an_error():
    with StopOnSignal() as stop:
        stop.defer()
        with pytest.raises(Interrupted):
            list(stop_between_batches(_WorkersDie(ctrl_c=True), stop))
        with pytest.raises(RuntimeError, match="exited unexpectedly"):
            list(stop_between_batches(_WorkersDie(ctrl_c=False), StopOnSignal()))


class _Numbers(Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, index):
        return torch.tensor([index])


def _workers_started_since(before: set[int]) -> set[int]:
    """This process's children that were not there before: the loader's workers."""
    return set(job_signals.descendants(os.getpid())) - before


def _a_step_of(seconds: float) -> None:
    """The trainer inside a step: signal handlers run meanwhile, as at any bytecode."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.01)


def test_workers_a_group_sigterm_ends_during_a_step_stop_the_epochs_at_the_next_batch():
    """SIGTERM to the whole group while the trainer is inside a step (CI saw this once): the
    workers die at once, and torch's SIGCHLD handler raises "DataLoader worker ... is killed by
    signal" wherever the main thread is, not in the loader. That must still be the stop at the
    next batch, so the message can say which epoch the checkpoint holds."""
    loader = DataLoader(_Numbers(), batch_size=2, num_workers=2, worker_init_fn=_seed_worker)
    before = set(job_signals.descendants(os.getpid()))
    seen = []
    with StopOnSignal() as stop:
        stop.defer()
        with pytest.raises(Interrupted) as caught:
            for batch in stop_between_batches(loader, stop):
                seen.append(batch)
                if len(seen) == 1:
                    workers = _workers_started_since(before)
                    assert len(workers) == 2, workers
                    for pid in (os.getpid(), *workers):  # the group, the trainer first
                        os.kill(pid, signal.SIGTERM)
                    _a_step_of(1.0)  # the step goes on; the workers die meanwhile
    assert len(seen) == 1 and stop.requested == signal.SIGTERM
    assert not caught.value.forced and caught.value.signum == signal.SIGTERM


def test_a_worker_dying_with_no_stop_asked_is_still_an_error():
    loader = DataLoader(_Numbers(), batch_size=2, num_workers=1, worker_init_fn=_seed_worker)
    before = set(job_signals.descendants(os.getpid()))
    with StopOnSignal() as stop, pytest.raises(RuntimeError, match="killed by signal"):
        stop.defer()
        for _ in stop_between_batches(loader, stop):
            (worker,) = _workers_started_since(before)
            os.kill(worker, signal.SIGTERM)
            _a_step_of(10.0)  # torch's SIGCHLD handler raises in it
    assert stop.requested is None


def test_the_message_names_the_signal_the_cell_and_the_checkpoint(tmp_path):
    cell = CellSpec(dataset="d", epochs=4)
    stop = Interrupted(signal.SIGTERM)
    stop.epochs_done = 2
    line = stop.message(cell, tmp_path / "checkpoint.pt")
    assert line.startswith(f"interrupted by SIGTERM: {cell.path()} stopped")
    assert f"kept the checkpoint after epoch 2/4 ({tmp_path / 'checkpoint.pt'})" in line
    assert "no checkpoint yet" in Interrupted(signal.SIGINT).message(cell, tmp_path / "none")


class _Handlers(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, index):
        names = {signal.SIG_IGN: 0, signal.SIG_DFL: 1}
        state = [names.get(signal.getsignal(s), 2) for s in (signal.SIGINT, signal.SIGTERM)]
        return torch.tensor(state)


def test_loader_workers_ignore_sigint_but_not_sigterm():
    """A terminal's Ctrl-C reaches the workers too, and the trainer stops them itself; SIGTERM
    must still end them (multiprocessing ends leftover workers with it at exit, then waits)."""
    loader = DataLoader(_Handlers(), batch_size=2, num_workers=1, worker_init_fn=_seed_worker)
    with StopOnSignal():  # the trainer's handlers, which a forked worker starts with
        (batch,) = list(loader)
    assert batch.tolist() == [[0, 1], [0, 1]]


# -- the workflow's side: passing Ctrl-C and SIGTERM on to the jobs --------------------------


def test_descendants_are_found_through_proc():
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; subprocess.run(['sleep', '30'])"]
    )
    try:
        deadline = time.monotonic() + 20
        while len(job_signals.descendants(parent.pid)) < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        (child,) = job_signals.descendants(parent.pid)
        assert parent.pid in job_signals.descendants(os.getpid())
        assert child in job_signals.descendants(os.getpid())
    finally:
        parent.kill()
        parent.wait()


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_forwarding_passes_the_signal_on_then_hands_over_to_the_graceful_exit():
    # The child starts with SIGINT's default, as a job Snakemake starts does: an ignored SIGINT
    # is inherited across exec, and once in a full run (not reproduced alone) the child kept
    # running after the signal was passed on, as if this process had SIGINT ignored.
    child = subprocess.Popen(["sleep", "30"], preexec_fn=_default_sigint)
    handed = threading.Event()
    before = {s: signal.getsignal(s) for s in job_signals.FORWARDED}
    try:
        job_signals.forward_interrupts(lambda *args: handed.set())
        _signal_self(signal.SIGINT)
        assert child.wait(timeout=10) == -signal.SIGINT
        assert handed.wait(timeout=10)
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_loader_handler_installed_over_the_watch_is_called_once_not_in_a_cycle():
    """torch installs its SIGCHLD handler once per process, chaining to the handler it found.
    A loader without workers iterated first left the watch's own handler there, torch's then
    chained to it, and the next watch wrapped torch's: each called the other until
    RecursionError, printed from DataLoader.__del__ in every epoch of the quick start's `cached`
    cell. One SIGCHLD must reach torch's handler once."""
    calls = []
    saved = signal.getsignal(signal.SIGCHLD)
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        with StopOnSignal() as stop:
            stop.watch_loader_workers()  # a loader without workers: nothing of torch's yet
            found = signal.getsignal(signal.SIGCHLD)

            def torch_like(signum, frame):  # as torch's _set_SIGCHLD_handler chains
                calls.append(signum)
                if callable(found):
                    found(signum, frame)

            signal.signal(signal.SIGCHLD, torch_like)  # the first loader with workers
            stop.watch_loader_workers()  # the next epoch's loader
            signal.getsignal(signal.SIGCHLD)(signal.SIGCHLD, None)
        assert calls == [signal.SIGCHLD]
    finally:
        signal.signal(signal.SIGCHLD, saved)
