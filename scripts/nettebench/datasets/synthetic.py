"""A generated, Imagenette-shaped dataset: runs anywhere, no network, still learnable.

Used for the quick start (a few hundred small images) and as a stand-in when the real download
is not possible (same split sizes and 320 px as ``imagenette2-320``), so the benchmark's timing
is representative: JPEG files of Imagenette's shape decoded by the same input pipeline.

What a class is. Each class has a shape (disc, square, triangle, ring, stripes, cross, diamond,
checker, frame, crescent; reused with other hues past ten classes) and a base hue. Every image
draws that shape at a random position, size and rotation, with hue, saturation and shading
jitter, over a low-saturation, low-frequency background, plus up to two small distractor shapes of
random kind and colour, pixel noise and a brightness change. So no single pixel gives the class
away (most pixels are background), but a small CNN learns it in an epoch or two.

The folder layout is Imagenette's: ``data/{train,val}/<wnid>/<wnid>_<index>.JPEG`` with the 10
real Imagenette WordNet ids as class names (synthetic ids ``n9000000k`` beyond ten), images dealt
round-robin over classes, the shortest side exactly ``size`` and the other in
``[size, 1.5 * size]``, JPEG quality 90.

Deterministic: image ``i`` of a split is drawn from its own generator seeded by ``(seed, split,
i)``, so the same arguments give byte-identical files whatever ``jobs`` is.

Command line::

    python -m nettebench datasets synthetic --out-dir DIR --name NAME [--size PX]
        [--train-images N] [--val-images N] [--classes N] [--seed S] [--jobs N]
"""

from __future__ import annotations

import argparse
import colorsys
import hashlib
import io
import math
import os
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from tqdm import tqdm

from nettebench.vocabulary import commands
from nettebench.vocabulary.atomic import install_tree, make_work_dir, remove_tree
from nettebench.vocabulary.dataset_errors import DatasetError
from nettebench.vocabulary.worker_pool import worker_pool

from .info import INFO_FILE, TreeStats, remove_stale_trees, write_info
from .walk import tree_images

GENERATOR_VERSION = 1  # bump when a change alters the pixels, so old trees are not mistaken
IMAGENETTE_WNIDS = (
    "n01440764",  # tench
    "n02102040",  # English springer
    "n02979186",  # cassette player
    "n03000684",  # chain saw
    "n03028079",  # church
    "n03394916",  # French horn
    "n03417042",  # garbage truck
    "n03425413",  # gas pump
    "n03445777",  # golf ball
    "n03888605",  # parachute
)
SHAPES = (
    "disc",
    "square",
    "triangle",
    "ring",
    "stripes",
    "cross",
    "diamond",
    "checker",
    "frame",
    "crescent",
)
SPLIT_IDS = {"train": 0, "val": 1}
JPEG_QUALITY = 90
TREE = "data"
WORK_PREFIX = ".synthetic-"
# The module's own name also under `python -m`, where __name__ is "__main__" (dataset.json's
# `generator`).
MODULE = __spec__.name if __spec__ is not None else __name__


def class_names(num_classes: int) -> list[str]:
    """Imagenette's wnids for the first ten classes, then ``n9000010``, ``n9000011``, ..."""
    extra = [f"n9{k:07d}" for k in range(len(IMAGENETTE_WNIDS), num_classes)]
    return list(IMAGENETTE_WNIDS[:num_classes]) + extra


def render(
    *, label: int, num_classes: int, size: int, seed: int, split: str, index: int
) -> np.ndarray:
    """The RGB pixels (uint8, H x W x 3) of image ``index`` of ``split``, of class ``label``."""
    rng = np.random.default_rng([seed, SPLIT_IDS[split], index])
    other = int(rng.integers(size, int(1.5 * size) + 1))
    height, width = (size, other) if rng.random() < 0.5 else (other, size)

    image = _background(rng, height, width)
    hue_jitter = min(0.02, 0.25 / num_classes)
    hue = (label / num_classes + rng.uniform(-hue_jitter, hue_jitter)) % 1.0
    colour = _rgb(hue, rng.uniform(0.55, 1.0), rng.uniform(0.6, 1.0))
    _draw(image, rng, SHAPES[label % len(SHAPES)], colour, rng.uniform(0.2, 0.38) * size)
    for _ in range(int(rng.integers(0, 3))):
        shape = SHAPES[int(rng.integers(len(SHAPES)))]
        colour = _rgb(rng.random(), rng.uniform(0.3, 1.0), rng.uniform(0.4, 1.0))
        _draw(image, rng, shape, colour, rng.uniform(0.05, 0.11) * size)

    image *= rng.uniform(0.7, 1.3)  # brightness
    image += rng.standard_normal(image.shape, dtype=np.float32) * np.float32(rng.uniform(3, 12))
    return np.clip(image, 0, 255).astype(np.uint8)


