"""A data-parallel process's share of the data: DistributedSampler's semantics for pil, the
one-process run's global batches for cached, every validation image once."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler

from nettebench.data.cached import _cpu_loaders, device_loaders
from nettebench.data.pil import Loaders
from nettebench.data.shards import Shard, ShardSampler, shard_loaders
from tests.memory_store import OUT, MemoryStore


@pytest.mark.parametrize(("n", "count"), [(10, 2), (11, 2), (10, 3), (2, 4)])
def test_pil_training_share_is_distributed_samplers(n, count):
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
        if path == "cpu workers":
            return _cpu_loaders(store, image_size=OUT, batch_size=8, workers=0, channels_last=False)
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
    """The reference loader's share: the same permutation dealt out, padded to equal steps;
    with no workers each process's augmentation RNG is offset by its rank."""
    dataset = torch.utils.data.TensorDataset(torch.zeros(11, 1), torch.arange(11))
    generator = torch.Generator()
    loader = DataLoader(dataset, batch_size=4, shuffle=True, generator=generator)
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
    assert [len(batches) for batches in epoch] == [3, 3]  # ceil(11 / 2) = 6 each, by 2
    flat = [i for batches in epoch for batch in batches for i in batch]
    assert sorted(set(flat)) == list(range(11)) and len(flat) == 12  # one padded
    assert draws[0] != draws[1]
    assert [len(share.val) for share in shares] == [3, 3]  # 6 and 5 images, 2 per batch
    assert sorted(i for share in shares for b in _batches(share.val) for i in b) == list(range(11))


def test_one_process_keeps_the_loaders():
    loaders = object()
    assert shard_loaders(loaders, Shard(), 8) is loaders
