"""Every timed training step in files other tools read: ``steps.csv`` and one pyperf JSON a cell.

The trainer keeps each epoch's steady steps in ``epochs.csv`` (``step_ms``,
:mod:`nettebench.records.spread`); this module writes them out in the ``tables_aggregate`` job,
after training, so no timed job is touched. What the files hold and how pyperf reads them:
docs/honest-numbers.md. A ``warmup`` row (the first epoch's warm-up and every epoch's first
step, the loader's start-up) has no ``seconds``: the trainer keeps no warm-up step's time. A
pyperf value is seconds per image, so cells of different batch sizes compare; every file names
its benchmark ``train_step``, so ``python -m pyperf compare_to A.json B.json`` compares two
cells. Standard library only (pyperf itself is not needed to write its format).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from nettebench.records import files, spread
from nettebench.study.cell_options import CommandParser
from nettebench.vocabulary import commands
from nettebench.vocabulary.atomic import open_text_atomic, write_text_atomic
from nettebench.vocabulary.record_keys import STATUS_OK

STEPS_COLUMNS = ("cell_id", "cell", "epoch", "step", "phase", "seconds", "images")
BENCHMARK_NAME = "train_step"


def cell_path(metrics_path: Path) -> str:
    """The cell's path from its results folder on (``runs/<dataset>/model~.../seed~0``): from
    the folder above the dataset's, whatever tree (``results/``, a merged copy) holds it."""
    parts = metrics_path.parent.parts
    model = next((i for i, part in enumerate(parts) if part.startswith("model~")), len(parts) - 1)
    return "/".join(parts[max(model - 2, 0) :])


def step_images(total: int, steps: int, batch: int | None) -> list[int]:
    """Images of each of ``steps`` steady steps that together trained ``total``: the batch
    each, the last one short when the epoch's last batch was (a loader's partial batch)."""
    if steps == 0:
        return []
    if batch and 0 < total - batch * (steps - 1) <= batch:
        return [batch] * (steps - 1) + [total - batch * (steps - 1)]
    return [round(total / steps)] * steps


def _int(value: Any) -> int | None:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def cell_steps(metrics_path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """The record and its step rows, or None for a cell that did not train (not ``ok``) or
    whose epochs.csv keeps no step times (a record from before ``step_ms``)."""
    record = json.loads(metrics_path.read_text())
    if record.get("status") != STATUS_OK:
        return None
    summary = record.get("summary") or {}
    batch = _int(summary.get("batch_size_used"))
    with open(metrics_path.parent / files.EPOCHS_FILE, newline="", encoding="utf-8") as handle:
        epochs = list(csv.DictReader(handle))
    name = cell_path(metrics_path)
    rows: list[dict[str, Any]] = []
    for epoch in epochs:
        seconds = spread.parse_step_ms(epoch.get("step_ms"))
        if not seconds:
            continue
        run = _int(summary.get("steps_timed")) or _int(summary.get("steps_per_epoch"))
        first_steady = max((run or len(seconds)) - len(seconds), 0)
        common = {"cell_id": record.get("cell_id"), "cell": name, "epoch": _int(epoch["epoch"])}
        for step in range(1, first_steady + 1):
            rows.append({**common, "step": step, "phase": "warmup", "seconds": "", "images": ""})
        images = step_images(_int(epoch.get("train_images")) or 0, len(seconds), batch)
        for index, (step_s, step_n) in enumerate(zip(seconds, images, strict=True)):
            step = {"step": first_steady + index + 1, "phase": "steady", "seconds": f"{step_s:.6f}"}
            rows.append({**common, **step, "images": step_n})
    if not any(row["phase"] == "steady" for row in rows):
        return None
    return record, rows


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def pyperf_document(record: dict[str, Any], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """pyperf's JSON format (version 1.0): one benchmark, one run per epoch."""
    cell = record.get("cell") or {}
    environment = record.get("environment") or {}
    device = record.get("device") or {}
    metadata = {
        "name": BENCHMARK_NAME,
        "unit": "second",
        "loops": 1,
        "description": "seconds per image of each steady training step (nettebench)",
        "nettebench_cell_id": _text(record.get("cell_id")),
        "nettebench_cell": rows[0]["cell"],
        **{f"nettebench_{key}": _text(value) for key, value in cell.items() if value is not None},
    }
    names = {"host": "hostname", "git_commit": "nettebench_commit"}
    names |= {key: f"nettebench_{key}" for key in ("torch", "torchvision", "cpu_capability")}
    metadata |= {
        name: _text(environment[key]) for key, name in names.items() if environment.get(key)
    }
    if device.get("name"):
        metadata["nettebench_device"] = _text(device["name"])
    runs = []
    for epoch in sorted({row["epoch"] for row in rows}):
        values = [
            float(row["seconds"]) / row["images"]
            for row in rows
            if row["epoch"] == epoch and row["phase"] == "steady" and row["images"]
        ]
        if values:
            runs.append({"metadata": {"nettebench_epoch": str(epoch)}, "values": values})
    return {"version": "1.0", "benchmarks": [{"metadata": metadata, "runs": runs}]}


def export(metrics_paths: Iterable[str | Path], steps_csv: Path, pyperf_dir: Path) -> Iterator[str]:
    """Write steps.csv and the pyperf files; yield one log line per cell. Each file is written
    all-or-nothing: steps.csv is replaced only once every cell's rows are in it."""
    pyperf_dir.mkdir(parents=True, exist_ok=True)
    written: set[Path] = set()
    with open_text_atomic(steps_csv, newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=STEPS_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for metrics_path in map(Path, metrics_paths):
            found = cell_steps(metrics_path)
            if found is None:
                yield f"skipped {metrics_path}: not ok, or no step times (step_ms)"
                continue
            record, rows = found
            writer.writerows(rows)
            target = pyperf_dir / f"{rows[0]['cell']}.json"
            if target in written:  # the same cell path from two result trees
                target = target.with_name(f"{target.stem}.{str(record.get('cell_id'))[:12]}.json")
            written.add(target)
            write_text_atomic(target, json.dumps(pyperf_document(record, rows), indent=1) + "\n")
            steady = sum(row["phase"] == "steady" for row in rows)
            yield f"{target}: {steady} steady steps of {len(rows)}"


def main(argv: list[str] | None = None) -> int:
    parser: argparse.ArgumentParser = CommandParser(
        prog="python -m nettebench report steps",
        description="Write steps.csv (one row per training step) and one pyperf JSON per cell.",
    )
    parser.add_argument("--steps", type=Path, required=True, help="steps.csv to write")
    parser.add_argument("--pyperf-dir", type=Path, required=True, help="folder of pyperf files")
    parser.add_argument("metrics", nargs="*", help="the cells' metrics.json files")
    return commands.run(
        parser,
        lambda args: export(args.metrics, args.steps, args.pyperf_dir),
        argv,
        stream=sys.stdout,
    )


if __name__ == "__main__":  # run as python -m nettebench report steps
    sys.exit(commands.moved(__spec__.name))
