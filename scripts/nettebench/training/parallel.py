"""Data parallelism as the trainer sees it: one object, a no-op at one process.

:class:`DataParallel` is this process's part in a cell (its rank of the cell's processes) and
the few points where data parallelism changes a run; the trainer (:mod:`.cli`, :mod:`.fit`)
holds one (:class:`~.context.RunContext`'s ``parallel``) and calls nothing else of it. The
process group, DDP, the shards and the sums themselves are :mod:`.distributed`'s.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from nettebench.training.distributed import (
    after_outcome,
    agreed,
    any_rank,
    barrier,
    combine_train,
    combine_val,
    job_pid,
    join,
    launches,
    local_batch,
    local_device,
    local_model,
    rank,
    rank_record,
    runs_after_epochs,
    shard,
    threads_share,
    world_size,
    wrap,
    writes_results,
)


@dataclasses.dataclass(frozen=True)
class DataParallel:
    """This process's part in a cell, as the trainer sees it: its ``rank`` of ``world``
    processes and the few points where data parallelism changes a run. At one process
    (:data:`ALONE`) every point leaves what it is handed as it is.

    The trainer (:mod:`.cli`, :mod:`.fit`) holds one, made by :meth:`from_env` when a run
    starts, and calls nothing else of this module: :meth:`device` and :meth:`start` (its GPU,
    threads and process group), :meth:`wrap` (DDP), :meth:`shard` (the data and the local
    batch), :meth:`agreed` (the stop), :meth:`combine_train` and :meth:`validate` (an epoch's
    numbers), :attr:`writer` (who writes), :meth:`once` (a store built by one process),
    :meth:`runs_after_epochs` and :meth:`settle` (the outcome). The compute ceiling, timed
    in the same processes after the epochs, uses :meth:`share_threads`, :meth:`local_batch`
    and :meth:`any` (:mod:`nettebench.benchmarks.ceiling`).
    """

    rank: int = 0
    world: int = 1

    @classmethod
    def from_env(cls) -> DataParallel:
        """This process's part as torchrun set it (:data:`ALONE` outside torchrun)."""
        return cls(rank(), world_size())

    @property
    def alone(self) -> bool:
        """One process: every point leaves what it is handed as it is."""
        return self.world == 1

    @property
    def writer(self) -> bool:
        """Rank 0 writes the cell's files (epochs.csv, checkpoint, ceiling, results)."""
        return self.rank == 0

    @property
    def job_pid(self) -> int | None:
        """The root of the job's process tree for the timing conditions (:func:`job_pid`)."""
        return job_pid()

    def launches(self, cell) -> bool:
        """Whether this command must start the cell's processes (:func:`launches`)."""
        return launches(cell)

    def device(self, device: torch.device) -> torch.device:
        """This process's own GPU for the run's ``cuda`` (:func:`local_device`)."""
        return local_device(device)

    def start(self, cell, device: torch.device, threads: int | None) -> None:
        """This process's share of the job's ``threads`` and its process group on ``device``
        (:func:`join`; the device is :func:`local_device`'s already)."""
        self.share_threads(threads)
        join(cell, device)

    def share_threads(self, threads: int | None) -> None:
        """This process's share of the job's ``threads`` as torch's CPU threads (none given:
        torch's default) (:func:`threads_share`)."""
        if threads:
            torch.set_num_threads(threads_share(threads))

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any process (a collective: every process calls it at the
        same point, so a loop that stops on it stops at the same step everywhere)."""
        return flag if self.alone else any_rank(flag)

    def wrap(self, runner):
        """``runner``'s model in DDP (:func:`wrap`)."""
        return runner if self.alone else wrap(runner)

    def local_batch(self, batch_size: int) -> int:
        """This process's share of the global batch (:func:`local_batch`)."""
        return batch_size if self.alone else local_batch(batch_size)

    def shard(self, loaders, batch_size: int):
        """(this process's share of ``loaders``, the per-process batch) (:func:`shard`)."""
        if self.alone:
            return loaders, batch_size
        return shard(loaders, batch_size), local_batch(batch_size)

    def agreed(self, stop):
        """``stop`` for the training batches, collective among the processes (:func:`agreed`)."""
        return stop if self.alone else agreed(stop)

    def once(self, needed: bool, build) -> None:
        """``build()`` by rank 0 alone when ``needed`` on any process, the others waiting."""
        if self.alone:
            if needed:
                build()
            return
        if any_rank(needed):
            if self.writer:
                build()
            barrier()

    def combine_train(self, train):
        """A training epoch's numbers over every process (:func:`combine_train`)."""
        return train if self.alone else combine_train(train)

    def validate(self, runner, evaluate, split):
        """``evaluate(runner)`` on this process's share of ``split`` (the model DDP wraps: no
        collective), then its numbers over every process (:func:`combine_val`)."""
        if self.alone:
            return evaluate(runner)
        return combine_val(evaluate(local_model(runner)), split)

    def runs_after_epochs(self, status: str) -> bool:
        """Whether the job's after-epochs step runs here (:func:`runs_after_epochs`)."""
        return runs_after_epochs(status)

    def settle(self, record: dict[str, Any], trained, started_at: float, write):
        """The run's record: ``write()``'s (the outcome written) where this process writes
        results (:func:`writes_results`: ``trained.status`` decides), then
        :func:`after_outcome`; elsewhere the record of a process that writes nothing
        (:func:`rank_record`)."""
        if not writes_results(trained.status):
            return rank_record(record, trained.status, trained.message, started_at)
        record = write()
        after_outcome(record)
        return record


ALONE = DataParallel()
