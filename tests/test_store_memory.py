"""Device memory around a resident store: reported apart from the training's peak, and held
free while ``batch_size: auto`` tries batch sizes; the trials never compile."""

from __future__ import annotations

import torch

from nettebench.data.cached import RESIDENT, STREAMED, _cpu_loaders, device_loaders, store_bytes
from nettebench.training import auto_batch, fit
from nettebench.vocabulary.cell import CellSpec
from tests.memory_store import OUT, MemoryStore


def test_a_resident_store_says_how_much_device_memory_it_holds():
    """The CPU twin of a GPU's resident store (its arrays on the training device): the bytes
    the trainer takes out of peak_mem_mb and reports as store_mem_mb."""
    store = MemoryStore(train=6, val=4)
    expected = sum(
        a.nbytes
        for a in (store.train, store.train_labels, store.val, store.val_labels, store.train_sizes)
    )
    assert store_bytes(store) == expected
    common = {"image_size": OUT, "batch_size": 2, "device": torch.device("cpu")}
    resident = device_loaders(store, channels_last=False, placement=RESIDENT, **common)
    streamed = device_loaders(store, channels_last=False, placement=STREAMED, **common)
    assert resident.device_bytes == expected
    assert streamed.device_bytes == 0
    workers = _cpu_loaders(store, image_size=OUT, batch_size=2, workers=0, channels_last=False)
    assert workers.device_bytes == 0


def test_no_store_is_reserved_for_pil_or_on_a_cpu(tmp_path):
    pil = CellSpec(dataset="d", model="resnet18", loader="pil", batch_size="auto")
    cached = CellSpec(dataset="d", model="resnet18", loader="cached", batch_size="auto")
    cpu = torch.device("cpu")
    assert fit.store_reserve(pil, tmp_path, tmp_path / "store", cpu) == 0
    assert fit.store_reserve(cached, tmp_path, tmp_path / "store", cpu) == 0
    assert not (tmp_path / "store").exists()  # nothing built for nothing


def test_auto_batch_size_trials_of_a_compiled_cell_run_eager(monkeypatch):
    """Each trial builds a fresh model; compiled, every halving would compile again."""
    compiled = []
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, *a, **k: compiled.append(self))
    monkeypatch.setattr(auto_batch, "AUTO_BATCH_START", 2)
    cell = CellSpec(
        dataset="d", model="resnet18", batch_size="auto", image_size=16, compile=True,
        device="cpu",
    )  # fmt: skip
    assert auto_batch.choose_batch_size(cell, torch.device("cpu"), 3, reserve_bytes=2**20) == 2
    assert compiled == []


def test_the_cached_paths_scratch_is_loader_memory_like_the_store():
    """The CPU twin of the GPU path (device_loaders on the CPU): after a batch of each split,
    the gathered batch and the transform's intermediates are the loaders' device memory,
    subtracted from peak memory with the store (pil's loader memory is on the host)."""
    from nettebench.data.cached import loader_device_mb

    store = MemoryStore(train=6, val=4)
    common = {"image_size": OUT, "batch_size": 2, "device": torch.device("cpu")}
    loaders = device_loaders(store, channels_last=False, placement=RESIDENT, **common)
    next(iter(loaders.train))
    next(iter(loaders.val))
    scratch = loaders.train.scratch_bytes() + loaders.val.scratch_bytes()
    gathered = loaders.train.gathered.nbytes + loaders.val.gathered.nbytes
    buffers = [*loaders.train.transform.buffers.tensors.values()]
    assert buffers and scratch >= gathered + sum(t.nbytes for t in buffers)
    cuda = torch.device("cuda", 0)  # the accounting a GPU does (no GPU needed to compute it)
    assert loader_device_mb(loaders, cuda) * 2**20 == store_bytes(store) + scratch
    assert loader_device_mb(loaders, torch.device("cpu")) == 0.0
    workers = _cpu_loaders(store, image_size=OUT, batch_size=2, workers=0, channels_last=False)
    assert loader_device_mb(workers, cuda) == 0.0  # no device scratch, no store


def test_a_resident_stores_upload_in_staged_chunks_copies_every_row():
    """The GPU's pinned, chunked upload of a memmap-backed store, run on the CPU (two staging
    buffers, refilled in turn): every row arrives, whatever the chunk and row counts."""
    from nettebench.data.streaming import staged_copy, upload

    store = MemoryStore(train=7, val=4)
    images = torch.from_numpy(store.train)
    row = images[0].numel()
    for chunk_rows in (1, 2, 3, 7, 50):
        copied = staged_copy(images, torch.device("cpu"), chunk_bytes=chunk_rows * row, pin=False)
        assert copied.data_ptr() != images.data_ptr() and torch.equal(copied, images)
    assert torch.equal(upload(images, torch.device("cpu")), images)  # the CPU path: .to()
