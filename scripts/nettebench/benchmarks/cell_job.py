"""A matrix cell's job: train the cell, then measure its compute ceiling in the same process.

A ceiling is only worth comparing with its cell when both were measured in the same
conditions: the same machine, device, threads and CPUs, and the same moment. A ceiling measured
by a job of its own can run minutes later under another load, or on another node of a cluster,
and then a cell "beats" its ceiling. So the workflow's ``cell_train`` runs this command: the
trainer (:func:`nettebench.training.cli.run_cell`, every one of its options) and, right after
the last epoch, with the cell's model and loaders freed, :func:`nettebench.benchmarks.ceiling.
measure_cell` on the same device, writing ``ceiling.json`` before ``metrics.json``. Both carry
the conditions they were timed in (:mod:`nettebench.records.conditions`), so the report can
still tell when the two were not comparable.

    python -m nettebench benchmarks cell-job --data results/data/imagenette2-320/dataset.json \\
        --out-dir /tmp/cell --ceiling /tmp/cell/ceiling.json --model resnet50 --precision O1
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from nettebench.benchmarks import ceiling
from nettebench.datasets.info import load_data_root
from nettebench.study.cell_options import cell_from_args, plain_text
from nettebench.training import cli as trainer
from nettebench.training.distributed import DataParallel
from nettebench.vocabulary import commands
from nettebench.vocabulary.atomic import write_text_atomic

COMMAND = ("benchmarks", "cell-job")  # python -m nettebench benchmarks cell-job


def build_parser() -> argparse.ArgumentParser:
    """The trainer's options, plus where the ceiling goes and how many steps it times."""
    parser = trainer.build_parser()
    parser.prog = commands.prog(*COMMAND)
    parser.description = plain_text(__doc__)
    parser.add_argument("--ceiling", required=True, help="where the ceiling.json goes")
    parser.add_argument("--ceiling-steps", type=int, default=ceiling.STEPS)
    parser.add_argument("--ceiling-warmup-steps", type=int, default=ceiling.WARMUP_STEPS)
    parser.add_argument(
        "--ceiling-max-seconds",
        type=float,
        default=None,
        help="on a CPU, stop timing ceiling steps after this long (default: a quarter of the "
        f"cell's epoch time, between {CPU_CEILING_MIN_S:g} and {ceiling.MAX_SECONDS:g} s)",
    )
    return parser


# On a CPU the ceiling's timed steps take a tenth of the time the cell's epochs took, within
# these bounds (warm-up at most a third of that again): the ceiling
# costs a small fraction of its cell. At a quarter it cost a quarter of every quick-start cell
# (17 of 73 s for an O0 cell, 44 of 156 s for the emulated bf16 one, on an AVX2-only EPYC);
# at least MIN_STEPS (10) steps after MIN_WARMUP_STEPS (3) whatever the cap (ceiling.py says
# why). A GPU times fixed steps.
CPU_CEILING_SHARE = 0.1
CPU_CEILING_MIN_S = 1.0


def ceiling_seconds(epochs_s: float) -> float:
    """The CPU time cap of a cell's ceiling from the time its epochs took (measured, not
    extrapolated: a cell timed over a few steps gets a short ceiling too)."""
    return min(ceiling.MAX_SECONDS, max(CPU_CEILING_MIN_S, CPU_CEILING_SHARE * epochs_s))


def ceiling_after_epochs(args: argparse.Namespace):
    """The trainer's ``after_epochs`` hook: measure and write the cell's ceiling."""

    def measure(device, record: dict[str, Any], epochs_s: float) -> list[Path]:
        cell = cell_from_args(args)
        max_seconds = args.ceiling_max_seconds or ceiling_seconds(epochs_s)
        result = ceiling.measure_cell(
            cell,
            num_classes=len(load_data_root(args.data).classes),
            warmup_steps=args.ceiling_warmup_steps,
            steps=args.ceiling_steps,
            threads=args.threads,
            builds_dir=args.builds_dir,
            context=ceiling.CONTEXT_CELL_JOB,
            environment_record=record["environment"],
            max_seconds=max_seconds,
        )
        if not DataParallel.from_env().writer:
            return []  # measured in every process of a data-parallel cell, written by rank 0
        print(ceiling.summary_line(result), file=sys.stderr, flush=True)
        text = json.dumps(result, indent=2, default=str) + "\n"
        write_text_atomic(Path(args.ceiling), text)
        return [Path(args.ceiling)]  # kept in finished.json with the cell's results

    return measure


def main(argv: list[str] | None = None) -> int:
    return trainer.main(
        argv, parser=build_parser(), after_epochs=ceiling_after_epochs, command=COMMAND
    )


if __name__ == "__main__":  # run as python -m nettebench benchmarks cell-job
    sys.exit(commands.moved(__spec__.name))
