"""Data parallelism as the trainer sees it: one object, a no-op at one process.

:class:`DataParallel` is this process's part in a cell (its rank of the cell's processes) and
the few points where data parallelism changes a run; the trainer (:mod:`.cli`, :mod:`.fit`)
holds one (:class:`~.context.RunContext`'s ``parallel``) and calls nothing else of this module.

A cell with ``processes: N`` (N > 1) is started by its job through torch's own launcher
(:mod:`.launch`: torchrun's elastic agent), which runs the same command N times with ``RANK``,
``LOCAL_RANK`` and ``WORLD_SIZE`` set. Each of those workers trains the cell as a one-process
run would, through these points:

- :meth:`~DataParallel.start` starts the process group: NCCL on GPUs (one per process,
  ``cuda:LOCAL_RANK``, :meth:`~DataParallel.device`), gloo on the CPU; small control
  collectives (the stop flag, the epoch sums) always go over gloo. Every collective has a
  timeout (:data:`TIMEOUT_ENV`), so a process that hangs ends the cell with an error instead of
  a hang; one that dies is noticed by the agent at once (:mod:`.launch`).
- :meth:`~DataParallel.wrap` puts the model in ``DistributedDataParallel`` (gradients
  all-reduced in backward) with the plain state_dict keys, so a checkpoint does not depend on N.
- ``batch_size`` is the global batch: :meth:`~DataParallel.local_batch` is each process's
  share, as pytorch/examples' ``main.py`` splits it; the lr rule sees the global batch.
  :meth:`~DataParallel.shard` deals the data out (:mod:`nettebench.data.shards`).
- :meth:`~DataParallel.agreed` makes the stop check before every training batch collective, so
  a SIGINT or SIGTERM to any process stops all of them before the same step: none is left
  waiting in an all-reduce that the others never join.
- :meth:`~DataParallel.combine_train` and :meth:`~DataParallel.validate` make the epoch's
  numbers the whole cell's: img/s summed, losses and accuracies over every image, times of the
  slowest process.
- Rank 0 writes the results (:attr:`~DataParallel.writer`); a process that ran out of memory
  writes its outcome itself and exits with :data:`OOM_EXIT`, so the agent stops the others
  (:meth:`~DataParallel.settle`).
"""

from __future__ import annotations

import ctypes
import dataclasses
import datetime
import os
import signal
import time
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from nettebench.data import shards
from nettebench.training.interrupts import Interrupted
from nettebench.vocabulary.record_keys import STATUS_OOM

TIMEOUT_ENV = "NETTEBENCH_DIST_TIMEOUT_S"
# A collective waits this long for the other processes (a store build by rank 0 included).
DEFAULT_TIMEOUT_S = 600
# A process's exit status after it recorded an out-of-memory outcome (EX_TEMPFAIL): not 0, so
# torchrun's agent stops the processes still waiting for it in an all-reduce.
OOM_EXIT = 75

PR_SET_PDEATHSIG = 1  # prctl(2)

_control_group: list[Any] = [None]  # gloo group for control collectives under NCCL


class DistributedError(RuntimeError):
    """A data-parallel cell started the wrong way (outside torchrun, a different world size)."""


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1")) if in_worker() else 1


def rank() -> int:
    return int(os.environ.get("RANK", "0")) if in_worker() else 0


def in_worker() -> bool:
    """Whether this process is one torchrun started (it sets these for every worker)."""
    return "LOCAL_RANK" in os.environ and "WORLD_SIZE" in os.environ


def active() -> bool:
    """Whether this process is one of several of a cell, its process group started: what
    :attr:`DataParallel.active` says of this process (for the collectives below)."""
    return DataParallel.from_env().active


def timeout_s() -> float:
    return float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))


def _stop_with_the_job() -> None:
    """Ask Linux for a SIGTERM when the job's process (torchrun's agent) dies: a job killed
    outright (SIGKILL, an OOM killer) must not leave its workers training on, orphaned; the
    SIGTERM stops them as any stop does, the last checkpoint kept."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the agent's own shutdown is all there is
        return
    if os.getppid() == 1:  # the job died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def leave() -> None:
    """End the process group at the end of a run (no warning about one left open)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    _control_group[0] = None


