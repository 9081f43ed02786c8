"""Benchmark: how long the report's aggregation takes on the small study of the tests.

The study is :func:`record_factory.make_study` with compute ceilings (21 cells: three models,
O0/O1/O3, two seeds, an OOM, an unsupported precision, a CPU baseline), the one most report
tests aggregate. Prints the median and range of ``aggregate()``'s wall and CPU time (the CPU
time moves less when other work shares the machine); asserts nothing.
To compare two checkouts, run it under each one's ``scripts`` on ``PYTHONPATH``, one after the
other on the same machine.

    PYTHONPATH=scripts python tests/bench_aggregate.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import record_factory as rf  # noqa: E402

from nettebench.report import aggregate as agg  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = rf.make_study(Path(tmp) / "cells", ceilings=True)
        agg.aggregate(paths, Path(tmp) / "warm-up")  # first call pays lazy imports
        wall, cpu = [], []
        for repeat in range(args.repeats):
            start, start_cpu = time.perf_counter(), time.process_time()
            agg.aggregate(paths, Path(tmp) / f"out{repeat}")
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
    print(f"aggregate() of {len(paths)} cells, {args.repeats} runs ({agg.__file__}):")
    for name, times in (("wall", wall), ("CPU", cpu)):
        print(
            f"  {name}: median {statistics.median(times):.3f} s, "
            f"min {min(times):.3f} s, max {max(times):.3f} s"
        )


if __name__ == "__main__":
    main()
