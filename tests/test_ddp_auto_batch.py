"""``batch_size: auto`` in a data-parallel cell: every process agrees on each trial's outcome
(issue 56, item 5).

Two gloo processes on the CPU choose the batch of a real resnet18 cell (40 px: a share of one
image still has 2x2 values a channel for the last BatchNorm); an out-of-memory error is
injected into the backward pass of each (an autograd hook on the first layer's weight, whose
gradient comes last, so a DDP model would have all-reduced the other buckets by then), above a
share of its own: rank 0 fits 32 images, rank 1 only 8. Had a trial run through DDP, the
process that ran out of memory would leave the other waiting in a gradient all-reduce it never
joins; here a hang ends at the group's timeout and the spawn's deadline, as a failure.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
from pathlib import Path

import pytest
import torch

from nettebench.training.auto_batch import AUTO_BATCH_START, ddp_bucket_bytes

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="gloo processes")

WORLD = 2
FITS = {0: 32, 1: 8}  # the largest share of the batch each process holds
NONE_FITS = {0: 2, 1: 0}  # then rank 1 holds not even one image
GROUP_TIMEOUT_S = 20  # a collective left waiting fails after this
DEADLINE_S = 240  # the spawn's, imports and trials on a loaded 2-core machine included


def _choose(rank: int, fits: dict[int, int]) -> dict:
    """``choose_batch_size`` of an auto resnet18 cell here, rank ``rank`` holding ``fits[rank]``
    images at most: the batch (or the name of the error it raised, and its first line) and the
    shares tried."""
    from nettebench.training import auto_batch
    from nettebench.training import runner as runners
    from nettebench.vocabulary.cell import CellSpec

    real_make_runner = runners.make_runner
    tried: list[int] = []

    def make_runner(cell, device, num_classes, batch_size, *args, **kwargs):
        runner = real_make_runner(cell, device, num_classes, batch_size, *args, **kwargs)
        share = batch_size // WORLD
        tried.append(share)
        if share > fits[rank]:

            def out_of_memory(grad):
                raise torch.OutOfMemoryError(f"injected: rank {rank} holds {fits[rank]} images")

            next(runner.model.parameters()).register_hook(out_of_memory)
        return runner

    runners.make_runner = make_runner  # this spawned process's own, gone with it
    try:
        cell = CellSpec(
            dataset="dp", model="resnet18", batch_size="auto", image_size=40, processes=WORLD
        )
        return {"batch": auto_batch.choose_batch_size(cell, torch.device("cpu"), 4), "tried": tried}
    except Exception as error:  # noqa: BLE001 - the test compares what each process raised
        first = (str(error).strip().splitlines() or [""])[0]
        return {"batch": type(error).__name__, "error": first, "tried": tried}
    finally:
        runners.make_runner = real_make_runner


def _worker(rank: int, folder: str) -> None:
    import torch.distributed as dist

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"file://{Path(folder) / 'rendezvous'}",
        rank=rank,
        world_size=WORLD,
        timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S),
    )
    found = {}
    for name, fits in (("fits", FITS), ("none_fits", NONE_FITS)):
        found[name] = _choose(rank, fits)
    dist.destroy_process_group()
    (Path(folder) / f"rank{rank}.json").write_text(json.dumps(found))


@pytest.fixture(scope="module")
def chosen(tmp_path_factory):
    """What each of the two processes chose, by rank; a failure if they did not end in time."""
    import torch.multiprocessing as mp

    folder = tmp_path_factory.mktemp("auto-batch")
    context = mp.start_processes(_worker, args=(str(folder),), nprocs=WORLD, join=False)
    deadline = time.monotonic() + DEADLINE_S
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail(f"the processes did not agree within {DEADLINE_S} s: a hang")
    return {rank: json.loads((folder / f"rank{rank}.json").read_text()) for rank in range(WORLD)}


def shares() -> list[int]:
    """The shares the search tries, from the start's, halving to one image."""
    share, found = AUTO_BATCH_START // WORLD, []
    while share >= 1:
        found.append(share)
        share //= 2
    return found


def test_every_process_takes_the_batch_the_tightest_one_holds(chosen):
    # worked out from the limits alone: the largest share tried that fits on both processes
    share = max(s for s in shares() if s <= min(FITS.values()))
    assert share == 8
    for rank in range(WORLD):
        assert chosen[rank]["fits"]["batch"] == WORLD * share == 16
        # both shrank together, trial by trial, though rank 0 alone would have stopped at 32
        assert chosen[rank]["fits"]["tried"] == [128, 64, 32, 16, 8]


def test_a_process_that_holds_no_image_makes_every_process_run_out_of_memory(chosen):
    for rank in range(WORLD):
        assert chosen[rank]["none_fits"]["batch"] == "OutOfMemoryError"
        assert chosen[rank]["none_fits"]["tried"] == shares()


def test_the_trial_holds_ddps_gradient_buckets_one_copy_of_the_trainable_parameters():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 5))  # 8 + 15 values
    model[1].bias.requires_grad_(False)  # 5 of them frozen: no gradient, no bucket
    assert ddp_bucket_bytes(model) == (3 * 2 + 2 + 2 * 5) * 4
    assert ddp_bucket_bytes(model.half()) == (3 * 2 + 2 + 2 * 5) * 2