def _reduce(values: list[float], op=None) -> list[float]:
    """``values`` summed (or ``op``) over the processes, over the gloo control group."""
    if not active():
        return values
    tensor = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(tensor, op=op or dist.ReduceOp.SUM, group=_control_group[0])
    return tensor.tolist()


def barrier() -> None:
    if active():
        dist.barrier(group=_control_group[0])


class _PlainKeys(DistributedDataParallel):
    """DDP whose state_dict is the model's own (no ``module.`` prefix): a checkpoint of a cell
    reads the same at any number of processes."""

    def state_dict(self, *args, **kwargs):
        return self.module.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        return self.module.load_state_dict(state_dict, strict=strict, assign=assign)


class _LocalModel:
    """A runner whose ``model`` is the module DDP wraps: validation runs no collective, so the
    processes may evaluate shards of different sizes."""

    def __init__(self, runner) -> None:
        self._runner = runner
        self.model = runner.model.module

    def __getattr__(self, name: str):
        return getattr(self._runner, name)


def local_model(runner):
    """``runner`` for validation (see :class:`_LocalModel`); itself in a single process."""
    return _LocalModel(runner) if isinstance(runner.model, DistributedDataParallel) else runner


class _Counted:
    """A validation split that counts the images it yields (for :func:`combine_val`)."""

    def __init__(self, loader) -> None:
        self.loader = loader
        self.samples = 0

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str):
        if name == "loader":
            raise AttributeError(name)
        return getattr(self.loader, name)

    def __iter__(self):
        self.samples = 0
        for images, targets in self.loader:
            self.samples += targets.shape[0]
            yield images, targets


class _AgreedStop:
    """A :class:`~.interrupts.StopOnSignal` whose :meth:`check` asks every process: a signal to
    any of them stops all of them before the same training step (one all-reduce of one number
    per step over gloo, microseconds)."""

    def __init__(self, stop) -> None:
        self._stop = stop
        self._agreed: int | None = None

    @property
    def requested(self) -> int | None:
        return self._stop.requested or self._agreed

    def __getattr__(self, name: str):
        return getattr(self._stop, name)

    def check(self) -> None:
        signum = int(_reduce([float(self._stop.requested or 0)], dist.ReduceOp.MAX)[0])
        if signum:
            self._agreed = signum
            raise Interrupted(signum)


def _combine_steps(
    step_s: list[float], step_images: list[int], share: float
) -> tuple[list[float], list[float]]:
    """The steady steps of the whole cell: step k's images summed over the processes (the
    global batch, not this process's share), its time the slowest process's. Every process runs
    the same steps (:mod:`nettebench.data.shards`); should their counts differ, each step's
    images are this process's scaled by ``share`` (the cell's images over this process's)."""
    most, fewest = _reduce([len(step_s), -len(step_s)], dist.ReduceOp.MAX)
    if most != -fewest:
        return list(step_s), [i * share for i in step_images]
    if not step_s:
        return [], []
    images = _reduce([float(i) for i in step_images])
    seconds = _reduce(list(step_s), dist.ReduceOp.MAX)
    return seconds, [int(i) for i in images]


