"""The work a profile looks at: the cell's own training steps on its own input pipeline.

Built from the trainer's pieces (:func:`nettebench.training.runner.make_runner`, ``build_loaders``,
``choose_batch_size``, ``configure_determinism``), so a profiled step is the step the timed cell
runs: same model, precision handling, memory format, cuDNN settings and loader. Each step fetches
its batch from the loader (so waiting for data shows in the trace, as
``enumerate(DataLoader)#...``), moves it to the device and trains on it. Batches come from
epoch after epoch, seeded like the trainer's epochs, when the window is longer than an epoch.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from nettebench.datasets.info import load_data_root
from nettebench.training.auto_batch import choose_batch_size
from nettebench.training.fit import build_loaders
from nettebench.training.runner import configure_determinism, make_runner, seed_epoch
from nettebench.vocabulary.cell import CellSpec


@dataclass
class Window:
    """What a profiled window ran, as profile.json reports it."""

    warmup_steps: int
    steps: int
    batch_size: int
    wall_s: float = 0.0  # the profiled steps, device synchronised at both ends
    step_spans_s: list[tuple[float, float]] = field(default_factory=list)  # from window start

    def as_dict(self) -> dict:
        return {
            "warmup_steps": self.warmup_steps,
            "steps": self.steps,
            "batch_size": self.batch_size,
            "wall_s": self.wall_s,
            "ms_per_step": 1000 * self.wall_s / self.steps if self.steps else None,
        }


def endless_batches(loaders, seed: int, batch_size: int) -> Iterator:
    """The training batches of epoch after epoch (each seeded as the trainer seeds it), the
    short last batch of an epoch left out (the trainer's loaders drop it already; a loader of
    one's own may not). A batch of a shape not seen before makes cuDNN autotune inside the
    profiled steps, and its trial kernels would then fill the tables. When no batch of an
    epoch is full (fewer images than ``batch_size``) the short ones are all there is, and they
    are used."""
    epoch = 0
    while True:
        seed_epoch(seed, epoch, loaders.generator)
        full, short = False, []
        for images, targets in loaders.train:
            if targets.shape[0] < batch_size:
                short.append((images, targets))  # the last one; the epoch ends with it
                continue
            full = True
            yield images, targets
        if not full:
            yield from short
        epoch += 1


class Workload:
    """A cell's model, training step and endless batch stream, ready to step."""

    def __init__(self, cell: CellSpec, data_path: str | Path, device: torch.device, store_dir):

        self.cell = cell
        self.device = device
        configure_determinism(cell, device)
        data_root = load_data_root(data_path)
        num_classes = len(data_root.classes)
        self.batch_size = choose_batch_size(cell, device, num_classes)
        self.loaders = build_loaders(
            cell, data_root, data_path, self.batch_size, device, Path(store_dir)
        )
        self.runner = make_runner(cell, device, num_classes, self.batch_size)
        self.runner.model.train()
        self._batches = endless_batches(self.loaders, self.cell.seed, self.batch_size)

    def step(self) -> None:
        images, targets = next(self._batches)
        images = self.runner.prepare_inputs(images)
        targets = targets.to(self.device, non_blocking=True)
        self.runner.step(images, targets)

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()
        self.synchronize()

    def timed_window(
        self,
        window: Window,
        *,
        around_step: Callable[[int], object] | None = None,
        after_step: Callable[[int], object] | None = None,
    ) -> None:
        """Run ``window.steps`` steps, recording their spans and the synchronised wall time.

        ``around_step(i)`` may return a context manager entered around step ``i`` (an NVTX
        range, say); ``after_step(i)`` runs after step ``i``'s span is recorded (advancing a
        profiler's schedule, whose last call may take long to process the trace: it is never
        timed).
        """

        self.synchronize()
        start = time.perf_counter()
        for index in range(window.steps):
            began = time.perf_counter() - start
            context = around_step(index) if around_step else contextlib.nullcontext()
            with context:
                self.step()
                if index == window.steps - 1:
                    self.synchronize()
            window.step_spans_s.append((began, time.perf_counter() - start))
            if after_step:
                after_step(index)
        window.wall_s = window.step_spans_s[-1][1] if window.step_spans_s else 0.0