def _background(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A smooth, greyish colour field: a few random cells blown up with bilinear filtering."""
    cells = (int(rng.integers(2, 6)), int(rng.integers(2, 6)))
    grey = rng.uniform(60, 200, size=(*cells, 1))
    tint = rng.uniform(-30, 30, size=(*cells, 3))
    small = np.clip(grey + tint, 0, 255).astype(np.uint8)
    big = Image.fromarray(small, "RGB").resize((width, height), Image.BILINEAR)
    return np.asarray(big, dtype=np.float32).copy()


def _rgb(hue: float, saturation: float, value: float) -> np.ndarray:
    return np.array(colorsys.hsv_to_rgb(hue, saturation, value), dtype=np.float32) * 255


def _draw(
    image: np.ndarray, rng: np.random.Generator, shape: str, colour: np.ndarray, radius: float
) -> None:
    """Paint ``shape`` in place at a random position and rotation, with a light shading ramp."""
    height, width = image.shape[:2]
    radius = max(radius, 2.0)
    cx = rng.uniform(min(radius, width / 2), max(width - radius, width / 2))
    cy = rng.uniform(min(radius, height / 2), max(height - radius, height / 2))
    angle = rng.uniform(0, 2 * math.pi)
    shade = np.float32(rng.uniform(0.1, 0.35))
    x0, x1 = max(int(cx - radius) - 1, 0), min(int(cx + radius) + 2, width)
    y0, y1 = max(int(cy - radius) - 1, 0), min(int(cy + radius) + 2, height)
    if x0 >= x1 or y0 >= y1:
        return
    xs = (np.arange(x0, x1, dtype=np.float32) + 0.5 - cx)[None, :]
    ys = (np.arange(y0, y1, dtype=np.float32) + 0.5 - cy)[:, None]
    cos, sin = np.float32(math.cos(angle)), np.float32(math.sin(angle))
    u = (xs * cos + ys * sin) / np.float32(radius)
    v = (ys * cos - xs * sin) / np.float32(radius)
    mask = _mask(shape, u, v)
    light = 1 + shade * u  # a light from one side, so the object is not one flat colour
    patch = image[y0:y1, x0:x1]
    patch[mask] = (colour[None, None, :] * light[..., None])[mask]


def _mask(shape: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Where ``shape`` is, in coordinates scaled so it fits the unit disc."""
    au, av = np.abs(u), np.abs(v)
    r2 = u * u + v * v
    if shape == "disc":
        return r2 <= 1
    if shape == "square":
        return np.maximum(au, av) <= 0.72
    if shape == "triangle":  # equilateral, inscribed in the unit circle
        s3 = np.float32(math.sqrt(3) / 2)
        return (v <= 0.5) & (s3 * u - 0.5 * v <= 0.5) & (-s3 * u - 0.5 * v <= 0.5)
    if shape == "ring":
        return (r2 <= 1) & (r2 >= 0.45)
    if shape == "stripes":
        return (np.maximum(au, av) <= 0.72) & (np.sin(u * np.float32(3 * math.pi)) > 0)
    if shape == "cross":
        return ((au <= 0.28) & (av <= 0.95)) | ((av <= 0.28) & (au <= 0.95))
    if shape == "diamond":
        return au + av <= 1
    if shape == "checker":
        cells = np.sin(u * np.float32(2.2 * math.pi)) * np.sin(v * np.float32(2.2 * math.pi)) > 0
        return (np.maximum(au, av) <= 0.72) & cells
    if shape == "frame":
        return (np.maximum(au, av) <= 0.75) & (np.maximum(au, av) >= 0.45)
    if shape == "crescent":
        return (r2 <= 1) & ((u - 0.45) ** 2 + v * v > 0.6)
    raise ValueError(f"unknown shape {shape!r}")


def encode_jpeg(pixels: np.ndarray) -> bytes:
    """JPEG bytes of ``pixels``; fixed settings, so equal pixels give equal bytes."""
    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buffer, "JPEG", quality=JPEG_QUALITY)
    return buffer.getvalue()


def _write_one(task: tuple[str, int], *, work: str, names: list[str], size: int, seed: int):
    """Render and write one image (runs in a worker process); its path in the tree and the
    sha256 of its bytes."""
    split, index = task
    label = index % len(names)
    pixels = render(
        label=label, num_classes=len(names), size=size, seed=seed, split=split, index=index
    )
    rel = f"{split}/{names[label]}/{names[label]}_{index:06d}.JPEG"
    data = encode_jpeg(pixels)
    with open(os.path.join(work, rel), "wb") as handle:
        handle.write(data)
    return rel, hashlib.sha256(data).hexdigest()


