"""Benchmark: the loader-parity pair (tests/test_loader_parity.py) for several seeds or sizes.

Prints each seed's final top-1 of the ``pil`` and the ``cached`` cell, their gap and the pair's
wall time, so a change of the test's setting can be measured before it is made. Asserts
nothing (the test holds the limits).

    python tests/bench_loader_parity.py [--seeds 0,1,2] [--image-size 32] [--data-size 40]
        [--epochs 6]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from tests import test_loader_parity as parity  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--image-size", type=int, default=parity.IMAGE_SIZE)
    parser.add_argument("--data-size", type=int, default=parity.DATA_SIZE)
    parser.add_argument("--epochs", type=int, default=parity.EPOCHS)
    args = parser.parse_args()
    for seed in (int(text) for text in args.seeds.split(",")):
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as work:
            top1 = parity.train_pair(
                Path(work), seed=seed, image_size=args.image_size, data_size=args.data_size,
                epochs=args.epochs,
            )  # fmt: skip
        print(
            f"image {args.image_size} px of {args.data_size}, {args.epochs} epochs, seed {seed}: "
            f"pil {top1['pil']:.1f} %, cached {top1['cached']:.1f} %, "
            f"gap {top1['cached'] - top1['pil']:+.1f} points, "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
