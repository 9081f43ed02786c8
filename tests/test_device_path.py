"""The ``cached`` loader's GPU path, run on the CPU (its twin): device identity, placement, host
synchronisation, memory traffic and the streamed store, each shown where a CPU can show it.

The trainer itself takes the GPU path only on CUDA; here the same classes run with an indexed
``cpu:0`` device, a forced placement and the same ring of host buffers (unpinned: pinning needs
CUDA). What only a GPU can show (sync debug mode, img/s) is in tests/device/run.py (its sync
check: tests/device/sync_check.py).
"""

from __future__ import annotations

import threading

import pytest
import torch

from nettebench.data.cached import RESIDENT, STREAMED, CachedSplit, device_loaders
from nettebench.data.streaming import HostRing
from nettebench.training.cli import resolve_device
from tests.memory_store import OUT, MemoryStore
from tests.op_log import OpLog

BATCH = 8


def _split(store: MemoryStore, *, train: bool, device="cpu", **options) -> CachedSplit:
    """A split as the GPU path builds it, over host tensors (a store resident on a CPU)."""
    images, labels = (store.train, store.train_labels) if train else (store.val, store.val_labels)
    return CachedSplit(
        images=torch.from_numpy(images), labels=torch.from_numpy(labels), batch_size=BATCH,
        image_size=OUT, device=torch.device(device), train=train,
        generator=torch.Generator().manual_seed(0) if train else None,
        sizes=torch.from_numpy(store.train_sizes) if train else None, **options,
    )  # fmt: skip


def test_the_run_has_one_canonical_device():
    """``cuda`` and ``cuda:0`` are unequal devices, so are ``cpu:0`` and ``cpu``: the run's
    device is the one its tensors report."""
    assert resolve_device("cpu:0") == torch.zeros(1, device="cpu:0").device == torch.device("cpu")
    assert resolve_device("cpu") == torch.zeros(1).device
    assert resolve_device("auto") == torch.zeros(1).device  # no GPU here


def test_a_resident_store_on_an_indexed_device_is_used_in_place():
    """Placement is decided once, not by comparing devices per batch: on ``cpu:0`` (tensors
    report ``cpu``) the resident store is gathered in place. Comparing devices took the
    streaming branch here and pinned memory, which needs CUDA."""
    store = MemoryStore()
    for train in (True, False):
        split = _split(store, train=train, device="cpu:0")
        batches = list(split)
        assert len(batches) == len(split) == (3 if train else 2)
        for images, targets in batches:
            assert images.shape[1:] == (3, OUT, OUT) and images.dtype == torch.float32
            assert images.device == targets.device == torch.zeros(0).device


@pytest.mark.parametrize("train", [True, False])
def test_a_batch_needs_no_host_synchronisation(train):
    """After the first batch (which builds the split's buffers), making a batch runs no op that
    waits for the device on CUDA: no item(), no tensor from Python data (the old mean/std per
    batch), no list index (the old x/y swap), no data-dependent shapes."""
    split = _split(MemoryStore(), train=train)
    batches = iter(split)
    next(batches)
    with OpLog() as log:
        next(batches)
    names = log.names()
    assert "aten.index_select.out" in names or "aten.index_select.default" in names  # seen
    assert "torchvision.roi_align.default" in names or not train
    assert log.syncing() == []


def test_a_training_batch_writes_three_output_sized_tensors_and_no_fresh_float_input():
    """Memory traffic per training batch: the uint8 gather (U), its normalised float copy for
    roi_align (4U, into a buffer kept from the first batch), roi_align's output, the
    transposition and the flipped output (3 output-sized float tensors, F each). The old
    pipeline wrote the float input afresh every batch and 6 output-sized tensors (roi_align,
    transpose where, flip copy, flip where, normalise, memory-format copy)."""
    store = MemoryStore(train=32)
    split = _split(store, train=True)
    frame = store.train.shape[1:]
    gathered = BATCH * frame[0] * frame[1] * 3  # U
    output = BATCH * 3 * OUT * OUT * 4  # F
    batches = iter(split)
    next(batches)
    for _ in range(2):
        with OpLog() as log:
            next(batches)
        assert log.written() <= 5 * gathered + 3 * output + 32 * 1024  # boxes, indices: small
        assert max(op.fresh for op in log.ops) <= output  # the float input is reused


@pytest.mark.parametrize("channels_last", [False, True])
def test_a_streamed_store_gives_the_batches_a_resident_one_gives(channels_last):
    """Same seed, same batches, whether each one is gathered in place or streamed through a
    ring of host buffers by a background thread (2 slots: a slot refilled before its batch was
    copied out would show as a different batch). Two epochs, train and val."""
    store = MemoryStore(train=40, val=12)
    loaders = {
        placement: device_loaders(
            store,
            image_size=OUT,
            batch_size=BATCH,
            device=torch.device("cpu"),
            channels_last=channels_last,
            placement=placement,
            ring_slots=2,
        )  # fmt: skip
        for placement in (RESIDENT, STREAMED)
    }
    assert {name: made.placement for name, made in loaders.items()} == {
        RESIDENT: RESIDENT,
        STREAMED: STREAMED,
    }
    for epoch in range(2):
        seen = {}
        for placement, made in loaders.items():
            made.generator.manual_seed(epoch)
            seen[placement] = [
                (images.clone(), targets.clone())
                for split in (made.train, made.val)
                for images, targets in split
            ]
        assert len(seen[RESIDENT]) == len(seen[STREAMED]) == 5 + 2
        for (a, a_targets), (b, b_targets) in zip(seen[RESIDENT], seen[STREAMED], strict=True):
            assert torch.equal(a, b) and torch.equal(a_targets, b_targets)
            assert b.is_contiguous(
                memory_format=torch.channels_last if channels_last else torch.contiguous_format
            )


def _ring_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "nettebench-host-ring"]


def test_the_streaming_thread_runs_ahead_and_stops_with_its_epoch():
    split = _split(MemoryStore(train=200), train=True, placement=STREAMED)  # 25 batches
    batches = iter(split)
    next(batches)
    assert len(_ring_threads()) == 1
    del batches  # an epoch stopped early (max_steps): the thread is joined
    assert _ring_threads() == []
    assert len(list(split)) == 25 and _ring_threads() == []


def test_the_ring_hands_out_every_batch_in_order_and_raises_the_threads_error():
    rows = torch.arange(30).view(10, 3)
    order = torch.randperm(10, generator=torch.Generator().manual_seed(1))
    ring = HostRing([rows, rows[:, 0]], order, 4, slots=2)
    try:
        for step in range(ring.steps):  # 4 + 4 + 2 rows
            slot, (batch, first) = ring.get()
            expected = rows[order[step * 4 : (step + 1) * 4]]
            assert torch.equal(batch, expected) and torch.equal(first, expected[:, 0])
            ring.release(slot, None)
    finally:
        ring.close()

    broken = HostRing([rows], torch.tensor([0, 99]), 2, slots=2)  # 99: no such row
    try:
        with pytest.raises(IndexError):
            broken.get()
    finally:
        broken.close()
