"""data/shards.py's small rules, one at a time (survivors of the mutation run,
notes/mutants-shards.md): the rank seed's range, the cut to whole global batches and its
length, the worker init, and which loaders re-seed the process RNG."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader

from nettebench.data.shards import (
    Shard,
    ShardSampler,
    _rank_seeded_worker,
    rank_seed,
    shard_data_loader,
)


def test_rank_seed_keeps_rank_zero_and_stays_below_two_to_the_63():
    assert rank_seed(12345, 0) == 12345
    assert len({rank_seed(12345, r) for r in range(4)}) == 4
    assert rank_seed(12345, 1) == 12345 + 1_000_003
    # torch's initial seeds reach 2**64 - 1: the rank's seed is reduced below 2**63
    top = rank_seed(2**64 - 1, 3)
    assert top == (2**64 - 1 + 3 * 1_000_003) - 2 * 2**63 == 3 * 1_000_003 - 1
    torch.Generator().manual_seed(top)


def test_whole_cuts_the_permutation_to_global_batches_and_len_says_so():
    """10 items, 2 ranks, global batch 4: 8 items dealt out, 4 per rank, no index twice."""
    taken = []
    for rank in range(2):
        generator = torch.Generator().manual_seed(3)
        sampler = ShardSampler(10, Shard(rank, 2), shuffle=True, generator=generator, whole=4)
        indices = list(sampler)
        assert len(indices) == 4 == len(sampler)
        taken += indices
    assert len(taken) == len(set(taken)) == 8


def test_rank_seeded_worker_seeds_by_rank_then_calls_the_loaders_init():
    calls = []
    torch.manual_seed(500)
    _rank_seeded_worker(2, calls.append, 7)
    assert torch.initial_seed() == 500 + 2 * 1_000_003
    assert calls == [7]
    torch.manual_seed(500)
    _rank_seeded_worker(0, None, 1)  # no init of its own: nothing else to call
    assert torch.initial_seed() == 500


def test_only_a_worker_less_training_loader_reseeds_the_process():
    data = list(range(8))
    train = DataLoader(data, batch_size=2, shuffle=True, generator=torch.Generator())
    val = DataLoader(data, batch_size=2)
    workers = DataLoader(data, batch_size=2, shuffle=True, num_workers=1)
    assert shard_data_loader(train, Shard(1, 2), 1).sampler.reseed is True
    assert shard_data_loader(val, Shard(1, 2), 1).sampler.reseed is False
    assert shard_data_loader(workers, Shard(1, 2), 1).sampler.reseed is False
