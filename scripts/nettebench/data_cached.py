"""The ``cached`` input pipeline: batches sampled from the decoded store, never a JPEG again.

The reference pipeline decodes every JPEG every epoch on the CPU, which is what starved the
study's GPU. Here the dataset was decoded once into a uint8 store (:mod:`nettebench.store`).

- Training on a GPU: each epoch only shuffles indices, gathers uint8 batches, and runs
  random-resized-crop, flip and normalisation batched on the GPU (:mod:`nettebench.augment`).
  When the store fits in device memory it is copied there once; otherwise batches are gathered
  on the host into pinned memory and copied asynchronously.
- Training on a CPU there is no idle accelerator to hand the work to, and one batched
  ``roi_align`` on the CPU is slower than cropping each uint8 image with torchvision's own
  ``RandomResizedCrop`` in the DataLoader's ``workers`` (0.34 ms per 224 px crop on one core,
  with no decode): so the CPU path does that, and normalises whole batches in the main process.

Every training batch has the same shape (the odd last batch is dropped, as fixed shapes keep
cuDNN from autotuning a second shape); validation keeps every image.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch

# Use at most this share of the free device memory for the store (the rest is for training).
DEVICE_MEMORY_SHARE = 0.5


@dataclass
class CachedSplit:
    """One split (train or val) as an iterable of (images, targets) batches."""

    images: torch.Tensor  # uint8 (N, H, W, 3), on the device or in host memory
    labels: torch.Tensor  # int64 (N,), same device as ``images``
    batch_size: int
    image_size: int
    device: torch.device
    train: bool
    generator: torch.Generator | None = None  # shuffle, crops and flips (train only)
    channels_last: bool = False

    def __len__(self) -> int:
        n = self.images.shape[0]
        return n // self.batch_size if self.train else math.ceil(n / self.batch_size)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        from nettebench import augment

        n = self.images.shape[0]
        if self.train:
            order = torch.randperm(n, generator=self.generator, device=self.generator.device)
            order = order.to(self.images.device)
        else:
            order = torch.arange(n, device=self.images.device)
        for step in range(len(self)):
            index = order[step * self.batch_size : (step + 1) * self.batch_size]
            batch = self.images.index_select(0, index)
            targets = self.labels.index_select(0, index)
            if batch.device != self.device:
                batch = batch.pin_memory().to(self.device, non_blocking=True)
                targets = targets.to(self.device, non_blocking=True)
            if self.train:
                images = augment.random_resized_crop_flip(
                    batch, self.image_size, generator=self.generator,
                    channels_last=self.channels_last,
                )  # fmt: skip
            else:
                images = augment.center_crop_resize(
                    batch, self.image_size, channels_last=self.channels_last
                )
            yield images, targets


class _StoreCrops(torch.utils.data.Dataset):
    """Per-image uint8 crops from the store with torchvision's own transforms (CPU path)."""

    def __init__(self, images, labels, image_size: int, train: bool) -> None:
        from torchvision.transforms import v2

        from nettebench.cell import VAL_RESIZE_RATIO

        self.images, self.labels = images, labels
        if train:
            steps = [v2.RandomResizedCrop(image_size, antialias=True), v2.RandomHorizontalFlip()]
        else:
            steps = [
                v2.Resize(round(image_size / VAL_RESIZE_RATIO), antialias=True),
                v2.CenterCrop(image_size),
            ]
        self.transform = v2.Compose(steps)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int):
        import numpy as np

        # A private copy of one image (the store is a read-only memmap shared by the workers).
        image = torch.from_numpy(np.array(self.images[index])).permute(2, 0, 1)
        return self.transform(image), int(self.labels[index])


@dataclass
class _Normalised:
    """A DataLoader of uint8 batches, yielding them normalised in float (one op per batch)."""

    loader: torch.utils.data.DataLoader
    channels_last: bool

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        from nettebench.data import IMAGENET_MEAN, IMAGENET_STD

        mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1) * 255
        inverse_std = 1 / (torch.tensor(IMAGENET_STD).view(1, 3, 1, 1) * 255)
        memory_format = torch.channels_last if self.channels_last else torch.contiguous_format
        for images, targets in self.loader:
            # in place: three times faster than (x - mean) / std, which allocates twice
            images = images.float().sub_(mean).mul_(inverse_std)
            yield images.contiguous(memory_format=memory_format), targets


def _cpu_loaders(store, *, image_size: int, batch_size: int, workers: int, channels_last: bool):
    from torch.utils.data import DataLoader

    from nettebench.data import Loaders, _seed_worker

    generator = torch.Generator()

    def split(images, labels, train: bool) -> _Normalised:
        loader = DataLoader(
            _StoreCrops(images, labels, image_size, train),
            batch_size=batch_size,
            shuffle=train,
            drop_last=train,  # fixed batch shapes
            num_workers=workers,
            generator=generator if train else None,
            worker_init_fn=_seed_worker,
        )
        return _Normalised(loader, channels_last)

    return Loaders(
        train=split(store.train, store.train_labels, True),
        val=split(store.val, store.val_labels, False),
        num_classes=len(store.classes),
        classes=list(store.classes),
        generator=generator,
    )


def store_fits(store, device: torch.device) -> bool:
    """Whether both splits fit in DEVICE_MEMORY_SHARE of the device's free memory."""
    if device.type != "cuda":
        return True  # on a CPU the "device" is host memory, where the memmap already is
    free, _ = torch.cuda.mem_get_info(device)
    return store.train.nbytes + store.val.nbytes <= DEVICE_MEMORY_SHARE * free


def build_cached_loaders(
    store,
    *,
    image_size: int,
    batch_size: int,
    device: torch.device,
    channels_last: bool,
    workers: int = 0,
):
    """Train and val splits over an opened store, as the trainer's ``Loaders``."""
    from nettebench.data import Loaders

    if device.type == "cpu":
        return _cpu_loaders(
            store,
            image_size=image_size,
            batch_size=batch_size,
            workers=workers,
            channels_last=channels_last,
        )

    home = device if store_fits(store, device) else torch.device("cpu")
    generator = torch.Generator(device=device)

    def split(images, labels, train: bool) -> CachedSplit:
        return CachedSplit(
            images=_as_tensor(images).to(home),
            labels=_as_tensor(labels).to(home),
            batch_size=batch_size,
            image_size=image_size,
            device=device,
            train=train,
            generator=generator if train else None,
            channels_last=channels_last,
        )

    return Loaders(
        train=split(store.train, store.train_labels, True),
        val=split(store.val, store.val_labels, False),
        num_classes=len(store.classes),
        classes=list(store.classes),
        generator=generator,
    )


def _as_tensor(array) -> torch.Tensor:
    """A tensor over the store's read-only memmap, without copying it into memory (batches are
    only ever read from it; torch warns about non-writable arrays, which is moot here)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)
