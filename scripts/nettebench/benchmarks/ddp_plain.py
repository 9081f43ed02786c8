"""A plain DistributedDataParallel baseline: what the machine gives data parallelism.

The project's scaling table (``results/tables/scaling.md``) sets a data-parallel cell's img/s
against its 1-process twin. How much of the gap is the project's (its loaders, shards, the
per-step stop check, the epoch sums) and how much the machine's (gloo's all-reduce, cores
shared by the processes)? This script answers the second half with the least code that trains
data-parallel at all: the same model (:func:`nettebench.models.build.build_model`), the same
global batch split over the processes, the same image size, SGD with momentum, gloo on the CPU,
one fixed batch of random tensors per process (no input pipeline), each step timed::

    python -m nettebench benchmarks ddp-plain --processes 1 2 --model resnet18 \\
        --batch-size 32 --image-size 32 --threads 2

Each process gets ``threads / processes`` torch threads (default: every CPU this process may
use), as a data-parallel cell's processes share their job's ``--threads`` in a local run;
``--process-threads`` gives each a fixed number instead. A step's
time is the slowest process's; the rate is the global batch over the median step time (warm-up
steps left out), and the efficiency is ``img/s at N / (N x img/s at 1)``, the scaling table's
formula. ``--out`` writes the numbers (and every step time) as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

from nettebench.models.build import build_model
from nettebench.vocabulary import commands


def _rank(rank: int, world: int, init: str, options: dict[str, Any], out: str) -> None:
    """One process: DDP over gloo, its share of the global batch, every step timed."""
    torch.set_num_threads(threads(options, world))
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(rank)
    local = options["batch_size"] // world
    model = build_model(options["model"], options["classes"], pretrained=False)
    ddp = DistributedDataParallel(model) if world > 1 else model
    optimiser = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    size = options["image_size"]
    images = torch.randn(local, 3, size, size)
    targets = torch.randint(0, options["classes"], (local,))
    ddp.train()
    seconds = []
    for _ in range(options["warmup"] + options["steps"]):
        start = time.perf_counter()
        optimiser.zero_grad(set_to_none=True)
        loss_fn(ddp(images), targets).backward()  # DDP all-reduces the gradients here
        optimiser.step()
        seconds.append(time.perf_counter() - start)
    timed = torch.tensor(seconds[options["warmup"] :], dtype=torch.float64)
    if world > 1:
        dist.all_reduce(timed, op=dist.ReduceOp.MAX)  # a step lasts as long as its slowest
    if rank == 0:
        Path(out).write_text(json.dumps(timed.tolist()))
    dist.destroy_process_group()


def measure(processes: int, options: dict[str, Any]) -> dict[str, Any]:
    """Train ``options['steps']`` timed steps at ``processes`` gloo processes; their numbers."""
    if options["batch_size"] % processes:
        raise SystemExit(
            f"error: batch size {options['batch_size']} does not split over {processes}"
        )
    with tempfile.TemporaryDirectory(prefix="nettebench-ddp-") as scratch:
        out = Path(scratch) / "steps.json"
        init = f"file://{Path(scratch) / 'rendezvous'}"
        mp.spawn(_rank, args=(processes, init, options, str(out)), nprocs=processes)
        steps = json.loads(out.read_text())
    median = statistics.median(steps)
    return {
        "processes": processes,
        "img_s": options["batch_size"] / median,
        "median_step_s": median,
        "step_s": steps,
    }


def threads(options: dict[str, Any], processes: int) -> int:
    """Torch threads of each of ``processes`` processes."""
    return options["process_threads"] or max(1, options["threads"] // processes)


def build_parser() -> argparse.ArgumentParser:
    parser = commands.Parser(
        prog="python -m nettebench benchmarks ddp-plain",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch-size", type=int, default=32, help="the global batch")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--steps", type=int, default=30, help="timed steps")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads of all processes together"
    )
    parser.add_argument(
        "--process-threads",
        type=int,
        default=None,
        help="torch threads of each process instead (tests/test_distributed.py gives 1)",
    )
    parser.add_argument("--out", default=None, help="write the numbers here as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    return commands.run(build_parser(), _compare, argv, stream=sys.stdout)


def _compare(args: argparse.Namespace) -> Iterator[str]:
    options = {
        "model": args.model,
        "batch_size": args.batch_size,
        "image_size": args.image_size,
        "classes": args.classes,
        "steps": args.steps,
        "warmup": args.warmup,
        "threads": args.threads or len(os.sched_getaffinity(0)),
        "process_threads": args.process_threads,
    }
    results = [measure(count, options) for count in args.processes]
    one = next((r["img_s"] for r in results if r["processes"] == 1), None)
    for result in results:
        count = result["processes"]
        result["efficiency"] = None if one is None else result["img_s"] / (count * one)
        efficiency = "" if one is None else f"  efficiency {result['efficiency']:.1%}"
        yield (
            f"plain DDP (gloo) {args.model} batch {args.batch_size} at {args.image_size} px, "
            f"{count} process(es), {threads(options, count)} thread(s) each: "
            f"{result['img_s']:.1f} img/s "
            f"(median step {1000 * result['median_step_s']:.1f} ms){efficiency}"
        )
    if args.out:
        Path(args.out).write_text(json.dumps({"options": options, "results": results}, indent=2))


if __name__ == "__main__":  # run as python -m nettebench benchmarks ddp-plain
    sys.exit(commands.moved(__spec__.name))
