"""GPU check for the fast input pipeline ([3/6]): 10-epoch resnet18 O1 and resnet50 O1 cells on
Imagenette-320-shaped synthetic data (9,469 train / 3,925 val JPEGs, shortest side 320), each
with the ``pil`` and the ``cached`` loader, timed from process start to metrics written, next to
the compute ceiling of the same step.

Goals (the issue): resnet18 O1 cached <= 12 s, steady img/s >= 90 % of the ceiling; resnet50 O1
cached <= 25 s. Runs without Snakemake (the GPU machine has none): data and store via the
package's own modules, each cell via :mod:`nettebench.benchmarks.wallclock` (a fresh trainer
process per cell), ceilings via :mod:`nettebench.benchmarks.ceiling`. Prints one table and writes
``table.md``, ``wallclock-*.json`` and ``ceilings.json`` into --out.

    PYTHONPATH=scripts python3 tests/device/pipeline_goals.py --out $OUT [--smoke]

``--smoke`` shrinks everything (tiny data, 1 epoch, CPU-capable, bf16) to check the script.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

GOAL_S = {"resnet18": 12.0, "resnet50": 25.0}
GOAL_CEILING_SHARE = 0.90


def run(command: list[str], env: dict[str, str]) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--work", default="/tmp/nettebench-pipeline")
    args = parser.parse_args()
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if args.smoke:
        size, train, val, classes = 48, 60, 20, 4
        models, precision, epochs, batch, image, workers = ("resnet18",), "bf16", 1, 8, 32, 1
    else:
        size, train, val, classes = 320, 9469, 3925, 10
        models, precision, epochs, batch, image, workers = (
            ("resnet18", "resnet50"),
            "O1",
            10,
            256,
            224,
            min(12, os.cpu_count() or 1),
        )

    data = work / "data"
    if not (data / "dataset.json").exists():
        started = time.perf_counter()
        run(
            [sys.executable, "-m", "nettebench.datasets.synthetic", "--out-dir", str(data),
             "--name", "imagenette-320-shaped", "--size", str(size), "--train-images",
             str(train), "--val-images", str(val), "--classes", str(classes)],
            env,
        )  # fmt: skip
        print(f"data: {time.perf_counter() - started:.1f} s", flush=True)

    lines = [
        "| model | loader | process s | wall_s | epochs s | steady img/s | ceiling img/s | "
        "share | data wait | top-1 | goal |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ceilings = {}
    for model in models:
        trainer = ["--model", model, "--precision", precision, "--epochs", str(epochs),
                   "--batch-size", str(batch), "--image-size", str(image),
                   "--workers", str(workers)]  # fmt: skip
        result = out / f"wallclock-{model}.json"
        subprocess.run(
            [sys.executable, "-m", "nettebench.benchmarks.wallclock",
             "--data", str(data / "dataset.json"),
             "--out-dir", str(work / model), "--store", str(work / "store"),
             "--json", str(result), "--", *trainer],
            env=env,
        )  # fmt: skip
        ceiling_file = out / f"ceiling-{model}.json"
        run(
            [sys.executable, "-m", "nettebench.benchmarks.ceiling",
             "--model", model, "--precision", precision,
             "--batch-size", str(batch), "--image-size", str(image), "--num-classes",
             str(classes), "--out", str(ceiling_file)],
            env,
        )  # fmt: skip
        ceiling = json.loads(ceiling_file.read_text()).get("img_s")
        ceilings[model] = ceiling
        for row in json.loads(result.read_text())["rows"]:
            img_s = row.get("train_img_s")
            share = img_s / ceiling if img_s and ceiling else None
            wall = row.get("wall_s")
            goal = ""
            if "cached" in row["variant"] and wall is not None and not args.smoke:
                met = wall <= GOAL_S[model] and (
                    model != "resnet18" or (share or 0) >= GOAL_CEILING_SHARE
                )
                goal = f"{'met' if met else 'missed'} (<= {GOAL_S[model]:.0f} s)"
            lines.append(
                f"| {model} | {row['variant']} | {_f(row.get('process_s'), '.1f')} | "
                f"{_f(wall, '.1f')} | {_f(row.get('time_for_epochs_s'), '.1f')} | "
                f"{_f(img_s, ',.0f')} | {_f(ceiling, ',.0f')} | {_f(share, '.0%')} | "
                f"{_f(row.get('data_wait_share'), '.1%')} | {_f(row.get('final_top1'), '.1f')} | "
                f"{goal} |"
            )
    table = "\n".join(lines)
    print(table, flush=True)
    (out / "table.md").write_text(table + "\n")
    (out / "ceilings.json").write_text(json.dumps(ceilings, indent=1))
    return 0


def _f(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


if __name__ == "__main__":
    sys.exit(main())
