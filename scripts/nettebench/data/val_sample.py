"""Validation under ``max_steps``: a fixed, class-balanced sample instead of the first batches.

Both loaders read validation images in ImageFolder order, class by class, so ``max_steps``
batches of it are the first class or two: an accuracy of 0 % or 16.7 % that says nothing.
With ``max_steps`` the validation set is cut to a sample of ``max_steps * batch_size`` images,
the first images of every class taken in turn (class 0's first, class 1's first, ..., class 0's
second, ...): the same images every epoch and for both loaders (the store keeps ImageFolder's
order, so index ``i`` is the same image in both), as balanced as the classes' sizes allow, and
balanced in any prefix, so a short last batch tilts nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from torch.utils.data import DataLoader, Subset


def balanced_indices(labels: Sequence[int], count: int) -> list[int]:
    """``count`` indices of ``labels`` (all of them if fewer), classes taken in turn, each
    class's images in their order; returned in that round-robin order."""
    by_class: dict[int, list[int]] = {}
    for index, label in enumerate(int(label) for label in labels):
        by_class.setdefault(label, []).append(index)
    queues = [by_class[label] for label in sorted(by_class)]
    chosen: list[int] = []
    depth = 0
    while len(chosen) < min(count, len(labels)):
        for queue in queues:
            if depth < len(queue) and len(chosen) < count:
                chosen.append(queue[depth])
        depth += 1
    return chosen


def sample_size(max_steps: int | None, batch_size: int) -> int | None:
    """Images the validation sample holds: ``max_steps`` batches; None without max_steps."""
    return None if max_steps is None else max_steps * batch_size


def balanced_loader(loader: DataLoader, count: int) -> DataLoader:
    """The pil loader's validation DataLoader over the balanced sample of its ImageFolder."""
    keep = balanced_indices(loader.dataset.targets, count)
    return DataLoader(
        Subset(loader.dataset, keep),
        batch_size=loader.batch_size,
        shuffle=False,
        num_workers=loader.num_workers,
        pin_memory=loader.pin_memory,
        worker_init_fn=loader.worker_init_fn,
    )


def balanced_store(store, count: int):
    """The opened store with its validation split cut to the balanced sample (copied into
    memory: ``max_steps`` batches are small); the training split untouched."""
    keep = np.asarray(balanced_indices(store.val_labels, count), dtype=np.int64)
    return dataclasses.replace(
        store, val=np.asarray(store.val[keep]), val_labels=np.asarray(store.val_labels[keep])
    )
