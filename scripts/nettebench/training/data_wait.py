"""How long a training loop's steps waited for their batches: the time the device went without
work because the input pipeline had not delivered.

On a CPU that is the host's time inside the loader's ``next()``. On a GPU the host's time there
says little: where no loss scaler synchronises every step (O0, tf32, O3, bf16), the host runs
ahead of the GPU until the launch queue is full, and a loader that launches kernels itself (the
``cached`` loader's gather and augmentation, ~60 launches a batch) then blocks inside ``next()``
on the GPU's compute, which the host clock would count as data wait. So on a GPU a CUDA event is
recorded on the compute stream before and after ``next()``: the GPU time between the two is the
time the GPU spent on the batch (the loader's own kernels, a stream wait for a streamed copy) or
idle waiting for it, and none of the compute queued before it. The events are read once, after
the epoch's closing synchronisation, so measuring adds no synchronisation.
"""

from __future__ import annotations

import time

import torch


class DataWait:
    """``start()`` before the loader's ``next()``, ``stop()`` after it returned a batch;
    :meth:`seconds` once the device is synchronised."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = torch.device(device).type == "cuda"
        self.host_s = 0.0
        self.events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self._began: float | torch.cuda.Event | None = None

    def start(self) -> None:
        if self.cuda:
            self._began = torch.cuda.Event(enable_timing=True)
            self._began.record()
        else:
            self._began = time.perf_counter()

    def stop(self) -> None:
        if self.cuda:
            ended = torch.cuda.Event(enable_timing=True)
            ended.record()
            self.events.append((self._began, ended))
        else:
            self.host_s += time.perf_counter() - self._began

    def seconds(self) -> float:
        """The total wait of the batches between ``start()`` and ``stop()`` (after the device
        was synchronised: the events are read here)."""
        if not self.cuda:
            return self.host_s
        return sum(began.elapsed_time(ended) for began, ended in self.events) / 1000
