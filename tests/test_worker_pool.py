"""The image commands' process pool ends, whatever signal handlers the parent installed.

A trainer building its store forks the pool's workers under its own SIGTERM handler; with
``multiprocessing.Pool``'s context manager a worker that did not die of ``terminate()``'s SIGTERM
hung the trainer for 20 minutes (nettebench.vocabulary.worker_pool says how).
"""

from __future__ import annotations

import multiprocessing.pool
import signal
import subprocess
import sys
import textwrap

from nettebench.vocabulary.worker_pool import worker_pool


def _handlers(_: int) -> tuple[str, str]:
    return signal.getsignal(signal.SIGTERM).name, signal.getsignal(signal.SIGINT).name


_MARKS: list[str] = []  # what a worker's initializer left in that worker's copy of the module


def _mark(text: str) -> None:
    _MARKS.append(text)


def _marks(_: int) -> tuple[str, ...]:
    return tuple(_MARKS)


def test_workers_die_of_sigterm_and_leave_ctrl_c_to_the_parent():
    previous = signal.signal(signal.SIGTERM, lambda *_: None)  # a handler that only takes note
    try:
        with worker_pool(2) as pool:
            seen = set(pool.map(_handlers, range(8)))
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert seen == {("SIG_DFL", "SIG_IGN")}


def test_the_initializer_still_runs_in_every_worker():
    with worker_pool(2, initializer=_mark, initargs=("opened",)) as pool:
        assert set(pool.map(_marks, range(8))) == {("opened",)}
    assert _MARKS == []  # run in the workers, not here


def test_a_finished_pool_is_closed_and_joined_never_terminated(monkeypatch):
    terminated = []
    terminate = multiprocessing.pool.Pool.terminate
    monkeypatch.setattr(
        multiprocessing.pool.Pool,
        "terminate",
        lambda pool: terminated.append(pool) or terminate(pool),
    )
    with worker_pool(2) as pool:
        assert sorted(pool.imap_unordered(abs, range(-40, 0))) == list(range(1, 41))
        workers = list(pool._pool)
    assert terminated == []
    assert [worker.exitcode for worker in workers] == [0, 0]  # left through the queue's end


PARENT_THAT_ONLY_NOTES_SIGNALS = textwrap.dedent(
    """
    import signal
    from nettebench.vocabulary.worker_pool import worker_pool

    signal.signal(signal.SIGTERM, lambda *_: print("noted", flush=True))
    signal.signal(signal.SIGINT, lambda *_: print("noted", flush=True))
    try:
        with worker_pool(2) as pool:
            list(pool.imap_unordered(abs, range(100)))
            workers = list(pool._pool)
            raise RuntimeError("a task failed")
    except RuntimeError:
        print("ended", sorted(worker.exitcode for worker in workers))
    """
)


def test_a_pool_left_by_an_error_is_ended_even_under_a_parent_that_ignores_signals():
    result = subprocess.run(
        [sys.executable, "-c", PARENT_THAT_ONLY_NOTES_SIGNALS],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    # terminated (-SIGTERM), or already gone through the end markers the pool sends (0)
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("ended ["), result.stdout
    codes = {int(code) for code in last[len("ended [") : -1].split(",")}
    assert codes <= {0, -signal.SIGTERM}, last
