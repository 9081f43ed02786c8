"""One process's share of the data when a cell runs as several data-parallel processes.

The study's ``batch_size`` is the global batch: ``N`` processes each train on ``batch_size / N``
images per step, as pytorch/examples' ``main.py`` splits it. Every process draws the same
epoch permutation (the loaders' generator is re-seeded from (seed, epoch) alike on every rank)
and takes every N-th index, from its rank on. So the N local batches of a step are exactly the
global batch a one-process run of the same cell draws from that permutation:

- training (``pil`` and ``cached`` alike): the same order as its one-process run, which drops
  the odd last batch: the permutation is cut to whole global batches before it is dealt out,
  so every process runs the same number of full steps (a process with one step fewer would
  leave the others waiting in the gradient all-reduce).
- a training loader that keeps its short last batch (none of the study's):
  ``DistributedSampler``'s semantics, the permutation padded with its head to a multiple of N.
- validation: every image exactly once (no padding: a padded image would be counted twice),
  ``rank, rank + N, ...``; the trainer sums the counts over the processes.

Augmentations must differ between processes (the same crop for image i of every process would
make the global batch less random than a one-process run's): each rank's loader workers, and
the device generator of a ``cached`` split, are seeded with a rank-dependent offset.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, RandomSampler, Sampler

# Added to a seed once per rank: far apart, so ranks' streams never coincide for nearby seeds.
RANK_SEED_STRIDE = 1_000_003


@dataclasses.dataclass(frozen=True)
class Shard:
    """Which share of the data a process takes: ``rank`` of ``count`` (1: all of it)."""

    rank: int = 0
    count: int = 1

    def take(self, order: torch.Tensor) -> torch.Tensor:
        """This rank's indices of an order: every ``count``-th, from ``rank`` on."""
        return order[self.rank :: self.count]

    def size(self, n: int) -> int:
        """How many of ``n`` items :meth:`take` keeps."""
        return len(range(self.rank, n, self.count))

    def seed(self, seed: int) -> int:
        """A rank's own seed derived from a seed all ranks share (the same seed at rank 0)."""
        return rank_seed(seed, self.rank)


def rank_seed(seed: int, rank: int) -> int:
    """``seed`` offset by ``rank`` (unchanged at rank 0)."""
    return (seed + RANK_SEED_STRIDE * rank) % 2**63


class ShardSampler(Sampler[int]):
    """A rank's indices of a dataset of ``n`` items, in the order of the module docstring.

    ``shuffle``: a permutation from ``generator`` (re-seeded by the trainer every epoch), as
    ``RandomSampler`` draws it; else ``0..n-1``. ``whole``: cut the permutation to a multiple of
    this many items first (the global batch of a loader that drops the odd last batch);
    ``pad``: pad it with its head to a multiple of ``count`` (``DistributedSampler``).
    ``reseed``: re-seed this process's torch RNG with the rank's offset at every epoch, for a
    loader without workers, whose augmentations draw from the process's own RNG.
    """

    def __init__(
        self,
        n: int,
        shard: Shard,
        *,
        shuffle: bool,
        generator: torch.Generator | None = None,
        whole: int | None = None,
        pad: bool = False,
        reseed: bool = False,
    ) -> None:
        self.n = n
        self.shard = shard
        self.shuffle = shuffle
        self.generator = generator
        self.whole = whole
        self.pad = pad
        self.reseed = reseed

    def order(self) -> torch.Tensor:
        """The epoch's order of all ``n`` items, cut or padded, before it is dealt out."""
        order = torch.randperm(self.n, generator=self.generator) if self.shuffle else None
        order = torch.arange(self.n) if order is None else order
        if self.whole:
            order = order[: len(order) // self.whole * self.whole]
        if self.pad and len(order) % self.shard.count:
            missing = self.shard.count - len(order) % self.shard.count
            order = torch.cat([order, order.repeat(math.ceil(missing / len(order)))[:missing]])
        return order

    def __len__(self) -> int:
        if self.whole:
            return self.n // self.whole * self.whole // self.shard.count
        if self.pad:
            return math.ceil(self.n / self.shard.count)
        return self.shard.size(self.n)

    def __iter__(self) -> Iterator[int]:
        order = self.shard.take(self.order())
        if self.reseed:
            torch.manual_seed(self.shard.seed(torch.initial_seed()))
        return iter(order.tolist())


def _rank_seeded_worker(rank: int, inner, worker_id: int) -> None:
    """A loader worker's init: torch's per-worker seed offset by the rank, then the loader's own
    init (which seeds python's and numpy's RNGs from torch's)."""
    torch.manual_seed(rank_seed(torch.initial_seed(), rank))
    if inner is not None:
        inner(worker_id)


def shard_data_loader(loader: DataLoader, shard: Shard, batch_size: int) -> DataLoader:
    """``loader`` again over the same dataset, taking this rank's share ``batch_size`` at a time.

    Training (a loader built with ``shuffle=True``) keeps its generator; one that drops its
    odd last batch keeps whole global batches (``batch_size * count``), one that does not is
    padded like ``DistributedSampler``. Validation (in order) takes every image once.
    """
    train = isinstance(loader.sampler, RandomSampler)
    sampler = ShardSampler(
        len(loader.dataset),
        shard,
        shuffle=train,
        generator=loader.generator if train else None,
        whole=batch_size * shard.count if train and loader.drop_last else None,
        pad=train and not loader.drop_last,
        reseed=train and loader.num_workers == 0,
    )
    return DataLoader(
        loader.dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=loader.num_workers,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory,
        drop_last=loader.drop_last,
        worker_init_fn=functools.partial(_rank_seeded_worker, shard.rank, loader.worker_init_fn),
        generator=loader.generator,
    )


def shard_split(split, shard: Shard, batch_size: int):
    """One split of a cell's ``Loaders`` (a DataLoader, or a ``cached`` split) as this rank's
    share, ``batch_size`` (the per-process batch) at a time."""
    if isinstance(split, DataLoader):
        return shard_data_loader(split, shard, batch_size)
    if hasattr(split, "loader"):  # cached on a CPU: normalised batches from a DataLoader
        return dataclasses.replace(split, loader=shard_data_loader(split.loader, shard, batch_size))
    # cached on a GPU (CachedSplit): it deals its own order out (data.cached)
    return dataclasses.replace(split, batch_size=batch_size, shard=shard)


def shard_loaders(loaders, shard: Shard, batch_size: int):
    """A cell's ``Loaders`` (:class:`nettebench.data.pil.Loaders`) as rank ``shard.rank``'s
    share; unchanged for a single process."""
    if shard.count == 1:
        return loaders
    return dataclasses.replace(
        loaders,
        train=shard_split(loaders.train, shard, batch_size),
        val=shard_split(loaders.val, shard, batch_size),
    )
