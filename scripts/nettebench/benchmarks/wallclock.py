"""Benchmark: one cell end to end under each input pipeline, from process start to metrics.

:mod:`nettebench.benchmarks.loader` measures what a loader can deliver with no model; this measures
what a user waits for. Each variant runs ``python -m nettebench training`` as a fresh process (so
interpreter start, imports, model build, data setup, worker start-up, every epoch and the
writing of metrics.json all count) and prints one row per variant: the wall clock around the
process, the trainer's own ``wall_s``, the epochs' share of it, steady img/s, data-wait share,
compile time and top-1.

The ``cached`` loader's decoded store is built once first and timed on its own line: in the
workflow it is one job per dataset and resolution, shared by every cached cell.

    python -m nettebench benchmarks wallclock --data results/data/imagenette2-320/dataset.json \\
        --out-dir /tmp/wallclock -- --model resnet18 --precision O1 --epochs 10 --workers 8

Everything after ``--`` is passed to the trainer for every variant (see ``python -m
nettebench.training.cli --help``); ``--variants`` takes trainer options per variant, e.g.
``loader=pil loader=cached loader=cached,compile=true``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

from nettebench.study.cell_options import CommandParser, add_cell_options, cell_from_args
from nettebench.vocabulary import commands
from nettebench.vocabulary.atomic import write_json_atomic
from nettebench.vocabulary.cell import CellSpec

DEFAULT_VARIANTS = ("loader=pil", "loader=cached")
COLUMNS = (
    ("variant", "{}"),
    ("status", "{}"),
    ("process_s", "{:.1f}"),
    ("wall_s", "{:.1f}"),
    ("time_for_epochs_s", "{:.1f}"),
    ("steady_epoch_s", "{:.2f}"),
    ("train_img_s", "{:,.0f}"),
    ("data_wait_share", "{:.1%}"),
    ("compile_s", "{:.1f}"),
    ("final_top1", "{:.1f}"),
)


def parse_variant(text: str) -> dict[str, str]:
    """``loader=cached,compile=true`` -> {"loader": "cached", "compile": "true"}."""
    options = {}
    for part in filter(None, text.split(",")):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"expected key=value[,key=value], got {text!r}")
        options[key.strip().replace("_", "-")] = value.strip()
    return options


def build_store(data: str, store_dir: Path, trainer_args: list[str]) -> float:
    """Build the cached loader's store for the trainer's image size; return the seconds."""

    parser = argparse.ArgumentParser(allow_abbrev=False, add_help=False)
    add_cell_options(parser)
    known, _ = parser.parse_known_args(trainer_args)
    cell: CellSpec = cell_from_args(known, dataset="wallclock")
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "nettebench",
            "data",
            "store",
            "--data",
            data,
            "--out-dir",
            str(store_dir),
            "--resolution",
            str(cell.store_resolution()),
        ],
        check=True,
    )
    return time.perf_counter() - start


def run_variant(
    data: str, out_dir: Path, store_dir: Path, variant: dict[str, str], trainer_args: list[str]
) -> dict[str, Any]:
    """Run the trainer once for ``variant``; its summary plus the process's wall clock."""
    name = ",".join(f"{k}={v}" for k, v in variant.items()) or "default"
    cell_dir = out_dir / name.replace("=", "~").replace(",", "_")
    command = [
        sys.executable,
        "-m",
        "nettebench",
        "training",
        "--data",
        data,
        "--out-dir",
        str(cell_dir),
        "--retrain",  # a measurement: never the finished.json of an earlier run
    ]
    command += ["--store", str(store_dir), *trainer_args]
    for key, value in variant.items():
        command += [f"--{key}", value]
    start = time.perf_counter()
    done = subprocess.run(command)
    process_s = time.perf_counter() - start
    metrics = cell_dir / "metrics.json"
    if done.returncode != 0 or not metrics.exists():
        return {"variant": name, "status": f"failed (exit {done.returncode})"}
    record = json.loads(metrics.read_text())
    return {
        "variant": name,
        "status": record["status"],
        "process_s": process_s,
        **(record.get("summary") or {}),
    }


def format_table(rows: list[dict[str, Any]]) -> str:
    """A Markdown table of the rows (``-`` where a value is missing)."""
    header = [name for name, _ in COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = []
        for name, fmt in COLUMNS:
            value = row.get(name)
            cells.append("-" if value is None else fmt.format(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    trainer_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    own_args = argv[: argv.index("--")] if "--" in argv else argv
    parser = CommandParser(prog="python -m nettebench benchmarks wallclock", description=__doc__)
    parser.add_argument("--data", required=True, help="dataset.json or a train/ + val/ folder")
    parser.add_argument("--out-dir", required=True, help="one trainer output folder per variant")
    parser.add_argument("--variants", nargs="+", type=parse_variant, default=None)
    parser.add_argument("--store", default=None, help="decoded store (default: <out-dir>/store)")
    parser.add_argument("--json", default=None, help="also write the rows here")
    return commands.run(
        parser, lambda args: _compare(args, trainer_args), own_args, stream=sys.stdout
    )


def _compare(args: argparse.Namespace, trainer_args: list[str]) -> Generator[str, None, int]:
    """The table's lines; the exit status 1 when a variant did not end ok."""
    variants = args.variants or [parse_variant(v) for v in DEFAULT_VARIANTS]
    out_dir = Path(args.out_dir)
    store_dir = Path(args.store) if args.store else out_dir / "store"
    if any(v.get("loader") == "cached" for v in variants):
        seconds = build_store(args.data, store_dir, trainer_args)
        yield f"store: {seconds:.1f} s (once per dataset and resolution)"
    rows = [run_variant(args.data, out_dir, store_dir, v, trainer_args) for v in variants]
    yield format_table(rows)
    if args.json:
        write_json_atomic(args.json, {"trainer_args": trainer_args, "rows": rows})
    return 0 if all(row["status"] == "ok" for row in rows) else 1


if __name__ == "__main__":  # run as python -m nettebench benchmarks wallclock
    sys.exit(commands.moved(__spec__.name))
