"""GPU check for profiling: resnet18 at O0 and O3, 20 profiled steps each, with the torch backend
(and nsys when it is on PATH), on Imagenette-shaped synthetic data.

Runs without Snakemake (the GPU machine has none): ``python -m nettebench.profiling`` in a fresh
process per profile, as the workflow's cell_profile rule runs it. Prints each profile's top-5
kernels and its category shares. Works under --work (/tmp): ``profiles/<backend>-<mode>/``
(every file the profile command writes, except the nsys report and traces when they are large),
the logs, and the tables of nettebench.report.tables.kernels (``top_kernels.md``,
``kernel_categories.csv``, ...). Writes into --out only ``summary.md`` (what is printed),
``top_kernels.md`` and ``profiles.tgz`` (all of the working folder): tests/device/out_files.py.

    PYTHONPATH=scripts python3 tests/device/profile_modes.py --out $OUT [--smoke]

Needs torch, torchvision, numpy, pandas, Pillow and tqdm. ``--smoke`` runs on the CPU with tiny
data (O0 and bf16: a CPU cannot run O3) to check the script itself.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import out_files  # tests/device/, beside this script

TOP = 5
BIG_FILE = 50 * 2**20  # leave files larger than this out of --out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--budget-s", type=float, default=420, help="stop starting new profiles")
    parser.add_argument("--work", default="/tmp/nettebench-profile-modes")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(args.work, ignore_errors=True)
    work = Path(args.work) / "profiles"  # working files: tarred into --out at the end
    work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    if args.smoke:
        size, train, classes, modes = 48, 60, 4, ("O0", "bf16")
        cell = ["--batch-size", "8", "--image-size", "32", "--workers", "1"]
        window = ["--warmup-steps", "1", "--steps", "3", "--threads", "2"]
    else:
        size, train, classes, modes = 160, 3000, 10, ("O0", "O3")
        cell = ["--batch-size", "256", "--image-size", "224", "--workers", "12"]
        window = ["--warmup-steps", "10", "--steps", "20"]
    backends = ["torch"] + (["nsys"] if shutil.which("nsys") and not args.smoke else [])
    data = Path("/tmp/nettebench-profile-data")
    t0 = time.time()
    subprocess.run(
        [sys.executable, "-m", "nettebench.datasets", "synthetic", "--out-dir", str(data),
         "--name", "synthetic", "--size", str(size), "--train-images", str(train),
         "--val-images", "40", "--classes", str(classes)],
        check=True, env=env, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    print(f"data: {time.time() - t0:.1f} s; backends: {', '.join(backends)}", flush=True)

    lines: list[str] = []
    summaries = []
    for backend in backends:
        for mode in modes:
            if time.time() - started > args.budget_s:
                print(f"budget spent: skipping {backend} {mode}", flush=True)
                continue
            target = work / f"{backend}-{mode}"
            t0 = time.time()
            result = subprocess.run(
                [sys.executable, "-m", "nettebench.profiling", "--data", str(data / "dataset.json"),
                 "--out-dir", str(target), "--backend", backend, "--model", "resnet18",
                 "--precision", mode, *cell, *window],
                env=env, capture_output=True, text=True,
            )  # fmt: skip
            (work / f"{backend}-{mode}.log").write_text(result.stdout + result.stderr)
            took = time.time() - t0
            if result.returncode != 0 or not (target / "profile.json").exists():
                lines += [f"## {backend} {mode}: FAILED ({took:.0f} s)", "```",
                          (result.stdout + result.stderr)[-2000:], "```", ""]  # fmt: skip
                print("\n".join(lines[-5:]), flush=True)
                continue
            summaries.append(target / "profile.json")
            block = describe(target, backend, mode, took)
            lines += block
            print("\n".join(block), flush=True)
            prune(target)

    if summaries:
        subprocess.run(
            [sys.executable, "-m", "nettebench.report", "kernel-tables", "--out-dir", str(work),
             *map(str, summaries)],
            env=env, check=False,
        )  # fmt: skip
        if (work / "top_kernels.md").exists():
            shutil.copy(work / "top_kernels.md", out / "top_kernels.md")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    out_files.tar(out / "profiles.tgz", work)
    print(f"total: {time.time() - started:.0f} s", flush=True)
    out_files.check(out)


def describe(target: Path, backend: str, mode: str, took: float) -> list[str]:
    """The top kernels (or CPU operators, on a CPU) and the category shares of one profile."""
    record = json.loads((target / "profile.json").read_text())
    window, totals = record["window"], record["totals"]
    head = (
        f"## {backend} resnet18 {mode}: {record['status']}, {window['steps_profiled']} steps, "
        f"batch {window['batch_size']}, {window['ms_per_step'] or 0:.1f} ms/step wall, "
        f"GPU time {totals.get('gpu_time_ms', 0) / max(window['steps_profiled'], 1):.1f} ms/step, "
        f"{record['device']['name']} ({took:.0f} s with start-up)"
    )
    lines = [head, ""]
    kernels = read(target / "kernels.csv")
    if kernels:
        lines += [
            "| kernel | category | calls | total ms | avg us | share |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for row in kernels[:TOP]:
            lines.append(
                f"| `{row['name'][:110]}` | {row['category']} | {row['calls']} | "
                f"{float(row['total_ms']):.2f} | {float(row['avg_us']):.1f} | "
                f"{float(row['share_pct']):.1f} % |"
            )
    else:
        lines += [
            "| CPU operator | category | calls | self ms | share |",
            "|---|---|---:|---:|---:|",
        ]
        for row in read(target / "cpu_ops.csv")[:TOP]:
            lines.append(
                f"| `{row['name'][:110]}` | {row['category']} | {row['calls']} | "
                f"{float(row['self_ms'] or 0):.2f} | {float(row['share_pct']):.1f} % |"
            )
    shares = ", ".join(
        f"{row['category']} {float(row['share_pct']):.1f} % "
        f"({float(row['ms_per_step'] or 0):.2f} ms)"
        for row in read(target / "categories.csv")
    )
    lines += ["", f"categories ({record['category_source']}, per step): {shares}", ""]
    return lines


def read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def prune(target: Path) -> None:
    """Keep --out small: drop files over BIG_FILE (a large nsys report, the decoded store)."""
    for path in sorted(target.rglob("*"), reverse=True):
        if path.is_file() and path.stat().st_size > BIG_FILE:
            print(f"left out of --out: {path} ({path.stat().st_size / 2**20:.0f} MiB)")
            path.unlink()


if __name__ == "__main__":
    main()
