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

Resize policy ``shorter_side`` (the only one so far; :data:`RESIZE_POLICIES`): each image is
resized (PIL bilinear, antialiased: what torchvision's ``Resize`` does on a PIL image) so its
shorter side is ``resolution``. Validation images are then centre-cropped to ``resolution x
resolution`` (torchvision's ``CenterCrop`` arithmetic), so the stored pixels equal
``CenterCrop(resolution)(Resize(resolution)(pil_image))`` exactly.

Full frame (training images). The reference's RandomResizedCrop samples from the *whole*
image, so a training image keeps its whole frame: its longer side, up to ``frame = int(
resolution * 1.5)`` (:data:`nettebench.study.cell.STORE_MAX_ASPECT`; a longer side beyond that,
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
match. A build first removes ``store.json``, decodes into a hidden work folder, moves the arrays
into place and writes ``store.json`` last (atomically), so a killed or failed build never leaves
a store that looks ready.

Command line::

    python -m nettebench.data.store --data DATASET_JSON_OR_DIR --out-dir DIR --resolution 256
        [--resize-policy shorter_side] [--jobs N]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from nettebench.datasets.errors import DatasetError, report
from nettebench.datasets.info import IMAGE_EXTENSIONS, SPLITS, load_data_root, read_info
from nettebench.records.atomic import make_work_dir, remove_tree, write_json_atomic
from nettebench.study.cell import store_frame_width as frame_width

FORMAT_VERSION = 2  # bump when the layout or the pixels a policy produces change
MANIFEST = "store.json"
WORK_PREFIX = ".store-build-"
MIN_RESOLUTION = 8


class StoreError(DatasetError):
    """The store could not be built or opened; the message names the file and what to do."""


def _shorter_side(image: Image.Image, resolution: int) -> Image.Image:
    """Resize the shorter side to ``resolution`` (torchvision ``Resize``), centre-crop square."""
    return _centre_crop(_resize_shorter_side(image, resolution), resolution, resolution)


def _resize_shorter_side(image: Image.Image, resolution: int) -> Image.Image:
    """torchvision's ``Resize(resolution)`` on a PIL image (the longer side truncated)."""
    width, height = image.size
    short, long = (width, height) if width <= height else (height, width)
    new_long = int(resolution * long / short)
    new_w, new_h = (resolution, new_long) if width <= height else (new_long, resolution)
    if (new_w, new_h) != (width, height):
        image = image.resize((new_w, new_h), Image.BILINEAR)
    return image


def _centre_crop(image: Image.Image, height: int, width: int) -> Image.Image:
    """torchvision's CenterCrop: offsets rounded half to even, as int(round(...)) does."""
    top = int(round((image.height - height) / 2.0))
    left = int(round((image.width - width) / 2.0))
    return image.crop((left, top, left + width, top + height))


def full_frame(image: Image.Image, resolution: int) -> tuple[np.ndarray, tuple[int, int]]:
    """A training image as the store keeps it: its slot (``resolution x frame``, landscape,
    image on the left, its last column repeated to the right) and its (height, width) in its
    own orientation."""
    image = _resize_shorter_side(image, resolution)
    longest = frame_width(resolution)
    if image.width > longest or image.height > longest:  # beyond 3:2: keep the centre
        image = _centre_crop(image, min(image.height, longest), min(image.width, longest))
    size = (image.height, image.width)
    if image.height > image.width:
        image = image.transpose(Image.Transpose.TRANSPOSE)
    slot = np.empty((resolution, longest, 3), dtype=np.uint8)
    slot[:, : image.width] = np.asarray(image)
    # The rest repeats the last column: a batched resampler reading half a pixel past the
    # image's edge then sees what torchvision's resize sees there (the edge pixel), not black.
    slot[:, image.width :] = slot[:, image.width - 1 : image.width]
    return slot, size


# Policy name -> function(PIL RGB image, resolution) -> resolution x resolution PIL image.
RESIZE_POLICIES: dict[str, Callable[[Image.Image, int], Image.Image]] = {
    "shorter_side": _shorter_side,
}


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


# ---------------------------------------------------------------------------------------------
# what the store is built from


def list_images(split_dir: str | os.PathLike[str], classes: tuple[str, ...] | list[str]):
    """``[(path, class_index), ...]`` in ImageFolder's order (its ``make_dataset``)."""
    samples = []
    for index, name in enumerate(classes):
        class_dir = os.path.join(split_dir, name)
        for root, _dirs, files in sorted(os.walk(class_dir, followlinks=True)):
            for fname in sorted(files):
                if fname.lower().endswith(IMAGE_EXTENSIONS):
                    samples.append((os.path.join(root, fname), index))
    return samples


def source_of(data_root_path: str | os.PathLike[str]) -> dict[str, str]:
    """What the store was built from: ``{"kind": ..., "value": ...}``.

    The dataset.json's archive ``sha256`` when it records one (kind ``archive_sha256``);
    otherwise a sha256 over every image's relative path, size and mtime (kind
    ``file_fingerprint``), so adding, removing, replacing or touching an image changes it.
    """
    info_path = _info_path(data_root_path)
    if info_path is not None:
        sha = read_info(info_path).get("sha256")
        if sha:
            return {"kind": "archive_sha256", "value": str(sha)}
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
    if resize_policy not in RESIZE_POLICIES:
        raise StoreError(
            f"resize_policy must be one of {', '.join(sorted(RESIZE_POLICIES))}; "
            f"got {resize_policy!r}"
        )


def _check_resolution(resolution: int) -> None:
    if not isinstance(resolution, int) or resolution < MIN_RESOLUTION:
        raise StoreError(f"resolution must be an integer >= {MIN_RESOLUTION}, got {resolution!r}")


# ---------------------------------------------------------------------------------------------
# building


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
    if not all((out_dir / name).is_file() for name in _array_files()):
        return False
    return (
        manifest.get("format_version") == FORMAT_VERSION
        and manifest.get("resolution") == resolution
        and manifest.get("resize_policy") == resize_policy
        and manifest.get("source") == source_of(data_root_path)
    )


def build_store(
    data_root_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    resolution: int,
    resize_policy: str = "shorter_side",
    jobs: int | None = None,
    progress: bool | None = None,
) -> dict[str, Any]:
    """Decode every train and val image of the dataset into ``out_dir``; return the manifest.

    ``jobs`` worker processes decode (default: all CPUs); ``progress`` None shows a bar only
    when stderr is a terminal. Raises :class:`StoreError` naming the file that fails to decode.
    """
    _check_resolution(resolution)
    check_policy(resize_policy)
    if jobs is not None and jobs < 1:
        raise StoreError(f"jobs must be at least 1, got {jobs}")
    from tqdm import tqdm

    start = time.perf_counter()
    out_dir = Path(out_dir)
    data_root = load_data_root(data_root_path)
    source = source_of(data_root_path)  # before decoding: a change during the build is caught
    samples = {split: list_images(data_root.root / split, data_root.classes) for split in SPLITS}
    for split, found in samples.items():
        if not found:
            raise StoreError(f"{data_root.root / split} holds no images; nothing to store")

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MANIFEST).unlink(missing_ok=True)  # not ready from here until the end
    work = make_work_dir(out_dir, WORK_PREFIX)
    try:
        for split in SPLITS:
            width = frame_width(resolution) if split == "train" else resolution
            shape = (len(samples[split]), resolution, width, 3)
            array = np.lib.format.open_memmap(
                work / f"{split}.npy", mode="w+", dtype=np.uint8, shape=shape
            )
            del array  # header and size written; workers fill it by index
            labels = np.array([label for _path, label in samples[split]], dtype=np.int64)
            np.save(work / f"{split}_labels.npy", labels)
        sizes = np.lib.format.open_memmap(
            work / "train_sizes.npy", mode="w+", dtype=np.int32, shape=(len(samples["train"]), 2)
        )
        del sizes
        tasks = [
            (split, index, path)
            for split in SPLITS
            for index, (path, _label) in enumerate(samples[split])
        ]
        init = partial(_worker_open, str(work))
        worker = partial(_decode_into, resolution=resolution, resize_policy=resize_policy)
        jobs = jobs or _default_jobs()
        disable = None if progress is None else not progress
        with tqdm(total=len(tasks), unit="img", desc="store: decoding", disable=disable) as bar:
            if jobs == 1:
                init()
                try:
                    for task in tasks:
                        worker(task)
                        bar.update()
                finally:
                    _WORKER_ARRAYS.clear()
            else:
                import multiprocessing

                chunk = max(1, min(64, len(tasks) // (jobs * 8)))
                with multiprocessing.Pool(jobs, initializer=init) as pool:
                    for _ in pool.imap_unordered(worker, tasks, chunksize=chunk):
                        bar.update()
        for name in _array_files():
            _fsync(work / name)
            os.replace(work / name, out_dir / name)
    except OSError as exc:
        raise StoreError(f"could not write the store into {out_dir}: {exc}") from exc
    finally:
        remove_tree(work)

    manifest = {
        "format_version": FORMAT_VERSION,
        "resolution": resolution,
        "resize_policy": resize_policy,
        "layout": "NHWC uint8 RGB",
        "frame_width": frame_width(resolution),
        "classes": list(data_root.classes),
        "train_images": len(samples["train"]),
        "val_images": len(samples["val"]),
        "source": source,
        "dataset": data_root.name,
        "data_root": str(data_root.root),
        "build_seconds": round(time.perf_counter() - start, 3),
    }
    write_json_atomic(out_dir / MANIFEST, manifest)
    return manifest


def _array_files() -> list[str]:
    names = [name for split in SPLITS for name in (f"{split}.npy", f"{split}_labels.npy")]
    return [*names, "train_sizes.npy"]


# Memory maps of the work folder's arrays, opened once per worker process.
_WORKER_ARRAYS: dict[str, np.ndarray] = {}


def _worker_open(work: str) -> None:
    for name in (*SPLITS, "train_sizes"):
        _WORKER_ARRAYS[name] = np.load(os.path.join(work, f"{name}.npy"), mmap_mode="r+")


def _decode_into(task: tuple[str, int, str], *, resolution: int, resize_policy: str) -> None:
    """Decode, resize and write one image into its slot (runs in a worker process)."""
    split, index, path = task
    if split == "train":
        _WORKER_ARRAYS[split][index], _WORKER_ARRAYS["train_sizes"][index] = decode_frame(
            path, resolution
        )
    else:
        _WORKER_ARRAYS[split][index] = decode(path, resolution, resize_policy)


def decode(path: str | os.PathLike[str], resolution: int, resize_policy: str) -> np.ndarray:
    """One validation image as the store holds it: uint8 (resolution, resolution, 3)."""
    with _open_rgb(path) as image:
        return np.asarray(RESIZE_POLICIES[resize_policy](image, resolution))


def decode_frame(path: str | os.PathLike[str], resolution: int):
    """One training image as the store holds it: its slot and (height, width)."""
    with _open_rgb(path) as image:
        return full_frame(image, resolution)


@contextlib.contextmanager
def _open_rgb(path: str | os.PathLike[str]):
    """The image as ImageFolder's pil_loader gives it; a file that fails names itself."""
    try:
        with Image.open(path) as image:
            yield image.convert("RGB")
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise StoreError(
            f"could not decode {path}: {exc}; the file is corrupt or not an image: replace or "
            "remove it (or prepare the dataset again) and rebuild the store"
        ) from None


def _fsync(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _default_jobs() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


# ---------------------------------------------------------------------------------------------
# reading


def read_manifest(out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """``store.json`` of ``out_dir``; StoreError when there is no finished store there."""
    import json

    path = Path(out_dir) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StoreError(
            f"{path} does not exist: {out_dir} holds no finished store; build it with "
            "python -m nettebench.data.store"
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
    for name in _array_files():
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


# ---------------------------------------------------------------------------------------------
# command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nettebench.data.store",
        description="Decode a dataset once into memory-mappable uint8 arrays for the cached "
        "loader (does nothing when the store is already current).",
    )
    parser.add_argument("--data", required=True, help="dataset.json, its folder, or train/+val/")
    parser.add_argument("--out-dir", required=True, help="receives the store")
    parser.add_argument("--resolution", type=int, required=True, help="stored side in pixels")
    parser.add_argument("--resize-policy", default="shorter_side", choices=sorted(RESIZE_POLICIES))
    parser.add_argument("--jobs", type=int, help="decoding processes (default: all CPUs)")
    args = parser.parse_args(argv)
    try:
        if store_is_current(args.out_dir, args.data, args.resolution, args.resize_policy):
            print(f"store in {args.out_dir} is current ({args.resolution} px); nothing to do")
            return 0
        manifest = build_store(
            args.data,
            args.out_dir,
            resolution=args.resolution,
            resize_policy=args.resize_policy,
            jobs=args.jobs,
        )
    except DatasetError as exc:
        return report(exc)
    size = sum((Path(args.out_dir) / name).stat().st_size for name in _array_files())
    total = manifest["train_images"] + manifest["val_images"]
    seconds = manifest["build_seconds"]
    print(
        f"stored {manifest['train_images']} train / {manifest['val_images']} val images at "
        f"{args.resolution} px in {args.out_dir}: {size / 1e6:.1f} MB, {seconds:.1f} s "
        f"({total / max(seconds, 1e-9):.0f} img/s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
