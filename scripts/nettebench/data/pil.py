"""The reference input pipeline: ImageFolder + PIL + torchvision transforms + DataLoader.

Exactly what pytorch/examples' ``imagenet/main.py`` (the study's script) does, kept as the
baseline that faster loaders are measured against: RandomResizedCrop + horizontal flip for
training, resize to ``image_size / 0.875`` + centre crop for validation, ImageNet normalisation.

One departure, shared with the ``cached`` loader: every training batch is full, the short last
batch of an epoch dropped (``drop_last``). So both loaders train the same ``n // batch_size``
batches an epoch, and every training step has the cell's one shape (a second shape makes cuDNN
autotune, or torch.compile compile, inside a timed step). Validation keeps every image.
"""

from __future__ import annotations

import random
import signal
from dataclasses import dataclass

import numpy as np
import torch
import torchvision
from torch.utils.data import DataLoader

from nettebench.datasets import repair
from nettebench.datasets.walk import split_samples
from nettebench.vocabulary.cell import VAL_RESIZE_RATIO
from nettebench.vocabulary.dataset_errors import DatasetError

datasets, transforms = torchvision.datasets, torchvision.transforms

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass
class Loaders:
    train: DataLoader
    val: DataLoader
    num_classes: int
    classes: list[str]
    generator: torch.Generator  # drives the training shuffle and the workers' seeds
    # cached loader: where its store is, "resident" (the training device's memory; on a CPU,
    # host memory) or "streamed" (host memory, streamed to the GPU); None for the pil loader
    placement: str | None = None
    # bytes the loaders hold on the training device for the whole run (a resident store), which
    # the trainer reports apart from the training's own peak memory
    device_bytes: int = 0
    # batches in the full validation set when ``val`` is its max_steps sample (data.val_sample),
    # so validation time is extrapolated to the full set; None when ``val`` is the full set
    val_steps_full: int | None = None


def require_full_batch(train_images: int, batch_size: int) -> None:
    """Refuse a training split with fewer images than one batch: with the short last batch
    dropped (both loaders) its epochs would train nothing. ``batch_size`` is the global batch
    (all processes of a data-parallel cell together)."""
    if train_images < batch_size:
        raise DatasetError(
            f"the training split has {train_images} images, fewer than one batch of "
            f"{batch_size}: every training step takes a full batch (the short last one is "
            f"dropped), so an epoch would train none; set batch_size to at most {train_images}"
        )


def build_pil_loaders(
    train_dir,
    val_dir,
    *,
    image_size: int,
    batch_size: int,
    workers: int,
    pin_memory: bool,
    skip: frozenset[str] = frozenset(),
) -> Loaders:
    """Train and val DataLoaders over ImageFolder trees (but the image paths in ``skip``: the
    ones dataset.json lists as left out because they do not decode).

    The training shuffle and the workers' seeds come from ``Loaders.generator``, which the
    trainer re-seeds every epoch. Workers are not persistent (the reference's behaviour): each
    epoch starts fresh workers seeded from that generator, so an epoch's augmentations depend
    only on its seed, which is what lets a resumed run repeat them exactly.
    """

    normalize = transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)
    files = {"loader": load_image, "skip": skip}
    train_set = TreeImageFolder(
        str(train_dir),
        transforms.Compose(
            [
                transforms.RandomResizedCrop(image_size),
                transforms.RandomHorizontalFlip(),
                transforms.ToTensor(),
                normalize,
            ]
        ),
        **files,
    )
    val_set = TreeImageFolder(
        str(val_dir),
        transforms.Compose(
            [
                transforms.Resize(round(image_size / VAL_RESIZE_RATIO)),
                transforms.CenterCrop(image_size),
                transforms.ToTensor(),
                normalize,
            ]
        ),
        **files,
    )
    if train_set.classes != val_set.classes:
        raise ValueError(
            f"train/ and val/ hold different class folders: {train_set.classes} vs "
            f"{val_set.classes}"
        )
    generator = torch.Generator()
    common = {"batch_size": batch_size, "num_workers": workers, "pin_memory": pin_memory}
    train = DataLoader(
        train_set,
        shuffle=True,
        drop_last=True,  # one batch shape, as the cached loader (module docstring)
        generator=generator,
        worker_init_fn=_seed_worker,
        **common,
    )
    val = DataLoader(val_set, shuffle=False, worker_init_fn=_seed_worker, **common)
    return Loaders(train, val, len(train_set.classes), list(train_set.classes), generator)


class TreeImageFolder(datasets.ImageFolder):
    """torchvision's ImageFolder listing its samples with the dataset walk
    (:func:`nettebench.datasets.walk.split_samples`) instead of ``os.walk(followlinks=True)``:
    no link is followed (one a loader would read is refused, naming it), so the loader sees
    exactly the files dataset.json counts and the store holds, and ``skip`` (the images
    dataset.json leaves out) are left out."""

    def __init__(self, root, transform=None, *, loader, skip: frozenset[str] = frozenset()):
        self._skip = skip
        super().__init__(str(root), transform, loader=loader)

    def make_dataset(self, directory, class_to_idx, *args, **kwargs):
        classes = sorted(class_to_idx, key=class_to_idx.__getitem__)
        samples = split_samples(directory, classes, exclude=self._skip)
        found = {index for _, index in samples}
        empty = [name for name in classes if class_to_idx[name] not in found]
        if empty:
            raise FileNotFoundError(f"Found no valid file for the classes {', '.join(empty)}.")
        return samples


def load_image(path: str):
    """ImageFolder's PIL loader, with an error that names the file it could not decode and how
    to get it back, also said in the run's terminal (:func:`.repair.undecodable`)."""
    try:
        return datasets.folder.pil_loader(path)
    except (OSError, ValueError) as exc:
        raise DatasetError(repair.undecodable(path, exc)) from None


def _seed_worker(worker_id: int) -> None:
    """Seed python's and numpy's RNGs in each worker from torch's per-worker seed, and set its
    signals: SIGINT ignored (a terminal's Ctrl-C reaches the whole process group, and the trainer
    stops at its next step and shuts its workers down itself, nettebench.training.interrupts);
    SIGTERM back to its default, which a forked worker would otherwise take over from the
    trainer's handler: it is how Python's multiprocessing ends a worker left running at exit."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)
