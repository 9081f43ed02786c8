"""Benchmark: what one resume checkpoint costs a cell (resnet18 weights + SGD momentum).

Times, on this machine's CPU and disk, a whole save (serialise, write, fsync: what the trainer
paid per epoch when saves were synchronous), the host copy :func:`checkpoint.save` now pays
before its write goes to the background, and a load. Prints numbers; asserts nothing.

    PYTHONPATH=scripts python tests/bench_checkpoint.py [--repeats 7] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch
import torchvision

from nettebench.training import checkpoint

KEY = {"cell": "bench"}


def state() -> dict:
    model = torchvision.models.resnet18()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(2, 3, 32, 32)).sum().backward()
    optimizer.step()  # the momentum buffers exist from the first step on
    trainer = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
    return {"key": KEY, "rows": [], "trainer": trainer}


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--dir", default=None, help="where the checkpoint goes (default: /tmp)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    saved = state()
    whole, copy, load = [], [], []
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        for _ in range(args.repeats):
            started = time.perf_counter()
            checkpoint.save(folder, saved)
            copy.append(time.perf_counter() - started)
            checkpoint.wait()
            whole.append(time.perf_counter() - started)
            started = time.perf_counter()
            checkpoint.load(folder, KEY)
            load.append(time.perf_counter() - started)
        size = os.path.getsize(os.path.join(folder, checkpoint.CHECKPOINT_FILE))
    ms = lambda values: f"{1e3 * statistics.median(values):.0f} ms (min {1e3 * min(values):.0f})"  # noqa: E731
    print(f"checkpoint {size / 1e6:.1f} MB, median of {args.repeats}:")
    print(f"  whole save (copy, serialise, write, fsync): {ms(whole)}")
    print(f"  the trainer's share now (host copy):       {ms(copy)}")
    print(f"  load:                                       {ms(load)}")
    print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
