"""Benchmark: how long Snakemake takes to parse the workflow and plan a 100-cell study.

Parsing must import nothing heavy (no torch), so a dry run stays interactive. Prints numbers;
asserts nothing (performance goals live in benchmarks, not in timed tests).

    python tests/bench_dry_run.py [--cells-per-model 20] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.workflow_helpers import copy_workflow, planned_jobs, run_study, write_config  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    models = ["resnet18", "resnet34", "resnet50", "vgg19", "efficientnet-b0"]
    precisions = ["O0", "O1", "O2", "O3"]
    config = {
        "datasets": {"imagenette2-320": None},
        "matrix": {"model": models, "precision": precisions, "seed": list(range(args.seeds))},
    }
    with tempfile.TemporaryDirectory() as tmp:
        workdir = copy_workflow(Path(tmp))
        path = write_config(workdir, config)
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = run_study(workdir, path, "-n", "--quiet", "rules")
            times.append(time.perf_counter() - start)
        jobs = planned_jobs(run_study(workdir, path, "-n"))
    cells = jobs.get("cell_train", 0)
    print(
        f"dry run of a {cells}-cell matrix ({sum(jobs.values())} jobs): "
        f"median {statistics.median(times):.2f} s over {args.repeats} runs "
        f"(min {min(times):.2f}, max {max(times):.2f})"
    )
    del result


if __name__ == "__main__":
    main()
