"""The ``cached`` input pipeline: batches sampled from the decoded store, augmented on the device.

The reference pipeline decodes every JPEG every epoch on the CPU, which is what starved the
study's GPU. Here the dataset was decoded once into a uint8 store (:mod:`nettebench.store`);
each epoch only shuffles indices, gathers uint8 batches, and runs random-resized-crop, flip and
normalisation batched on the training device (:mod:`nettebench.augment`). When the store fits
in device memory it is copied there once; otherwise batches are gathered on the host into pinned
memory and copied asynchronously.

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


def store_fits(store, device: torch.device) -> bool:
    """Whether both splits fit in DEVICE_MEMORY_SHARE of the device's free memory."""
    if device.type != "cuda":
        return True  # on a CPU the "device" is host memory, where the memmap already is
    free, _ = torch.cuda.mem_get_info(device)
    return store.train.nbytes + store.val.nbytes <= DEVICE_MEMORY_SHARE * free


def build_cached_loaders(
    store, *, image_size: int, batch_size: int, device: torch.device, channels_last: bool
):
    """Train and val splits over an opened store, as the trainer's ``Loaders``."""
    from nettebench.data import Loaders

    home = device if store_fits(store, device) else torch.device("cpu")
    generator = torch.Generator(device=device)

    def split(images, labels, train: bool) -> CachedSplit:
        return CachedSplit(
            images=torch.from_numpy(images[:]).to(home),
            labels=torch.from_numpy(labels[:]).to(home),
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
