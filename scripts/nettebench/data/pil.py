"""The reference input pipeline: ImageFolder + PIL + torchvision transforms + DataLoader.

Exactly what pytorch/examples' ``imagenet/main.py`` (the study's script) does, kept as the
baseline that faster loaders are measured against: RandomResizedCrop + horizontal flip for
training, resize to ``image_size / 0.875`` + centre crop for validation, ImageNet normalisation.
"""

from __future__ import annotations

import random
import signal
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

from nettebench.datasets.errors import DatasetError
from nettebench.study.cell import VAL_RESIZE_RATIO

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
    # batches in the full validation set when ``val`` is its max_steps sample (data.val_sample),
    # so validation time is extrapolated to the full set; None when ``val`` is the full set
    val_steps_full: int | None = None


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
    files = {"loader": load_image}
    if skip:
        files["is_valid_file"] = lambda path: (
            datasets.folder.has_file_allowed_extension(path, datasets.folder.IMG_EXTENSIONS)
            and path not in skip
        )
    train_set = datasets.ImageFolder(
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
    val_set = datasets.ImageFolder(
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
        train_set, shuffle=True, generator=generator, worker_init_fn=_seed_worker, **common
    )
    val = DataLoader(val_set, shuffle=False, worker_init_fn=_seed_worker, **common)
    return Loaders(train, val, len(train_set.classes), list(train_set.classes), generator)


def load_image(path: str):
    """ImageFolder's PIL loader, with an error that names the file it could not decode."""
    try:
        return datasets.folder.pil_loader(path)
    except (OSError, ValueError) as exc:
        raise DatasetError(
            f"{path} does not decode ({type(exc).__name__}: {exc}); replace or remove it, or "
            "prepare the dataset through the workflow, which checks every image first"
        ) from None


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
