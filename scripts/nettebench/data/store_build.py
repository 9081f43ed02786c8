"""Build the decoded dataset store (layout: :mod:`nettebench.data.store`): the ``store_build`` rule.

Each image is decoded once (in ``--jobs`` worker processes) and resized as the store's layout
says. A build first removes ``store.json``, decodes into a hidden work folder, moves the arrays
into place and writes ``store.json`` last (atomically), so a killed or failed build never leaves
a store that looks ready.

Command line::

    python -m nettebench data store --data DATASET_JSON_OR_DIR --out-dir DIR \\
        --resolution 256 [--resize-policy shorter_side] [--jobs N]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from tqdm import tqdm

from nettebench.data.store import (
    FORMAT_VERSION,
    MANIFEST,
    RESIZE_POLICY_NAMES,
    WORK_PREFIX,
    StoreError,
    array_files,
    check_policy,
    check_resolution,
    list_images,
    source_of,
    store_is_current,
)
from nettebench.datasets import repair
from nettebench.datasets.info import SPLITS, load_data_root
from nettebench.vocabulary import commands
from nettebench.vocabulary.atomic import make_work_dir, remove_tree, write_json_atomic
from nettebench.vocabulary.cell import store_frame_width as frame_width
from nettebench.vocabulary.dataset_errors import DatasetError
from nettebench.vocabulary.worker_pool import worker_pool


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


# Policy name -> function(PIL RGB image, resolution) -> resolution x resolution PIL image.
RESIZE_POLICIES: dict[str, Callable[[Image.Image, int], Image.Image]] = {
    "shorter_side": _shorter_side,
}
assert tuple(RESIZE_POLICIES) == RESIZE_POLICY_NAMES


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
    check_resolution(resolution)
    check_policy(resize_policy)
    if jobs is not None and jobs < 1:
        raise StoreError(f"jobs must be at least 1, got {jobs}")

    start = time.perf_counter()
    out_dir = Path(out_dir)
    data_root = load_data_root(data_root_path)
    source = source_of(data_root_path)  # before decoding: a change during the build is caught
    samples = {
        split: [  # but the images dataset.json lists as skipped (they do not decode)
            sample
            for sample in list_images(data_root.root / split, data_root.classes)
            if sample[0] not in data_root.skipped
        ]
        for split in SPLITS
    }
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
                chunk = max(1, min(64, len(tasks) // (jobs * 8)))
                with worker_pool(jobs, initializer=init) as pool:
                    for _ in pool.imap_unordered(worker, tasks, chunksize=chunk):
                        bar.update()
        for name in array_files():
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
        raise StoreError(repair.undecodable(path, exc)) from None


def _fsync(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _default_jobs() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def main(argv: list[str] | None = None) -> int:
    parser = commands.Parser(
        prog="python -m nettebench data store",
        description="Decode a dataset once into memory-mappable uint8 arrays for the cached "
        "loader (does nothing when the store is already current).",
    )
    parser.add_argument("--data", required=True, help="dataset.json, its folder, or train/+val/")
    parser.add_argument("--out-dir", required=True, help="receives the store")
    parser.add_argument("--resolution", type=int, required=True, help="stored side in pixels")
    parser.add_argument("--resize-policy", default="shorter_side", choices=sorted(RESIZE_POLICIES))
    parser.add_argument("--jobs", type=int, help="decoding processes (default: all CPUs)")
    return commands.run(parser, _store, argv, errors=(DatasetError,), stream=sys.stdout)


def _store(args: argparse.Namespace) -> Iterator[str]:
    if store_is_current(args.out_dir, args.data, args.resolution, args.resize_policy):
        yield f"store in {args.out_dir} is current ({args.resolution} px); nothing to do"
        return
    manifest = build_store(
        args.data,
        args.out_dir,
        resolution=args.resolution,
        resize_policy=args.resize_policy,
        jobs=args.jobs,
    )
    size = sum((Path(args.out_dir) / name).stat().st_size for name in array_files())
    total = manifest["train_images"] + manifest["val_images"]
    seconds = manifest["build_seconds"]
    yield (
        f"stored {manifest['train_images']} train / {manifest['val_images']} val images at "
        f"{args.resolution} px in {args.out_dir}: {size / 1e6:.1f} MB, {seconds:.1f} s "
        f"({total / max(seconds, 1e-9):.0f} img/s)"
    )


if __name__ == "__main__":  # run as python -m nettebench data store
    sys.exit(commands.moved(__spec__.name))
