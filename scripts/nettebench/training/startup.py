"""A cell's start-up and wind-down by phase: a small clock the trainer marks with one-line calls.

What a user waits for besides the epochs: from process start to the first training step
(``imports``, ``key``: the result's validity key, ``device_probe``, ``model``, ``store``: the
input pipeline and its decoded store, and ``other``, the remainder), inside the epochs what is
not training (``checkpoints``, ``writing``: each epoch's row written; the first epoch's
overhead over the later ones is the summary's ``first_epoch_overhead_s``, kept once), and from
the last step to the record (``weights``, ``environment``: waiting for the thread that ran
nvidia-smi and git, ``after_epochs``: the cell job's hook after the epochs, its compute ceiling,
and ``other``).
:func:`summary` is the record's ``startup`` mapping: every phase in seconds, and the phases
before the first step sum to ``to_first_step_s`` (``other`` holds the rest).

One clock per process (:data:`CLOCK`), started by :func:`start` with the process's start time;
:func:`mark` ends the phase running since the last mark. Before :func:`start`, every call does
nothing, so code that runs outside the trainer's command (a test calling ``fit``) needs none.
Imports nothing but the standard library at its top.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

BEFORE = "before_first_step"
DURING = "during_epochs"
AFTER = "after_last_step"
T = TypeVar("T")


class PhaseClock:
    """Seconds per phase, in the three spans of a cell's process (wall clock, ``time.time``)."""

    def __init__(self, started_at: float) -> None:
        self.started_at = started_at
        self.last = started_at
        self.spans: dict[str, dict[str, float]] = {BEFORE: {}, DURING: {}, AFTER: {}}
        self.span = BEFORE
        self.first_step_at: float | None = None
        self.last_step_at: float | None = None

    def mark(self, phase: str, now: float | None = None) -> None:
        """The time since the last mark (or the start) was spent in ``phase``."""
        now = time.time() if now is None else now
        self._add(self.span, phase, now - self.last)
        self.last = now

    def add(self, phase: str, seconds: float) -> None:
        """``seconds`` spent in ``phase`` inside the epochs (a checkpoint's save, a row's write)."""
        self._add(DURING, phase, seconds)

    def first_step(self, now: float | None = None) -> None:
        """The first training step starts now: the rest since the last mark is ``other``."""
        now = time.time() if now is None else now
        if self.first_step_at is None:
            self.mark("other", now)
            self.first_step_at = now
            self.span = DURING

    def last_step(self, now: float | None = None) -> None:
        """The last training step ended now: later marks are the wind-down."""
        now = time.time() if now is None else now
        self.last_step_at = self.last = now
        self.span = AFTER

    def summary(self) -> dict[str, Any]:
        """The record's ``startup`` mapping (the wind-down up to now, ``other`` its rest)."""
        now = time.time()
        found: dict[str, Any] = {"to_first_step_s": None, "after_last_step_s": None}
        if self.first_step_at is not None:
            found["to_first_step_s"] = self.first_step_at - self.started_at
        if self.last_step_at is not None:
            self.mark("other", now)
            found["after_last_step_s"] = now - self.last_step_at
        for span, phases in self.spans.items():
            found[span] = {name: round(seconds, 4) for name, seconds in phases.items()}
        return found

    def _add(self, span: str, phase: str, seconds: float) -> None:
        phases = self.spans[span]
        phases[phase] = phases.get(phase, 0.0) + max(seconds, 0.0)


CLOCK: PhaseClock | None = None


def start(started_at: float, phase: str = "imports") -> None:
    """Start the process's clock at ``started_at``; the time until now was ``phase``."""
    global CLOCK
    CLOCK = PhaseClock(started_at)
    CLOCK.mark(phase)


def mark(phase: str) -> None:
    if CLOCK is not None:
        CLOCK.mark(phase)


def first_step() -> None:
    if CLOCK is not None:
        CLOCK.first_step()


def last_step() -> None:
    if CLOCK is not None:
        CLOCK.last_step()


def add(phase: str, seconds: float) -> None:
    """``seconds`` spent in ``phase`` inside the epochs."""
    if CLOCK is not None:
        CLOCK.add(phase, seconds)


def timed(phase: str, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)``, its seconds added to ``phase`` of the epochs."""
    began = time.time()
    try:
        return function(*args, **kwargs)
    finally:
        add(phase, time.time() - began)


def waited(phase: str, future) -> Any:
    """``future.result()``, the wait marked as ``phase``."""
    result = future.result()
    mark(phase)
    return result


def summary() -> dict[str, Any] | None:
    """The record's ``startup`` mapping; None without a clock."""
    return None if CLOCK is None else CLOCK.summary()
