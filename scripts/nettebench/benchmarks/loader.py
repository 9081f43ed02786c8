"""Benchmark: input-pipeline throughput of the ``pil`` and ``cached`` loaders, side by side.

Both loaders are built by the trainer's own code (:func:`nettebench.training.fit.build_loaders`) and
iterated over training batches with no model: what is measured is how fast each can deliver
augmented, normalised batches on the training device (the device synchronised before the clock
is read). A few batches are taken first as warm-up (worker start-up, allocator), untimed.

    python -m nettebench benchmarks loader --data results/data/imagenette2-320/dataset.json \\
        --workers 2 --batch-size 256 --image-size 224

Prints one line per loader and the ratio; ``--out`` also writes them as JSON.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from nettebench.datasets.info import load_data_root
from nettebench.study.cell_options import CommandParser
from nettebench.training.cli import resolve_device
from nettebench.training.fit import build_loaders
from nettebench.training.loop import synchronize
from nettebench.training.runner import seed_epoch
from nettebench.vocabulary import commands
from nettebench.vocabulary.atomic import write_json_atomic
from nettebench.vocabulary.cell import CellSpec

LOADERS = ("pil", "cached")


def measure(
    data: str | Path,
    loader: str,
    *,
    batch_size: int,
    image_size: int,
    workers: int,
    batches: int,
    warmup_batches: int,
    device: str,
    store_dir: str | Path,
) -> dict[str, Any]:
    """Training img/s one loader delivers on ``device`` (best of the timed window)."""

    target = resolve_device(device)
    data_root = load_data_root(data)
    cell = CellSpec(
        dataset=data_root.name,
        loader=loader,
        batch_size=batch_size,
        image_size=image_size,
        workers=workers,
    )
    built = time.perf_counter()
    loaders = build_loaders(cell, data_root, data, batch_size, target, Path(store_dir))
    setup_s = time.perf_counter() - built
    seed_epoch(0, 0, loaders.generator)
    images_done = 0
    iterator = iter(loaders.train)
    taken = 0
    start = None
    while taken < warmup_batches + batches:
        try:
            images, targets = next(iterator)
        except StopIteration:  # a small dataset: start another epoch
            iterator = iter(loaders.train)
            continue
        images = images.to(target, non_blocking=True)
        taken += 1
        if taken == warmup_batches:
            synchronize(target)
            start = time.perf_counter()
        elif taken > warmup_batches:
            images_done += images.shape[0]
    synchronize(target)
    seconds = time.perf_counter() - (start or built)
    del iterator
    return {
        "loader": loader,
        "img_s": images_done / seconds if seconds > 0 else float("nan"),
        "batches": batches,
        "batch_size": batch_size,
        "image_size": image_size,
        "workers": workers,
        "device": str(target),
        "threads": torch.get_num_threads(),
        "setup_s": setup_s,
    }


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="python -m nettebench benchmarks loader", description=__doc__)
    parser.add_argument("--data", required=True, help="dataset.json or a train/ + val/ folder")
    parser.add_argument("--loaders", nargs="+", choices=LOADERS, default=list(LOADERS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--batches", type=int, default=20, help="timed batches")
    parser.add_argument("--warmup-batches", type=int, default=3)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--store", default=None, help="decoded store (default: beside --out)")
    parser.add_argument("--out", default=None, help="write the results here as JSON")
    return commands.run(parser, _compare, argv, stream=sys.stdout)


def _compare(args: argparse.Namespace) -> Iterator[str]:
    if args.threads:
        torch.set_num_threads(args.threads)
    store_dir = args.store or Path(args.out or ".").resolve().parent / "loader-bench-store"
    results = []
    for loader in args.loaders:
        result = measure(
            args.data,
            loader,
            batch_size=args.batch_size,
            image_size=args.image_size,
            workers=args.workers,
            batches=args.batches,
            warmup_batches=args.warmup_batches,
            device=args.device,
            store_dir=store_dir,
        )
        results.append(result)
        yield (
            f"{loader:>6}: {result['img_s']:8,.0f} img/s  (batch {args.batch_size}, "
            f"{args.image_size} px, {args.workers} workers, {result['device']}, "
            f"{result['threads']} threads; setup {result['setup_s']:.1f} s)"
        )
    by_loader = {r["loader"]: r["img_s"] for r in results}
    if len(by_loader) == 2:
        yield f"cached / pil: {by_loader['cached'] / by_loader['pil']:.1f}x"
    if args.out:
        write_json_atomic(args.out, {"results": results})


if __name__ == "__main__":  # run as python -m nettebench benchmarks loader
    sys.exit(commands.moved(__spec__.name))
