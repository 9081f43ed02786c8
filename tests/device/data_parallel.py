"""Device check for data-parallel cells: the same cell at 1 and 2 processes (one per GPU, NCCL),
both loaders, scaling efficiency, and a SIGINT stop + resume of a 2-process cell.

Runs without Snakemake: each cell is its job, ``python -m nettebench.benchmarks.cell_job``
(which starts torchrun's agent itself for ``--processes 2``), on Imagenette-320-shaped synthetic
data. On a machine with one GPU only the 1-process twins run (the table says the 2-process
cells are missing); with two or more, every cell runs at 1 and 2. Writes three files into
--out: ``table.md`` (the report's scaling table of these cells), ``summary.json`` (per cell:
status, img/s, wall time; the stop check: exit status, seconds to stop, the resume) and
``runs.tgz`` (every cell's metrics.json, epochs.csv, ceiling.json and log).

    PYTHONPATH=scripts python3 tests/device/data_parallel.py --out $OUT [--smoke]

``--smoke``: tiny data on the CPU, 2 gloo processes of one thread each, to check the script.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

MODES = ("O1", "bf16")
LOADERS = ("pil", "cached")


def cell_args(model, precision, loader, batch, epochs, image_size, workers, device, processes):
    return [
        "--model", model, "--precision", precision, "--loader", loader, "--batch-size",
        str(batch), "--epochs", str(epochs), "--image-size", str(image_size), "--workers",
        str(workers), "--device", device, "--processes", str(processes),
    ]  # fmt: skip


def job(data: Path, out: Path, threads: int, args: list[str]) -> list[str]:
    return [
        sys.executable, "-m", "nettebench.benchmarks.cell_job", "--data", str(data),
        "--out-dir", str(out), "--ceiling", str(out / "ceiling.json"), "--threads",
        str(threads), "--store", str(data.parent / "dp-store"), *args,
    ]  # fmt: skip


def run_cell(command: list[str], log: Path, env) -> dict:
    started = time.time()
    with open(log, "w") as handle:
        code = subprocess.call(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
    return {"exit": code, "wall_s": round(time.time() - started, 1)}


def stop_and_resume(command: list[str], out: Path, log: Path, env) -> dict:
    """SIGINT to a 2-process cell's job after its first checkpoint; then the rerun resumes."""
    with open(log, "w") as handle:
        proc = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 300
        while not (out / "checkpoint.pt").exists() and proc.poll() is None:
            if time.time() > deadline:
                proc.kill()
                return {"error": "no checkpoint within 300 s"}
            time.sleep(0.2)
        sent = time.time()
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = "hung"
    found = {"stop_exit": code, "stop_s": round(time.time() - sent, 1)}
    resumed = run_cell(command, log.with_suffix(".resume.log"), env)
    metrics = out / "metrics.json"
    if metrics.is_file():
        summary = json.loads(metrics.read_text())["summary"]
        found["resumed_from_epoch"] = summary.get("resumed_from_epoch")
    found["resume_exit"] = resumed["exit"]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--budget-s", type=float, default=420, help="stop starting new cells")
    args = parser.parse_args()
    out = Path(args.out)
    runs = Path("/tmp/nettebench-dp-runs")
    runs.mkdir(parents=True, exist_ok=True)
    started = time.time()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if args.smoke:
        size, train, val, epochs, batch, workers, image_size = 40, 96, 32, 2, 16, 0, 32
        device, modes, loaders, gpus, threads_each = "cpu", ("O0",), LOADERS, 0, 1
    else:
        import torch

        size, train, val, epochs, batch, workers, image_size = 320, 9469, 3925, 2, 256, 8, 224
        device, modes, loaders = "cuda", MODES, LOADERS
        gpus, threads_each = torch.cuda.device_count(), max(1, (os.cpu_count() or 2) // 2)
    counts = (1, 2) if args.smoke or gpus >= 2 else (1,)
    data = Path("/tmp/nettebench-dp-data")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "nettebench.datasets",
            "synthetic",
            "--out-dir",
            str(data),
            "--name",
            "dp",
            "--size",
            str(size),
            "--train-images",
            str(train),
            "--val-images",
            str(val),
        ],  # fmt: skip
        check=True,
        env=env,
    )
    info = data / "dataset.json"
    summary: dict = {"gpus": gpus, "processes": counts, "cells": {}}
    for loader in loaders:
        for precision in modes:
            for count in counts:
                if time.time() - started > args.budget_s:
                    summary["cells"][f"{loader}/{precision}/{count}"] = "skipped: budget"
                    continue
                name = f"{loader}-{precision}-p{count}"
                cell = cell_args(
                    "resnet18", precision, loader, batch, epochs, image_size, workers, device, count
                )
                result = run_cell(
                    job(info, runs / name, threads_each * count, cell), runs / f"{name}.log", env
                )
                metrics = runs / name / "metrics.json"
                if metrics.is_file():
                    record = json.loads(metrics.read_text())
                    result.update(
                        status=record["status"],
                        train_img_s=record["summary"]["train_img_s"],
                        final_top1=record["summary"]["final_top1"],
                    )
                summary["cells"][name] = result
                print(name, result, flush=True)
    if 2 in counts and time.time() - started < args.budget_s:
        cell = cell_args("resnet18", modes[0], "pil", batch, epochs + 1, image_size, workers,
                         device, 2)  # fmt: skip
        name = "stop-p2"
        summary["stop"] = stop_and_resume(
            job(info, runs / name, threads_each * 2, cell), runs / name, runs / f"{name}.log", env
        )
        print("stop", summary["stop"], flush=True)
    from nettebench.report.collect import read_cells, runs_frame
    from nettebench.report.tables.scaling import scaling_markdown

    paths = [p for p in sorted(runs.glob("*/metrics.json")) if p.parent.name != "stop-p2"]
    (out / "table.md").write_text(scaling_markdown(runs_frame(read_cells(paths))))
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    with tarfile.open(out / "runs.tgz", "w:gz") as tar:
        for path in sorted(runs.rglob("*")):
            if path.suffix in (".json", ".csv", ".log"):
                tar.add(path, arcname=str(path.relative_to(runs)))
    print(f"done in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
