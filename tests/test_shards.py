"""A data-parallel process's share of the data: the one-process run's global batches for pil
and cached (both drop the short last batch), DistributedSampler's semantics for a training
loader that keeps it, every validation image once."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler

from nettebench.data.cached import _cpu_loaders, device_loaders
from nettebench.data.pil import Loaders
from nettebench.data.shards import Shard, ShardSampler, shard_loaders
from tests.memory_store import OUT, MemoryStore


@pytest.mark.parametrize(("n", "count"), [(10, 2), (11, 2), (10, 3), (2, 4)])
def test_a_loader_keeping_its_short_batch_shares_like_distributed_sampler(n, count):
    """Same padding and dealing as torch's DistributedSampler (shuffle aside, whose order
    comes from the trainer's generator here)."""
    for rank in range(count):
        ours = ShardSampler(n, Shard(rank, count), shuffle=False, pad=True)
        theirs = DistributedSampler(range(n), num_replicas=count, rank=rank, shuffle=False)
        assert list(ours) == list(theirs)
        assert len(ours) == len(theirs)


def _batches(loader):
    return [targets.tolist() for _, targets in loader]


def _seeded(loaders, seed=5):
    loaders.generator.manual_seed(seed)
    return loaders


@pytest.mark.parametrize("path", ["cpu workers", "device twin"])
def test_cached_local_batches_make_the_one_process_runs_global_batches(path):
    """Two processes, each half the batch: step k's two local batches are exactly the global
    batch k of one process with the same seed (labels are the images' indices here)."""
    store = MemoryStore(train=24, val=10)
    store.train_labels = np.arange(24, dtype=np.int64)
    store.val_labels = np.arange(10, dtype=np.int64)

    def build():
        if path == "cpu workers":  # one worker process: its seeds are the sampler's to keep
            return _cpu_loaders(store, image_size=OUT, batch_size=8, workers=1, channels_last=False)
        return device_loaders(
            store,
            image_size=OUT,
            batch_size=8,
            device=torch.device("cpu"),
            channels_last=False,
            placement="resident",
        )

    whole = _batches(_seeded(build()).train)
    shares = [shard_loaders(build(), Shard(rank, 2), 4) for rank in range(2)]
    local = [_batches(_seeded(share).train) for share in shares]
    assert len(whole) == len(local[0]) == len(local[1]) == 3 == len(shares[0].train)
    for step, batch in enumerate(whole):
        assert sorted(local[0][step] + local[1][step]) == sorted(batch)
        assert len(local[0][step]) == len(local[1][step]) == 4
    # validation: every image exactly once over the two processes, none padded in
    seen = sorted(i for share in shares for batch in _batches(share.val) for i in batch)
    assert seen == list(range(10))


def test_pil_shares_cover_the_epoch_and_differ_in_augmentation():
    """The reference loader's share: the same permutation dealt out, cut to whole global
    batches as one process drops its short last batch; with no workers each process's
    augmentation RNG is offset by its rank."""
    dataset = torch.utils.data.TensorDataset(torch.zeros(11, 1), torch.arange(11))
    generator = torch.Generator()
    loader = DataLoader(dataset, batch_size=4, shuffle=True, drop_last=True, generator=generator)
    val = DataLoader(dataset, batch_size=4)
    whole = Loaders(loader, val, 1, ["a"], generator)
    shares = [shard_loaders(whole, Shard(r, 2), 2) for r in range(2)]
    epoch = []
    draws = []
    for share in shares:
        generator.manual_seed(3)
        torch.manual_seed(11)
        epoch.append(_batches(share.train))
        draws.append(torch.rand(1).item())  # what a transform would draw next
    assert [len(batches) for batches in epoch] == [2, 2]  # 11 // 4 = 2 global batches of 4
    flat = [i for batches in epoch for batch in batches for i in batch]
    assert len(set(flat)) == len(flat) == 8 and set(flat) <= set(range(11))  # none padded
    assert draws[0] != draws[1]
    assert [len(share.val) for share in shares] == [3, 3]  # 6 and 5 images, 2 per batch
    assert sorted(i for share in shares for b in _batches(share.val) for i in b) == list(range(11))


def test_one_process_keeps_the_loaders():
    loaders = object()
    assert shard_loaders(loaders, Shard(), 8) is loaders


