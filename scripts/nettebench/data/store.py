"""The decoded dataset store: a dataset decoded once into memory-mappable uint8 arrays.

The ``cached`` loader samples its batches from here instead of decoding JPEGs every epoch.
Layout of ``<out_dir>``::

    train.npy          uint8 (N_train, resolution, frame, 3), NHWC, RGB (see "full frame")
    train_sizes.npy    int32 (N_train, 2)  each train image's (height, width), own orientation
    val.npy            uint8 (N_val, resolution, resolution, 3)
    train_labels.npy   int64 (N_train,)  ImageFolder class index (sorted class folders)
    val_labels.npy     int64 (N_val,)
    store.json         the manifest, written last: its presence means "the store is ready"

The arrays are ``.npy`` files, so ``np.load(path, mmap_mode="r")`` maps them without reading
them. Images are in ImageFolder's sample order (class by class, files sorted), so index ``i``
of a split is ``ImageFolder(split_dir).samples[i]``.

Resize policy ``shorter_side`` (the only one so far; :data:`RESIZE_POLICY_NAMES`): each image
is resized (PIL bilinear, antialiased: what torchvision's ``Resize`` does on a PIL image) so its
shorter side is ``resolution``. Validation images are then centre-cropped to ``resolution x
resolution`` (torchvision's ``CenterCrop`` arithmetic), so the stored pixels equal
``CenterCrop(resolution)(Resize(resolution)(pil_image))`` exactly.

Full frame (training images). The reference's RandomResizedCrop samples from the *whole*
image, so a training image keeps its whole frame: its longer side, up to ``frame = int(
resolution * 1.5)`` (:data:`nettebench.vocabulary.cell.STORE_MAX_ASPECT`; a longer side beyond that,
rarer than 4:3 and 3:2 photographs, is centre-cropped to it), lies along the array's width
(portrait images are stored transposed), in the left of a ``resolution x frame`` slot (its
last column repeated to the slot's end);
``train_sizes.npy`` says which part of the slot is the image and its orientation (height >
width: transposed).

Validation images are stored the same way: the store does not know a cell's ``image_size``.
The loader resizes them on the device to ``round(image_size / 0.875)`` and centre-crops
``image_size``, as the reference does. With the usual pair (``resolution`` 256, ``image_size``
224) the stored val image *is* the reference's resized image and only the centre crop remains;
for other pairs the val pixels come from two resizes instead of one.

Rebuild rule. ``store.json`` records the source (the dataset.json's archive ``sha256`` or, for
trees without one, a fingerprint of every image's path, size and mtime), the resolution, the
resize policy and :data:`FORMAT_VERSION`; :func:`store_is_current` is True only when all four
match. Building it is :mod:`nettebench.data.store_build`; this module is the layout, the checks
and reading.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nettebench.datasets.info import SPLITS, load_data_root, read_info
from nettebench.datasets.walk import split_samples
from nettebench.vocabulary.cell import store_frame_width as frame_width
from nettebench.vocabulary.dataset_errors import DatasetError

FORMAT_VERSION = 2  # bump when the layout or the pixels a policy produces change


MANIFEST = "store.json"


WORK_PREFIX = ".store-build-"


MIN_RESOLUTION = 8


class StoreError(DatasetError):
    """The store could not be built or opened; the message names the file and what to do."""


# The resize policies a store can be built with (functions: store_build.RESIZE_POLICIES).
RESIZE_POLICY_NAMES = ("shorter_side",)


@dataclass
class Store:
    """An opened store; ``train``/``val`` are read-only memory maps (N, H, W, 3) uint8."""

    train: np.ndarray  # (N, resolution, frame, 3): full frames, see train_sizes
    val: np.ndarray
    train_sizes: np.ndarray  # (N, 2) int32: each train image's (height, width)
    train_labels: np.ndarray
    val_labels: np.ndarray
    classes: list[str]
    resolution: int
    manifest: dict[str, Any]


def list_images(split_dir: str | os.PathLike[str], classes: tuple[str, ...] | list[str]):
    """``[(path, class_index), ...]`` in ImageFolder's order: the dataset walk
    (:mod:`nettebench.datasets.walk`), which the ``pil`` loader lists its samples with too."""
    return split_samples(split_dir, classes)


def source_of(data_root_path: str | os.PathLike[str]) -> dict[str, str]:
    """What the store was built from: ``{"kind": ..., "value": ...}``.

    The dataset.json's archive ``sha256`` when it records one (kind ``archive_sha256``), else
    its tree's content digest (``files_sha256``: a synthetic dataset's, taken as it was
    generated, or a local folder's, taken when it was checked); otherwise a sha256 over every
    image's relative path, size and mtime (kind ``file_fingerprint``), so adding, removing,
    replacing or touching an image changes it.
    """
    info_path = _info_path(data_root_path)
    if info_path is not None:
        info = read_info(info_path)
        if info.get("sha256"):
            return {"kind": "archive_sha256", "value": str(info["sha256"])}
        if info.get("files_sha256"):  # a synthetic or local tree's content, digested once
            return {"kind": "files_sha256", "value": str(info["files_sha256"])}
    data_root = load_data_root(data_root_path)
    digest = hashlib.sha256()
    for split in SPLITS:
        for path, label in list_images(data_root.root / split, data_root.classes):
            stat = os.stat(path)
            rel = Path(path).relative_to(data_root.root).as_posix()
            digest.update(f"{rel}\t{label}\t{stat.st_size}\t{stat.st_mtime_ns}\n".encode())
    return {"kind": "file_fingerprint", "value": digest.hexdigest()}


def _info_path(data_root_path: str | os.PathLike[str]) -> Path | None:
    path = Path(data_root_path).expanduser()
    if path.is_file():
        return path
    if (path / "dataset.json").is_file():
        return path / "dataset.json"
    return None


def check_policy(resize_policy: str) -> None:
    if resize_policy not in RESIZE_POLICY_NAMES:
        raise StoreError(
            f"resize_policy must be one of {', '.join(sorted(RESIZE_POLICY_NAMES))}; "
            f"got {resize_policy!r}"
        )


def check_resolution(resolution: int) -> None:
    if not isinstance(resolution, int) or resolution < MIN_RESOLUTION:
        raise StoreError(f"resolution must be an integer >= {MIN_RESOLUTION}, got {resolution!r}")


def store_is_current(
    out_dir: str | os.PathLike[str],
    data_root_path: str | os.PathLike[str],
    resolution: int,
    resize_policy: str = "shorter_side",
) -> bool:
    """True when ``out_dir`` holds a finished store of this source, resolution and policy."""
    out_dir = Path(out_dir)
    try:
        manifest = read_manifest(out_dir)
    except StoreError:
        return False
    if not all((out_dir / name).is_file() for name in array_files()):
        return False
    return (
        manifest.get("format_version") == FORMAT_VERSION
        and manifest.get("resolution") == resolution
        and manifest.get("resize_policy") == resize_policy
        and manifest.get("source") == source_of(data_root_path)
    )


def array_files() -> list[str]:
    names = [name for split in SPLITS for name in (f"{split}.npy", f"{split}_labels.npy")]
    return [*names, "train_sizes.npy"]


def read_manifest(out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """``store.json`` of ``out_dir``; StoreError when there is no finished store there."""

    path = Path(out_dir) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StoreError(
            f"{path} does not exist: {out_dir} holds no finished store; build it with "
            "python -m nettebench data store"
        ) from None
    except (OSError, ValueError) as exc:
        raise StoreError(f"could not read {path}: {exc}") from exc
    if not isinstance(manifest, dict) or "resolution" not in manifest:
        raise StoreError(f"{path} is not a store manifest (no 'resolution' key)")
    return manifest


def open_store(out_dir: str | os.PathLike[str]) -> Store:
    """Map a finished store read-only (nothing is read until it is indexed)."""
    out_dir = Path(out_dir)
    manifest = read_manifest(out_dir)
    if manifest.get("format_version") != FORMAT_VERSION:
        raise StoreError(
            f"{out_dir / MANIFEST} has format_version {manifest.get('format_version')!r}, this "
            f"code reads {FORMAT_VERSION}: rebuild the store"
        )
    arrays = {}
    for name in array_files():
        try:
            arrays[name] = np.load(out_dir / name, mmap_mode="r")
        except (OSError, ValueError) as exc:
            raise StoreError(f"could not open {out_dir / name}: {exc}; rebuild the store") from exc
    store = Store(
        train=arrays["train.npy"],
        val=arrays["val.npy"],
        train_sizes=arrays["train_sizes.npy"],
        train_labels=arrays["train_labels.npy"],
        val_labels=arrays["val_labels.npy"],
        classes=list(manifest["classes"]),
        resolution=int(manifest["resolution"]),
        manifest=manifest,
    )
    for split in SPLITS:
        images, labels = getattr(store, split), getattr(store, f"{split}_labels")
        width = frame_width(store.resolution) if split == "train" else store.resolution
        expected = (manifest[f"{split}_images"], store.resolution, width, 3)
        if images.shape != expected or labels.shape != expected[:1]:
            raise StoreError(
                f"{out_dir / (split + '.npy')} has shape {images.shape} (labels "
                f"{labels.shape}), the manifest says {expected}: rebuild the store"
            )
    return store
