"""Per-step times of an epoch, without a device synchronisation per step.

A step's time is the interval between the ends of two consecutive steps, so it holds the wait
for the batch and the compute, the same span the epoch's wall time adds up.

- On a GPU each step end records a CUDA event on the current stream; the events are read once,
  after the epoch's closing synchronisation. An event's timestamp is taken when the GPU reaches
  it in stream order, so an idle GPU waiting for the loader counts in its step, and the host
  never blocks on the device inside the epoch (a synchronisation per step would serialise the
  GPU and the loader and slow down what is being measured).
- On a CPU a step's work has ended when ``step`` returns: ``time.perf_counter`` per step is
  exact and costs nothing.
"""

from __future__ import annotations

import time

import torch


class StepClock:
    """Marks the start of an epoch and the end of each step; :meth:`seconds` after the epoch's
    closing synchronisation gives each step's time."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.device = device
        self._marks: list = []

    def _now(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record(torch.cuda.current_stream(self.device))
            return event
        return time.perf_counter()

    def start(self) -> None:
        """The epoch starts (call after the synchronisation that opens it)."""
        self._marks = [self._now()]

    def mark(self) -> None:
        """A step ended (its work is queued on a GPU, done on a CPU)."""
        self._marks.append(self._now())

    def seconds(self) -> list[float]:
        """Each step's seconds, in order. On a GPU the caller has synchronised the device."""
        marks = self._marks
        if self.cuda:
            return [a.elapsed_time(b) / 1000 for a, b in zip(marks, marks[1:], strict=False)]
        return [b - a for a, b in zip(marks, marks[1:], strict=False)]