def default_jobs() -> int:
    """CPUs this process may use (respects taskset/cgroup affinity where the OS reports it)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def generate(
    out_dir: str | os.PathLike[str],
    *,
    name: str,
    size: int = 64,
    train_images: int = 400,
    val_images: int = 100,
    num_classes: int = 10,
    seed: int = 0,
    jobs: int | None = None,
    progress: bool | None = None,
) -> dict[str, Any]:
    """Write ``<out_dir>/data/{train,val}/<wnid>/*.JPEG`` and ``<out_dir>/dataset.json``.

    ``jobs`` worker processes render the images (default: all CPUs available). ``progress``:
    None shows a bar only when stderr is a terminal. Returns the dataset.json written.
    """
    _check_arguments(size, train_images, val_images, num_classes, jobs)

    out_dir = Path(out_dir)
    (out_dir / INFO_FILE).unlink(missing_ok=True)
    names = class_names(num_classes)
    jobs = jobs or default_jobs()
    tasks = [("train", i) for i in range(train_images)] + [("val", i) for i in range(val_images)]

    work = make_work_dir(out_dir, WORK_PREFIX)
    try:
        for split in SPLIT_IDS:
            for wnid in names:
                (work / split / wnid).mkdir(parents=True)
        worker = partial(_write_one, work=str(work), names=names, size=size, seed=seed)
        disable = None if progress is None else not progress
        digests = {}
        with tqdm(total=len(tasks), unit="img", desc=f"{name}: generating", disable=disable) as bar:
            if jobs == 1:
                for task in tasks:
                    digests.update([worker(task)])
                    bar.update()
            else:
                chunk = max(1, min(64, len(tasks) // (jobs * 8)))
                with worker_pool(jobs) as pool:
                    for rel, sha in pool.imap_unordered(worker, tasks, chunksize=chunk):
                        digests[rel] = sha
                        bar.update()
        files_sha256 = content_digest(work, names, digests)
        install_tree(work, out_dir / TREE)
    except OSError as exc:
        raise DatasetError(f"could not write the synthetic dataset into {out_dir}: {exc}") from exc
    finally:
        remove_tree(work)

    for stale in remove_stale_trees(out_dir, keep=out_dir / TREE):
        print(f"removed {stale}, the tree of the dataset's earlier source", file=sys.stderr)
    return write_info(
        out_dir,
        name=name,
        kind="synthetic",
        root=TREE,
        source=None,
        sha256=None,
        synthetic={
            "generator": MODULE,
            "version": GENERATOR_VERSION,
            "size": size,
            "train_images": train_images,
            "val_images": val_images,
            "num_classes": num_classes,
            "seed": seed,
            "jpeg_quality": JPEG_QUALITY,
        },
        stats=TreeStats(tuple(sorted(names)), train_images, val_images),
        files_sha256=files_sha256,
    )


def content_digest(root: Path, names: list[str], digests: dict[str, str]) -> str:
    """dataset.json's ``files_sha256``, as a local folder's (:mod:`.images`): a sha256 over
    every image's path and the sha256 of its bytes, in ImageFolder's order; from the digests
    taken as the images were written, so a cached cell keys its store on it without reading
    or stat-ing the tree."""
    digest = hashlib.sha256()
    for path in tree_images(root, names):
        rel = Path(path).relative_to(root).as_posix()
        digest.update(f"{rel}\t{digests[rel]}\n".encode())
    return digest.hexdigest()


def _check_arguments(
    size: int, train_images: int, val_images: int, num_classes: int, jobs: int | None
) -> None:
    if size < 8:
        raise DatasetError(f"synthetic size must be at least 8 pixels, got {size}")
    if num_classes < 2:
        raise DatasetError(f"a synthetic dataset needs at least 2 classes, got {num_classes}")
    for split, count in (("train", train_images), ("val", val_images)):
        if count < num_classes:
            raise DatasetError(
                f"synthetic {split}_images ({count}) must be at least the number of classes "
                f"({num_classes}), so that every class folder holds an image"
            )
    if jobs is not None and jobs < 1:
        raise DatasetError(f"jobs must be at least 1, got {jobs}")


def main(argv: list[str] | None = None) -> int:
    parser = commands.Parser(
        prog="python -m nettebench datasets synthetic",
        description="Generate a learnable, Imagenette-shaped JPEG dataset and its dataset.json.",
    )
    parser.add_argument("--out-dir", required=True, help="receives data/ and dataset.json")
    parser.add_argument("--name", required=True, help="dataset name recorded in dataset.json")
    parser.add_argument("--size", type=int, default=64, help="shortest image side in pixels")
    parser.add_argument("--train-images", type=int, default=400)
    parser.add_argument("--val-images", type=int, default=100)
    parser.add_argument("--classes", type=int, default=10, help="number of classes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, help="worker processes (default: all CPUs)")
    return commands.run(parser, _generate, argv, errors=(DatasetError,), stream=sys.stdout)


def _generate(args: argparse.Namespace) -> Iterator[str]:
    info = generate(
        args.out_dir,
        name=args.name,
        size=args.size,
        train_images=args.train_images,
        val_images=args.val_images,
        num_classes=args.classes,
        seed=args.seed,
        jobs=args.jobs,
    )
    yield (
        f"generated {info['train_images']} train / {info['val_images']} val images "
        f"({info['num_classes']} classes, {args.size} px) in {Path(args.out_dir) / info['root']}"
    )


if __name__ == "__main__":  # run as python -m nettebench datasets synthetic
    sys.exit(commands.moved(__spec__.name))
