"""What one run of a cell is handed, as two records instead of a dozen parameters.

:class:`RunOptions` is what a caller of :func:`~nettebench.training.cli.run_cell` may choose
beyond the cell, its data and its folder (every field has the default the command line has);
:class:`RunContext` is what the trainer works from once the run has started: the resolved
device, this process's part in a data-parallel cell (:class:`~.distributed.DataParallel`), the
result's key. :class:`Trained` is what the epochs came to, as :mod:`.outcome` writes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nettebench.records import conditions
from nettebench.training.distributed import ALONE, DataParallel
from nettebench.training.interrupts import StopOnSignal
from nettebench.vocabulary.cell import CellSpec

WARMUP_STEPS = 5  # first-epoch steps excluded from img/s (autotuning, allocator, workers)

# A hook run right after a cell's epochs: (device, record, epochs_s) -> the files it wrote.
AfterEpochs = Callable[[torch.device, dict[str, Any], float], "list[Path] | None"]


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """:func:`~nettebench.training.cli.run_cell`'s options (its docstring says what each does)."""

    kind: str = "matrix"
    threads: int | None = None
    warmup_steps: int = WARMUP_STEPS
    started_at: float | None = None  # default: when this process started
    store_dir: str | Path | None = None
    builds_dir: str | Path | None = None
    stop: StopOnSignal | None = None
    stamp: dict[str, Any] | None = None
    after_epochs: AfterEpochs | None = None
    weights: str | Path | None = None


@dataclasses.dataclass(frozen=True)
class RunContext:
    """One started run of ``cell``: what :func:`~nettebench.training.fit.fit` trains from.

    ``data`` is the dataset.json or tree the cell was given (it also identifies a ``cached``
    store's source); ``store_dir`` where that store lives (None: ``<out_dir>/store``); ``key``
    the result's key the checkpoint is stamped with (None: the cell's id); ``stamp`` the key
    ``finished.json`` records (None: none is written, as for a run outside :func:`main`);
    ``weights`` where the final weights go (None: nowhere); ``probe`` measures the timing
    conditions.
    """

    cell: CellSpec
    data: str | Path
    out_dir: Path
    device: torch.device
    started_at: float
    parallel: DataParallel = ALONE
    warmup_steps: int = WARMUP_STEPS
    store_dir: str | Path | None = None
    stop: StopOnSignal | None = None
    probe: conditions.Probe | None = None
    key: dict[str, Any] | None = None
    stamp: dict[str, Any] | None = None
    weights: Path | None = None


@dataclasses.dataclass
class Trained:
    """What a run's epochs came to: the rows (kept on an out-of-memory), the status and its
    message, and the fit's result (:class:`~nettebench.training.fit.FitResult`) when it ended."""

    rows: list[dict[str, Any]]
    status: str
    message: str | None = None
    fit: Any = None
