"""python -m nettebench check: check a GPU with this project, from a fresh clone after the set-up.

It prints the stack first: the GPU, the NVIDIA driver and the oldest one the CUDA of this torch
runs on, CUDA, torch, cuDNN, NVML and every TF32 getter (as a process starts and after each
precision's TF32 set-up; one that raises says so). Then it generates the goal data (a synthetic
Imagenette-320-shaped dataset), decodes its store, trains the goal cells (resnet18 and resnet50
in O1, 10 epochs, batch 256, each with its compute ceiling), one epoch of each other precision
mode, and apex's O1-O3 where NVIDIA apex is installed, and prints the goal table.

    python -m nettebench check              # about 3 minutes on one H200, longer on other GPUs
    python -m nettebench check --stack      # the stack only, in seconds
    python -m nettebench check --smoke      # the same cases at tiny sizes on the CPU

Without a CUDA GPU it stops at once with one line that says why (no driver, a driver older than
the wheels need, a CPU build of torch). The table, one JSON line per case and every case's log
go to --out; the data and the store (about 4 GB) to --work, removed at the end.
Exit status 0 when every case ended with its result, 1 otherwise (with its one error line).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import nettebench
from nettebench.check import runner, stack
from nettebench.check.cases import CASES, GPU, SMOKE, Suite
from nettebench.study.cell_options import CommandParser
from nettebench.vocabulary import commands

SLACK = 10.0  # a case stops at 10x its H200 estimate: a card 5x slower still finishes


class CheckError(RuntimeError):
    """What ends the check in one line: no GPU, or cases that did not end with their result."""


def build_parser() -> CommandParser:
    parser = CommandParser(prog=commands.prog("check"), description=__doc__)
    parser.add_argument("--out", default="results/check", help="where the table and logs go")
    parser.add_argument(
        "--work",
        default=str(Path(tempfile.gettempdir()) / "nettebench-check"),
        help="the data and the store (about 4 GB), emptied first and removed at the end",
    )
    parser.add_argument("--keep-work", action="store_true", help="leave --work at the end")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU")
    parser.add_argument("--stack", action="store_true", help="print the stack only")
    parser.add_argument("--json", default=None, help="with --stack: also write it here as JSON")
    return parser


def child_env() -> dict[str, str]:
    """This environment, with this package first on ``PYTHONPATH`` (so every case's command
    runs the same code, installed or not) and unbuffered output for the logs."""
    root = str(Path(nettebench.__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": root + (os.pathsep + path if path else "")}  # fmt: skip


def print_stack(json_path: str | None) -> list[str]:
    found = stack.collect()
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(found, indent=1, default=str) + "\n")
    return stack.lines(found)


def check(args) -> Iterator[str]:
    if args.stack:
        yield from print_stack(args.json)
        return
    if not args.smoke:
        reason = stack.no_gpu_reason()
        if reason:
            raise CheckError(f"no CUDA GPU: {reason} (on a CPU: --smoke)")
    out, work = Path(args.out), Path(args.work)
    s = Suite(SMOKE if args.smoke else GPU, out, work, float("inf"), args.smoke, child_env())
    s.slack, s.earlier = SLACK, runner.prepare(work, out, keep=False)
    bound = f"each case stopped at {SLACK:g}x its estimate (at least 20 s more)"
    started = time.monotonic()
    try:
        code, line = runner.run(s, CASES, runner.plan_text(CASES, bound))
    finally:
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
    took = f"{time.monotonic() - started:.0f} s; the table: {out / 'table.md'}"
    if code:
        raise CheckError(f"{line.split(': ', 1)[1]} ({took})")
    yield f"{line.split(': ', 1)[1]} ({took})"


def main(argv: list[str] | None = None) -> int:
    return commands.run(build_parser(), check, argv, errors=(CheckError,), stream=sys.stdout)


if __name__ == "__main__":  # run as python -m nettebench check
    sys.exit(commands.moved(__spec__.name))
