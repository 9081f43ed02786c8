"""One batch shape per cell: both loaders train the same full batches an epoch (the short last
training batch dropped, in one process and split over several), validation sees every image, a
split smaller than one batch is refused, and a step of another size counts in the epoch's wall
time but never among the steady step samples."""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn

from nettebench.data.cached import STREAMED, device_loaders
from nettebench.data.shards import Shard, shard_loaders
from nettebench.datasets.info import load_data_root
from nettebench.datasets.synthetic import generate
from nettebench.training.fit import build_loaders
from nettebench.training.loop import LOADER_STARTUP_STEPS, train_epoch
from nettebench.training.runner import seed_epoch
from nettebench.training.step import TrainingStep
from nettebench.vocabulary import precision
from nettebench.vocabulary.cell import CellSpec
from nettebench.vocabulary.dataset_errors import DatasetError
from tests.memory_store import OUT, MemoryStore

TRAIN, VAL, BATCH = 480, 100, 64  # the case: 7 full batches of 64 and 32 images left
FULL_STEPS = 480 // 64  # 7
TRAINED = FULL_STEPS * 64  # 448 images an epoch
SIDE = 16  # crop side: small, so an epoch of the pil loader takes a moment on a CPU
CLASSES = 10  # generate()'s default


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("shapes")
    generate(
        root, name="shapes", size=20, train_images=TRAIN, val_images=VAL, seed=0, jobs=1,
        progress=False,
    )  # fmt: skip
    return root


def _loaders(loader: str, dataset, store_dir, batch: int = BATCH):
    """The trainer's own loaders for ``loader`` over the generated dataset, on the CPU."""
    cell = CellSpec(
        dataset="shapes", model="resnet18", batch_size=batch, image_size=SIDE, workers=0,
        loader=loader,
    )  # fmt: skip
    data = dataset / "dataset.json"
    return build_loaders(cell, load_data_root(data), data, batch, torch.device("cpu"), store_dir)


def _runner(classes: int = CLASSES) -> TrainingStep:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, classes)
    )
    return TrainingStep(
        model, precision.get("fp32"), torch.device("cpu"), lr=0.1, momentum=0.9, weight_decay=0
    )


@pytest.mark.parametrize("loader", ["pil", "cached"])
def test_both_loaders_train_the_same_full_batches_and_validate_every_image(
    loader, dataset, tmp_path
):
    loaders = _loaders(loader, dataset, tmp_path / "store")
    seed_epoch(0, 0, loaders.generator)
    sizes = [len(targets) for _, targets in loaders.train]
    assert sizes == [64] * 7 and sum(sizes) == TRAINED  # the 32 left over are not trained
    assert len(loaders.train) == FULL_STEPS  # the trainer's steps_per_epoch
    assert sum(len(targets) for _, targets in loaders.val) == VAL  # validation: every image

    found = train_epoch(
        _runner(), loaders.train, steps_per_epoch=len(loaders.train), max_steps=None,
        warmup_steps=0, batch_size=BATCH,
    )  # fmt: skip
    assert found.steps_run == 7 and not found.extrapolated
    assert found.step_images == [64] * (7 - LOADER_STARTUP_STEPS)  # one shape, every step


@pytest.mark.parametrize("placement", ["resident", STREAMED])
def test_the_gpu_paths_twin_trains_the_same_full_batches(placement):
    """The cached loader's GPU path (run on the CPU): 7 full batches of the 480 images."""
    store = MemoryStore(train=TRAIN, val=VAL)
    loaders = device_loaders(
        store, image_size=OUT, batch_size=BATCH, device=torch.device("cpu"),
        channels_last=False, placement=placement,
    )  # fmt: skip
    loaders.generator.manual_seed(0)
    assert [len(targets) for _, targets in loaders.train] == [64] * 7
    assert len(loaders.train) == 7
    assert sum(len(targets) for _, targets in loaders.val) == VAL


def test_two_processes_of_the_reference_loader_deal_out_the_same_full_batches(dataset, tmp_path):
    """Global batch 64 over two processes (32 each): both run the 7 steps of one process, on
    448 distinct images between them, none padded in (the pil loader used to pad to 480)."""
    shares = [
        shard_loaders(_loaders("pil", dataset, tmp_path / "store"), Shard(rank, 2), BATCH // 2)
        for rank in range(2)
    ]
    indices = []
    for share in shares:
        seed_epoch(0, 0, share.generator)
        order = list(share.train.sampler)
        assert len(order) == 7 * 32 and len(share.train) == 7
        indices += order
    assert len(set(indices)) == len(indices) == TRAINED
    assert sum(len(targets) for share in shares for _, targets in share.val) == VAL


@pytest.mark.parametrize("loader", ["pil", "cached"])
def test_a_split_smaller_than_one_batch_is_refused_naming_both_counts(loader, dataset, tmp_path):
    with pytest.raises(DatasetError, match=r"has 480 images, fewer than one batch of 512"):
        _loaders(loader, dataset, tmp_path / "store", batch=512)


def test_an_epoch_of_no_step_is_an_error_not_a_silent_epoch():
    with pytest.raises(ValueError, match="no full batch"):
        train_epoch(_runner(), [], steps_per_epoch=0, max_steps=None, warmup_steps=0)


class _OddSizes:
    """Batches of the given sizes; each batch of another size than ``full`` costs ``odd_s``
    more (as cuDNN autotuning a new shape would), the others ``each``."""

    def __init__(self, sizes, full=8, odd_s=0.3, each=0.005):
        generator = torch.Generator().manual_seed(2)
        self.batches = [
            (torch.randn(n, 3, 12, 12, generator=generator), torch.randint(CLASSES, (n,)))
            for n in sizes
        ]
        self.full, self.odd_s, self.each = full, odd_s, each

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        for images, targets in self.batches:
            time.sleep(self.each if len(targets) == self.full else self.odd_s)
            yield images, targets


@pytest.mark.parametrize("batch_size", [8, None])  # None: the epoch's largest batch
def test_a_step_of_another_size_counts_in_the_wall_time_not_in_the_step_samples(batch_size):
    sizes = [8, 8, 3, 8, 8, 5, 8]  # short batches in the middle and second to last
    loader = _OddSizes(sizes)
    found = train_epoch(
        _runner(), loader, steps_per_epoch=len(sizes), max_steps=None, warmup_steps=0,
        batch_size=batch_size,
    )  # fmt: skip
    assert found.steps_run == 7
    # steady: the full steps after the loader's start-up (step 0): steps 1, 3, 4 and 6
    assert found.step_images == [8, 8, 8, 8] and len(found.step_s) == 4
    assert found.images == 32
    assert found.img_s == pytest.approx(32 / sum(found.step_s))
    # the two odd steps (0.3 s each, in the loader's next()) are in the epoch's seconds
    assert found.seconds >= 2 * 0.3 + sum(found.step_s)


def test_an_epoch_whose_steady_steps_are_all_short_keeps_its_last_full_step():
    """Two steps, the second short: the start-up step is the only full one, and the only
    sample (as an epoch of one step keeps its one step); the short one is not a sample."""
    found = train_epoch(
        _runner(), _OddSizes([8, 3], odd_s=0.0), steps_per_epoch=2, max_steps=None,
        warmup_steps=0, batch_size=8,
    )  # fmt: skip
    assert found.step_images == [8] and len(found.step_s) == 1