def _store_loaders(path: str, store, batch_size: int, workers: int = 0):
    if path == "cpu workers":
        return _cpu_loaders(
            store, image_size=OUT, batch_size=batch_size, workers=workers, channels_last=False
        )
    return device_loaders(
        store, image_size=OUT, batch_size=batch_size, device=torch.device("cpu"),
        channels_last=False, placement="resident",
    )  # fmt: skip


def _pil_loaders(n: int, batch_size: int, workers: int = 0, dataset=None):
    dataset = dataset or torch.utils.data.TensorDataset(torch.zeros(n, 1), torch.arange(n))
    generator = torch.Generator()
    train = DataLoader(
        dataset, batch_size=batch_size, shuffle=True, drop_last=True, generator=generator,
        num_workers=workers,
    )  # fmt: skip
    return Loaders(train, DataLoader(dataset, batch_size=batch_size), 1, ["a"], generator)


@pytest.mark.parametrize(
    ("path", "n"), [("pil", 33), ("pil", 31), ("cpu workers", 31), ("device twin", 31)]
)
def test_a_split_not_a_multiple_of_the_global_batch_gives_every_rank_the_same_steps(path, n):
    """Global batch 8 over two processes of a split of 31 or 33 images: one rank's share is an
    image longer than the other's, yet both run the same number of steps of 4 (a rank with a
    step more would wait in an all-reduce the other never joins), and len() says so."""
    if path == "pil":
        build = functools.partial(_pil_loaders, n, 8)
    else:
        store = MemoryStore(train=n, val=10)
        build = functools.partial(_store_loaders, path, store, 8)
    steps, sizes = [], []
    for rank in range(2):
        share = _seeded(shard_loaders(build(), Shard(rank, 2), 4))
        batches = _batches(share.train)
        steps.append(len(batches))
        sizes.append([len(batch) for batch in batches])
        assert len(share.train) == len(batches)
    assert steps[0] == steps[1], (path, n, steps)
    assert sizes[0] == sizes[1]  # the same local batch at every step
    assert steps[0] == n // 8  # both drop the short last global batch


class _Draws(torch.utils.data.Dataset):
    """Each item: what the loading process's torch RNG draws next and its seed (a transform's
    crop would come from the same RNG)."""

    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int):
        return torch.rand(1), torch.tensor(torch.initial_seed() % 2**62, dtype=torch.int64)


def test_each_rank_draws_its_own_augmentations_and_worker_seeds():
    """The same epoch seed on every process (the trainer re-seeds alike), yet the loader
    workers of rank 1 start from other seeds than rank 0's, so their crops differ; rank 0's
    are the one-process run's (the seed unchanged at rank 0)."""
    runs = {}
    for name, shard in {"alone": None, "rank 0": Shard(0, 2), "rank 1": Shard(1, 2)}.items():
        loaders = _pil_loaders(16, 4, workers=1, dataset=_Draws())
        if shard is not None:
            loaders = shard_loaders(loaders, shard, 2)
        loaders.generator.manual_seed(7)
        runs[name] = [(draws.flatten().tolist(), seeds.tolist()) for draws, seeds in loaders.train]
    rank0 = {seed for _, seeds in runs["rank 0"] for seed in seeds}
    rank1 = {seed for _, seeds in runs["rank 1"] for seed in seeds}
    alone = {seed for _, seeds in runs["alone"] for seed in seeds}
    assert rank0 == alone and not rank0 & rank1
    draws = [[d for batch, _ in runs[name] for d in batch] for name in ("rank 0", "rank 1")]
    assert not set(draws[0]) & set(draws[1])


def test_each_rank_of_a_device_split_seeds_its_crops_apart():
    """A ``cached`` split on the device: the augmentation generator of rank 1 is seeded away
    from rank 0's, which is the one-process run's."""
    store = MemoryStore(train=16, val=4)
    seeds = {}
    for name, shard in {"alone": Shard(), "rank 0": Shard(0, 2), "rank 1": Shard(1, 2)}.items():
        loaders = _store_loaders("device twin", store, 4)
        loaders = shard_loaders(loaders, shard, 4 // shard.count)
        loaders.generator.manual_seed(7)
        next(iter(loaders.train))
        seeds[name] = loaders.train.augment_generator.initial_seed()
    assert seeds["rank 0"] == seeds["alone"] != seeds["rank 1"]
