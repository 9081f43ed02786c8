"""The cached loader's host synchronisations in one epoch of each split, resident and streamed: a
case of the device command (tests/device/run.py), on a GPU with sync debug mode, on a CPU as
the ops that would synchronise (the CPU twin, tests/op_log.py).

    PYTHONPATH=scripts python3 tests/device/sync_check.py --store STORE --batch-size 256 \\
        --image-size 224 --json sync.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    """One epoch of each cached split, resident and streamed, counting synchronisations: on a
    GPU with sync debug mode, on a CPU as the ops that would synchronise (the CPU twin)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--image-size", type=int, required=True)
    parser.add_argument("--json", required=True)
    args = parser.parse_args(argv)
    import warnings

    import torch

    from nettebench.data import store as stores
    from nettebench.data.cached import RESIDENT, STREAMED, device_loaders
    from nettebench.training.cli import resolve_device

    device = resolve_device("auto")
    cuda = device.type == "cuda"
    found: dict = {"device": str(device), "how": (
        "torch.cuda.set_sync_debug_mode('warn'), after one warm-up batch per split" if cuda
        else "CPU twin: ops that synchronise on CUDA (tests/op_log.py)"
    )}  # fmt: skip
    for placement in (RESIDENT, STREAMED):
        loaders = device_loaders(
            stores.open_store(args.store), image_size=args.image_size,
            batch_size=args.batch_size, device=device, channels_last=True, placement=placement,
        )  # fmt: skip
        loaders.generator.manual_seed(0)
        iterators = [iter(loaders.train), iter(loaders.val)]
        for iterator in iterators:
            next(iterator)  # builds the split's buffers and constants, outside the count
        started = time.perf_counter()
        if cuda:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                torch.cuda.set_sync_debug_mode("warn")
                steps = sum(1 for iterator in iterators for _ in iterator)
                torch.cuda.set_sync_debug_mode("default")
            torch.cuda.synchronize()
            syncs = [str(w.message) for w in caught if "synchroniz" in str(w.message)]
        else:
            sys.path.insert(0, str(REPO))
            from tests.op_log import OpLog

            with OpLog() as log:
                steps = sum(1 for iterator in iterators for _ in iterator)
            syncs = log.syncing()
        found[placement] = {
            "steps": steps + 2,
            "syncs": len(syncs),
            "examples": syncs[:5],
            "seconds": time.perf_counter() - started,
        }
        print(f"{placement}: {found[placement]['syncs']} syncs in {steps + 2} batches", flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
