"""SIGINT and SIGTERM stop a cell at the next step, keeping its last checkpoint.

Ctrl-C in a terminal sends SIGINT to every process of the foreground group (Snakemake, the
trainer, its loader workers); SLURM sends SIGTERM before it kills a job at its time limit or
preempts it; the workflow forwards either one to its jobs (:mod:`nettebench.study.job_signals`).
Python's default SIGINT handler raises ``KeyboardInterrupt`` wherever the main thread happens to
be, which is unreliable in a trainer: raised inside the fork that starts an epoch's loader
workers it is printed as "Exception ignored" and lost, and the epoch trains on. SIGTERM, by
default, ends the process without any cleanup.

So the trainer runs under :class:`StopOnSignal`:

- **Inside the epoch loop** (after :meth:`StopOnSignal.defer`) a signal only sets a flag. The
  loaders are wrapped (:func:`stop_between_batches`) so the flag is looked at before every batch,
  that is after every step and before the next epoch forks its workers, and :class:`Interrupted`
  is raised there. The checkpoint after the last finished epoch stays on disk (it is written
  atomically); the rerun resumes from it.
- **While results are written** (:meth:`StopOnSignal.critical`) signals only set the flag, so a
  finished cell's files are never cut in half.
- **Anywhere else** (imports, building the model, a store) a signal raises at once: there is
  nothing to keep yet. A second signal at least ``FORCE_AFTER_S`` after the first also raises at
  once, wherever the trainer is, for a step that never ends.

SIGTERM to the whole group (SLURM's, or ``kill -- -PGID``) also ends the loader workers, and
torch's SIGCHLD handler then raises "DataLoader worker ... is killed by signal" wherever the
main thread is, mostly inside a step. Once a stop was asked for,
:meth:`StopOnSignal.watch_loader_workers` lets that error through only while a batch is being
fetched (where the wrapped loader turns it into the stop); anywhere else the check before the
next batch stops, and the epochs done are the epochs the checkpoint holds.

Repeated signals within ``FORCE_AFTER_S`` count as one request: a terminal's Ctrl-C reaches the
trainer directly and once more through Snakemake's forwarding, milliseconds apart.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
FORCE_AFTER_S = 3.0  # a repeat at least this long after the first signal stops at once


class Interrupted(BaseException):
    """The run was asked to stop by a signal. A BaseException, like KeyboardInterrupt, so that no
    ``except Exception`` on the way up mistakes it for an error of the cell."""

    def __init__(
        self, signum: int, *, forced: bool = False, cause: BaseException | None = None
    ) -> None:
        self.signum = signum
        # raised wherever the trainer was (by a repeated signal, or as ``cause`` on the way out),
        # so the epochs in hand may be one more than the checkpoint holds
        self.forced = forced
        self.cause = cause
        super().__init__(signal_name(signum))

    @property
    def exit_code(self) -> int:
        """128 + the signal number, as a shell reports a process ended by that signal."""
        return 128 + self.signum

    def message(self, cell, checkpoint: Path) -> str:
        """One line: the signal, the cell, what is kept, what to do. ``epochs_done`` (set by the
        trainer) is what the checkpoint holds, unless a repeat signal cut in anywhere."""
        done = getattr(self, "epochs_done", 0)
        if done and not self.forced:
            kept = f"kept the checkpoint after epoch {done}/{cell.epochs} ({checkpoint})"
        elif checkpoint.is_file():
            kept = f"kept the checkpoint on disk ({checkpoint})"
        else:
            kept = "no epoch had finished, so there is no checkpoint yet"
        cause = f" ({type(self.cause).__name__} on the way out: {self.cause})" if self.cause else ""
        return (
            f"interrupted by {signal_name(self.signum)}: {cell.path()} stopped; {kept}; "
            f"run it again to resume{cause}"
        )


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class StopOnSignal:
    """Install SIGINT/SIGTERM handlers that turn a signal into a stop at a safe point."""

    def __init__(self, signals: tuple[int, ...] = STOP_SIGNALS) -> None:
        self.signals = signals
        self.requested: int | None = None  # the first signal received, if any
        self._first_at = 0.0
        self._mode = "immediate"  # immediate | deferred | critical
        self._previous: dict[int, object] = {}
        self._child_handler: object = None  # torch's SIGCHLD handler, once a loader started
        # torch's handler calls the one it replaced: if that was _on_child, a call comes back
        self._in_child_handler = False
        self._fetching = False  # a wrapped loader is inside ``next()``

    def __enter__(self) -> StopOnSignal:
        for signum in self.signals:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: object) -> None:
        now = time.monotonic()
        if self.requested is None:
            self.requested = signum
            self._first_at = now
            if self._mode == "immediate":
                raise Interrupted(signum)
            print(
                f"{signal_name(signum)} received: stopping after this step",
                file=sys.stderr,
                flush=True,
            )
            return
        if self._mode != "critical" and now - self._first_at >= FORCE_AFTER_S:
            raise Interrupted(signum, forced=True)

    def watch_loader_workers(self) -> None:
        """Wrap the SIGCHLD handler a multi-process loader installed (torch does on its first
        ``iter()``), so that workers the stop's own signal ended are no error outside a fetch.
        Only while the handlers are installed (they are restored with the others)."""
        current = signal.getsignal(signal.SIGCHLD)
        if not self._previous or current == self._on_child or not callable(current):
            return  # not installed, already watched, or no loader's handler yet to wrap
        self._previous.setdefault(signal.SIGCHLD, current)
        self._child_handler = current
        signal.signal(signal.SIGCHLD, self._on_child)

    def _on_child(self, signum: int, frame: object) -> None:
        handler = self._child_handler
        if not callable(handler) or self._in_child_handler:
            return  # re-entered: the handler wrapped here chains back to this one
        self._in_child_handler = True
        try:
            handler(signum, frame)
        except RuntimeError:  # torch: "DataLoader worker (pid N) is killed by signal"
            if self.requested is None or self._fetching:
                raise  # an error of the cell; or, in a fetch, the loader makes it the stop
        finally:
            self._in_child_handler = False

    @contextlib.contextmanager
    def fetching(self) -> Iterator[None]:
        """Around a loader's ``next()``: a worker's death raises there, as torch means it to."""
        self._fetching = True
        try:
            yield
        finally:
            self._fetching = False

    def check(self) -> None:
        """Raise :class:`Interrupted` when a stop was asked for."""
        if self.requested is not None:
            raise Interrupted(self.requested)

    @contextlib.contextmanager
    def _in_mode(self, mode: str) -> Iterator[StopOnSignal]:
        previous, self._mode = self._mode, mode
        try:
            yield self
        finally:
            self._mode = previous

    def defer(self) -> None:
        """From now on signals set the flag; :meth:`check` (or the wrapped loaders) stop."""
        self._mode = "deferred"

    def critical(self):
        """Signals set the flag only, even repeated ones: for writing results."""
        return self._in_mode("critical")


class _StoppableLoader:
    """A loader whose iteration looks at the stop flag before each batch."""

    def __init__(self, loader, stop: StopOnSignal) -> None:
        self._loader = loader
        self._stop = stop

    def __len__(self) -> int:
        return len(self._loader)

    def __getattr__(self, name: str):
        return getattr(self._loader, name)

    def __iter__(self):
        self._stop.check()  # before an epoch forks its workers
        iterator = iter(self._loader)
        self._stop.watch_loader_workers()
        try:
            while True:
                self._stop.check()
                try:
                    with self._stop.fetching():
                        batch = next(iterator)
                except StopIteration:
                    return
                except Exception as error:
                    # Workers a signal ended (SIGTERM to the group) are reported by the loader
                    # as having died: that is the stop, not a data error.
                    if self._stop.requested is not None:
                        raise Interrupted(self._stop.requested) from error
                    raise
                yield batch
        finally:
            self._close(iterator)

    def _close(self, iterator) -> None:
        """Shut the loader's workers down now, not at exit: torch's multi-process iterator
        (``_shutdown_workers``, idempotent) also stops watching them then, so workers a signal
        ended are not reported again as errors while the trainer exits."""
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is None:
            return
        try:
            shutdown()
        except RuntimeError:  # "DataLoader worker ... is killed by signal", after a stop
            if self._stop.requested is None:
                raise


def stop_between_batches(loader, stop: StopOnSignal | None):
    """``loader``, stopping with :class:`Interrupted` before the next batch once a signal came."""
    return loader if stop is None else _StoppableLoader(loader, stop)