@dataclasses.dataclass(frozen=True)
class DataParallel:
    """This process's part in a cell: its ``rank`` of ``world`` processes and the few points
    where data parallelism changes a run. At one process (:data:`ALONE`) every point leaves what
    it is handed as it is. The compute ceiling, timed in the same processes after the epochs,
    uses :meth:`share_threads`, :meth:`local_batch` and :meth:`any`
    (:mod:`nettebench.benchmarks.ceiling`)."""

    rank: int = 0
    world: int = 1

    @classmethod
    def from_env(cls) -> DataParallel:
        """This process's part as torchrun set it (:data:`ALONE` outside torchrun)."""
        return cls(rank(), world_size())

    @property
    def alone(self) -> bool:
        return self.world == 1

    @property
    def active(self) -> bool:
        """One of several processes, its process group started: the collectives run."""
        return not self.alone and dist.is_available() and dist.is_initialized()

    @property
    def writer(self) -> bool:
        """Rank 0 writes the cell's files (epochs.csv, checkpoint, ceiling, results)."""
        return self.rank == 0

    @property
    def job_pid(self) -> int | None:
        """The root of the job's process tree for the timing conditions: in a worker,
        torchrun's agent (so the cell's other processes are its own, not interference); None
        (this process) otherwise."""
        return os.getppid() if in_worker() else None

    def launches(self, cell) -> bool:
        """Whether this command must start the cell's processes rather than train itself."""
        return cell.processes > 1 and not in_worker()

    def device(self, device: torch.device) -> torch.device:
        """A worker's own GPU, ``cuda:LOCAL_RANK``, for the run's ``cuda``; else ``device``."""
        if device.type != "cuda" or self.alone:
            return device
        index = int(os.environ["LOCAL_RANK"])
        if index >= torch.cuda.device_count():
            raise DistributedError(
                f"process {index} of the cell needs a GPU of its own, but torch sees "
                f"{torch.cuda.device_count()}; ask for as many GPUs as processes"
            )
        torch.cuda.set_device(index)
        return torch.empty(0, device=f"cuda:{index}").device

    def start(self, cell, device: torch.device, threads: int | None) -> None:
        """This process's share of the job's ``threads`` and its process group for ``cell`` on
        ``device`` (already :meth:`device`'s); no group for one process."""
        self.share_threads(threads)
        if cell.processes == 1 and self.alone:
            return
        if self.world != cell.processes:
            how = f"{self.world} were started" if in_worker() else "none runs under torchrun"
            raise DistributedError(
                f"the cell has processes {cell.processes} but {how}: run its job "
                "(python -m nettebench benchmarks cell-job), which starts them, or torchrun "
                f"with --nproc-per-node x --nnodes = {cell.processes}"
            )
        if dist.is_initialized():
            return
        _stop_with_the_job()
        timeout = datetime.timedelta(seconds=timeout_s())
        if device.type == "cuda":
            dist.init_process_group("nccl", timeout=timeout, device_id=device)
            _control_group[0] = dist.new_group(backend="gloo", timeout=timeout)
        else:
            dist.init_process_group("gloo", timeout=timeout)
            _control_group[0] = None

    def threads_share(self, threads: int) -> int:
        """A process's share of the job's ``--threads`` (all of them for one process)."""
        return max(1, threads // self.world)

    def share_threads(self, threads: int | None) -> None:
        """:meth:`threads_share` as torch's CPU threads (none given: torch's default)."""
        if threads:
            torch.set_num_threads(self.threads_share(threads))

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any process (a collective: every process calls it at the
        same point, so a loop that stops on it stops at the same step everywhere)."""
        return bool(_reduce([float(flag)], dist.ReduceOp.MAX)[0]) if self.active else flag

    def local_batch(self, batch_size: int) -> int:
        """A process's share of the global ``batch_size`` (all of it for one process)."""
        if batch_size % self.world:
            raise DistributedError(
                f"batch_size {batch_size} does not split over {self.world} processes: it is "
                "the global batch, use a multiple of processes"
            )
        return batch_size // self.world

    def wrap(self, runner):
        """``runner`` (a training step) with its model in DDP; unchanged in a single process.

        After the precision's casts and apex's ``amp.initialize`` (DDP must wrap the model
        those made), so the gradients DDP all-reduces are the ones the optimiser steps on.
        Models with an auxiliary head the loss ignores (inception_v3, googlenet) tell DDP that
        some parameters get no gradient.
        """
        if not self.active:
            return runner
        device = runner.device
        runner.model = _PlainKeys(
            runner.model,
            device_ids=[device.index] if device.type == "cuda" else None,
            find_unused_parameters=bool(getattr(runner.model, "aux_logits", False)),
        )
        return runner

    def shard(self, loaders, batch_size: int):
        """(this process's share of a cell's ``Loaders``, the per-process batch):
        :mod:`nettebench.data.shards`; unchanged in a single process."""
        if not self.active:
            return loaders, batch_size
        local = self.local_batch(batch_size)
        sharded = shards.shard_loaders(loaders, shards.Shard(self.rank, self.world), local)
        return dataclasses.replace(sharded, val=_Counted(sharded.val)), local

    def agreed(self, stop):
        """``stop`` for the training batches, collective among the processes (itself for one)."""
        return _AgreedStop(stop) if stop is not None and self.active else stop

    def once(self, needed: bool, build) -> None:
        """``build()`` by rank 0 alone when ``needed`` on any process, the others waiting."""
        if self.any(needed):
            if self.writer:
                build()
            barrier()

    def combine_train(self, train):
        """A training epoch's numbers over every process: img/s and images summed (the cell's
        total throughput), loss and data wait averaged, the slowest process's times; each
        steady step's images summed and its time the slowest process's, so the summary's
        per-step rates are the whole cell's too (:func:`_combine_steps`)."""
        if not self.active:
            return train
        loss, wait, images, img_s = _reduce(
            [train.loss, train.data_wait_s, train.images, train.img_s]
        )
        seconds, extrapolated = _reduce(
            [train.seconds, float(train.extrapolated)], dist.ReduceOp.MAX
        )
        step_s, step_images = _combine_steps(
            train.step_s, train.step_images, images / max(train.images, 1)
        )
        return dataclasses.replace(
            train,
            loss=loss / self.world,
            data_wait_s=wait / self.world,
            images=int(images),
            img_s=img_s,
            seconds=seconds,
            extrapolated=bool(extrapolated),
            step_s=step_s,
            step_images=step_images,
        )

    def validate(self, runner, evaluate, split):
        """``evaluate(runner)`` on this process's share of ``split`` (the model DDP wraps: no
        collective), then over every process: each image counted once (sums of counts), the
        slowest process's time. ``split`` is the validation split :meth:`shard` made."""
        if not self.active:
            return evaluate(runner)
        val = evaluate(local_model(runner))
        n = split.samples
        loss, top1, top5, total = _reduce([val.loss * n, val.top1 * n, val.top5 * n, n])
        seconds, extrapolated = _reduce([val.seconds, float(val.extrapolated)], dist.ReduceOp.MAX)
        total = max(total, 1)
        return dataclasses.replace(
            val,
            loss=loss / total,
            top1=top1 / total,
            top5=top5 / total,
            seconds=seconds,
            extrapolated=bool(extrapolated),
        )

    def writes_results(self, status: str) -> bool:
        """Whether this process writes the cell's outcome: rank 0, or one that ran out of
        memory (the others may be stuck waiting for it)."""
        return self.writer or status == STATUS_OOM

    def runs_after_epochs(self, status: str) -> bool:
        """Whether the job's after-epochs step (the ceiling, collective under DDP) runs: not in
        a data-parallel process that ran out of memory, while the others may wait in an
        all-reduce."""
        return self.alone or status != STATUS_OOM

    def settle(self, record: dict[str, Any], trained, started_at: float, write):
        """The run's record: ``write()``'s (the outcome written) where this process writes
        results (:meth:`writes_results`), then the process ends: with :data:`OOM_EXIT` after
        an out-of-memory among several (so the agent stops the others), else by leaving the
        process group. Elsewhere the record of a process that writes nothing: its status and
        wall time, for its log."""
        if not self.writes_results(trained.status):
            record["status"] = trained.status
            record["message"] = trained.message
            record["summary"]["wall_s"] = time.time() - started_at
            return record
        record = write()
        if not self.alone and record["status"] == STATUS_OOM:
            raise SystemExit(OOM_EXIT)
        leave()
        return record


ALONE = DataParallel()
