"""GPU check for the trainer: resnet18 and resnet50, 2 epochs in every GPU precision mode, on
Imagenette-320-shaped synthetic data, each next to its compute ceiling.

Runs without Snakemake (the GPU machine has none): the trainer as ``python -m nettebench.training``
in a fresh process per cell (so wall times include start-up), the ceilings in this process.
Works under --work (/tmp) and writes only ``table.md`` (pipeline img/s vs ceiling vs
../shared/ANCHORS.md) and ``runs.tgz`` (every cell's metrics.json, epochs.csv, ceiling.json and
log) into --out (tests/device/out_files.py: at most 7 files come back).

    PYTHONPATH=scripts python3 tests/device/trainer_modes.py --out $OUT [--smoke]

``--smoke`` shrinks everything (tiny data, 2 modes, CPU-capable) to check the script itself.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import out_files  # tests/device/, beside this script

# ANCHORS.md, compute ceiling on one H200, batch 256 (channels_last for all but fp32).
ANCHOR_CEILING = {
    ("resnet18", "tf32"): 5461,
    ("resnet18", "O1"): 14489,
    ("resnet18", "bf16"): 13196,
    ("resnet18", "O3"): 14779,
    ("resnet50", "tf32"): 2221,
    ("resnet50", "O1"): 5765,
    ("resnet50", "bf16"): 4724,
    ("resnet50", "O3"): 4945,
}
GPU_MODES = ("O0", "tf32", "O1", "O2", "O3", "bf16")
AMP_MODES = ("O1", "O2", "O3", "bf16")  # channels_last, as the anchors measured them


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--budget-s", type=float, default=480, help="stop starting new cells")
    parser.add_argument("--work", default="/tmp/nettebench-trainer-modes")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(args.work, ignore_errors=True)  # a fresh run: no earlier cell is restored
    runs = Path(args.work) / "runs"  # working files: under /tmp, tarred into --out at the end
    runs.mkdir(parents=True, exist_ok=True)
    started = time.time()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    if args.smoke:
        size, train, val, epochs, batch, workers, modes = 48, 120, 40, 1, 16, 1, ("O0", "bf16")
        image_size, models = 32, ("resnet18",)
    else:
        size, train, val, epochs, batch, workers, modes = 320, 9469, 3925, 2, 256, 12, GPU_MODES
        image_size, models = 224, ("resnet18", "resnet50")
    data = Path("/tmp/nettebench-synthetic")
    t0 = time.time()
    subprocess.run(
        [sys.executable, "-m", "nettebench.datasets", "synthetic", "--out-dir", str(data),
         "--name", "imagenette2-320-synthetic", "--size", str(size), "--train-images",
         str(train), "--val-images", str(val)],
        check=True, env=env,
    )  # fmt: skip
    print(f"data: {time.time() - t0:.1f} s", flush=True)

    cells = [(m, p) for m in models for p in modes]
    for model, mode in cells:
        if time.time() - started > args.budget_s:
            print(f"budget spent: skipping {model} {mode}", flush=True)
            continue
        cell_dir = runs / f"{model}-{mode}"
        options = ["--channels-last", "true"] if mode in AMP_MODES else []
        t0 = time.time()
        with open(runs / f"{model}-{mode}.log", "w") as log:
            result = subprocess.run(
                [sys.executable, "-m", "nettebench.training", "--data", str(data), "--out-dir",
                 str(cell_dir), "--dataset", "imagenette2-320-synthetic", "--model", model,
                 "--precision", mode, "--batch-size", str(batch), "--epochs", str(epochs),
                 "--workers", str(workers), "--image-size", str(image_size), *options],
                stdout=log, stderr=subprocess.STDOUT, env=env, timeout=240,
            )  # fmt: skip
        print(f"train {model} {mode}: rc {result.returncode}, {time.time() - t0:.1f} s", flush=True)

    # A real out-of-memory: resnet50 fp32 at a batch no card holds is a recorded `oom` cell.
    oom_batch = 64 if args.smoke else 16384
    oom_dir = runs / f"oom-resnet50-batch{oom_batch}"
    with open(runs / "oom.log", "w") as log:
        subprocess.run(
            [sys.executable, "-m", "nettebench.training", "--data", str(data), "--out-dir",
             str(oom_dir), "--dataset", "imagenette2-320-synthetic", "--model", "resnet50",
             "--precision", "O0", "--batch-size", str(oom_batch), "--epochs", "1",
             "--max-steps", "2", "--workers", str(workers), "--image-size", str(image_size)],
            stdout=log, stderr=subprocess.STDOUT, env=env, timeout=240,
        )  # fmt: skip
    oom = json.loads((oom_dir / "metrics.json").read_text())
    print(f"oom cell: status {oom['status']}: {oom['message']}", flush=True)

    from nettebench.benchmarks.ceiling import measure_ceiling

    for model, mode in cells:
        cell_dir = runs / f"{model}-{mode}"
        if not (cell_dir / "metrics.json").exists():
            continue
        ceiling = measure_ceiling(
            model, mode, batch, image_size=image_size, channels_last=mode in AMP_MODES,
            warmup_steps=10 if not args.smoke else 2, steps=30 if not args.smoke else 3,
        )  # fmt: skip
        (cell_dir / "ceiling.json").write_text(json.dumps(ceiling, indent=2, default=str))
        print(f"ceiling {model} {mode}: {ceiling['status']} {ceiling['img_s']}", flush=True)

    table = render_table(runs, cells) + f"\noom cell: {oom['status']}: {oom['message']}\n"
    (out / "table.md").write_text(table)
    print(table)
    out_files.tar(out / "runs.tgz", runs)
    print(f"total: {time.time() - started:.1f} s")
    out_files.check(out)


def render_table(runs: Path, cells) -> str:
    lines = [
        "| model | precision | status | epoch 1 s | epoch 2 s | pipeline img/s | data wait | "
        "ceiling img/s | pipeline/ceiling | ANCHORS ceiling | ceiling/ANCHORS | top-1 | peak MB "
        "| process wall s |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for model, mode in cells:
        cell_dir = runs / f"{model}-{mode}"
        if not (cell_dir / "metrics.json").exists():
            lines.append(f"| {model} | {mode} | not run | | | | | | | | | | | |")
            continue
        record = json.loads((cell_dir / "metrics.json").read_text())
        summary = record["summary"]
        ceiling = {}
        if (cell_dir / "ceiling.json").exists():
            ceiling = json.loads((cell_dir / "ceiling.json").read_text())
        epochs = (cell_dir / "epochs.csv").read_text().splitlines()[1:]
        walls = [float(row.split(",")[8]) for row in epochs]
        pipe, ceil = summary.get("train_img_s"), ceiling.get("img_s")
        anchor = ANCHOR_CEILING.get((model, mode))
        lines.append(
            f"| {model} | {mode} | {record['status']} | "
            + " | ".join(f"{w:.1f}" for w in (walls + [float("nan")] * 2)[:2])
            + f" | {_num(pipe)} | {_pct(summary.get('data_wait_share'))} | {_num(ceil)} | "
            f"{_ratio(pipe, ceil)} | {_num(anchor)} | {_ratio(ceil, anchor)} | "
            f"{_num(summary.get('final_top1'), 1)} | {_num(summary.get('peak_mem_mb'))} | "
            f"{_num(summary.get('wall_s'), 1)} |"
        )
    return "\n".join(lines) + "\n"


def _num(value, digits=0):
    return "" if value is None else f"{value:,.{digits}f}"


def _pct(share):
    return "" if share is None else f"{100 * share:.0f}%"


def _ratio(a, b):
    return "" if not a or not b else f"{100 * a / b:.0f}%"


if __name__ == "__main__":
    main()
