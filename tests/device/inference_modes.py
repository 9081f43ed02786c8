"""GPU check for inference cells: resnet50 in fp32 (TF32 off), tf32, O1 (fp16 autocast), O3 (fp16
weights and activations) and bf16, batch sweep 1 / 8 / 64 / 256, next to the published numbers.

Runs without Snakemake: :func:`nettebench.inference.cli.measure_cell` in this process, on an
Imagenette-320-shaped synthetic validation split (1,024 images at 320 px, so the pipeline phase
decodes, resizes and crops real JPEGs). SingleStream at batch 1 over 1,024 queries (MLPerf's
minimum). Writes into --out at most four files: ``table.md`` (img/s on the device and through the
pipeline, batch latency, SingleStream p50/p90/p99, against ../shared/ANCHORS.md's
DeepLearningExamples V100/T4 numbers, which an H200 should exceed), ``records.tgz`` (every
inference.json), ``env.txt`` (nvidia-smi) and ``log.txt``.

    PYTHONPATH=scripts python3 tests/device/inference_modes.py --out $OUT [--smoke]

``--smoke`` shrinks everything (resnet18 at 32 px, fp32 and bf16, batches 1 and 4, a 24-image
split) so the script itself can be checked on a CPU.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

# ANCHORS.md, NVIDIA DeepLearningExamples ResNet-50 v1.5 inference: (precision, batch) -> img/s
# and, at batch 1, latency ms (average, p99), on one V100-16GB; T4 in the last column.
ANCHORS = {
    ("fp32", 1): ("V100 96 img/s, 10.37 ms avg, p99 11.73", "T4 98 img/s"),
    ("fp32", 256): ("V100 1,261 img/s", ""),
    ("O1", 1): ("V100 AMP 78 img/s, 12.78 ms avg", ""),
    ("O1", 256): ("V100 AMP 3,382 img/s", "T4 AMP 1,198 img/s"),
}
GPU_MODES = ("fp32", "tf32", "O1", "O3", "bf16")
BATCHES = (1, 8, 64, 256)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--budget-s", type=float, default=420, help="stop starting new cells")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    if args.smoke:
        model, size, val, image_size, modes, batches, device = "resnet18", 40, 24, 32, (
            "fp32", "bf16"), (1, 4), "cpu"  # fmt: skip
        queries, max_seconds, workers = 50, 2.0, 0
    else:
        model, size, val, image_size, modes, batches, device = (
            "resnet50", 320, 1024, 224, GPU_MODES, BATCHES, "cuda")  # fmt: skip
        queries, max_seconds, workers = 1024, 30.0, 8
    data = Path("/tmp/nettebench-inference-data")
    subprocess.run(
        [sys.executable, "-m", "nettebench.datasets", "synthetic", "--out-dir", str(data), "--name",
         "inference-synthetic", "--size", str(size), "--train-images", "10", "--val-images",
         str(val)],
        check=True,
    )  # fmt: skip
    (out / "env.txt").write_text(_smi())

    from nettebench.inference import cli, measure
    from nettebench.study.inference_cells import InferenceSpec

    budget = measure.Budget(warmup=10, max_seconds=max_seconds, latency_queries=queries)
    records = out / "records"
    records.mkdir(exist_ok=True)
    log = []
    for mode in modes:
        for batch in batches:
            if time.time() - started > args.budget_s:
                log.append(f"budget spent: skipping {mode} batch {batch}")
                continue
            spec = InferenceSpec("inference-synthetic", model=model, precision=mode,
                                 batch_size=batch, image_size=image_size, workers=workers,
                                 device=device)  # fmt: skip
            t0 = time.time()
            record = cli.measure_cell(spec, data / "dataset.json", budget=budget)
            (records / f"{mode}-batch{batch}.json").write_text(
                json.dumps(record, indent=2, default=str)
            )
            log.append(f"{cli.summary_line(record)} ({time.time() - t0:.1f} s)")
            print(log[-1], flush=True)
    table = render_table(records, model, modes, batches)
    (out / "table.md").write_text(table)
    print(table)
    with tarfile.open(out / "records.tgz", "w:gz") as tar:
        tar.add(records, arcname="records")
    for path in records.iterdir():
        path.unlink()
    records.rmdir()
    log.append(f"total: {time.time() - started:.1f} s")
    (out / "log.txt").write_text("\n".join(log) + "\n")


def render_table(records: Path, model: str, modes, batches) -> str:
    lines = [
        f"{model}: img/s on the device (median [95 % interval]), through the validation "
        "pipeline, batch latency; SingleStream p50/p90/p99 at batch 1; published references.",
        "",
        "| precision | batch | status | img/s device | img/s pipeline | data wait | batch ms | "
        "SingleStream p50 / p90 / p99 ms (queries) | peak MB | published (ANCHORS.md) |",
        "|---|---:|---|---:|---:|---:|---:|---|---:|---|",
    ]
    for mode in modes:
        for batch in batches:
            path = records / f"{mode}-batch{batch}.json"
            if not path.exists():
                lines.append(f"| {mode} | {batch} | not run | | | | | | | |")
                continue
            record = json.loads(path.read_text())
            anchor = " / ".join(a for a in ANCHORS.get((mode, batch), ()) if a)
            if record["status"] != "ok":
                lines.append(f"| {mode} | {batch} | {record['status']} | | | | | | | {anchor} |")
                continue
            offline, pipe, stream = record["offline"], record["pipeline"], record["single_stream"]
            latency = ""
            if stream:
                ms = stream["latency_ms"]
                latency = (f"{ms['median']:.2f} / {ms['p90']:.2f} / {ms['p99']:.2f} "
                           f"({stream['queries']})")  # fmt: skip
            lines.append(
                f"| {mode} | {batch} | ok | {_num(offline['img_s'])}"
                f"{_interval(offline['img_s_low'], offline['img_s_high'])} | "
                f"{_num(pipe['img_s'])} | {_pct(pipe['data_wait_share'])} | "
                f"{offline['batch_ms']['median']:.2f} | {latency} | "
                f"{_num(record['peak_mem_mb'])} | {anchor} |"
            )
    return "\n".join(lines) + "\n"


def _num(value) -> str:
    if value is None:
        return ""
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _interval(low, high) -> str:
    """`` [a-b]`` (the 95 % interval of the median), or nothing when the samples were too few."""
    return "" if low is None or high is None else f" [{_num(low)}-{_num(high)}]"


def _pct(share) -> str:
    return "" if share is None else f"{100 * share:.0f}%"


def _smi() -> str:
    try:
        return subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as error:
        return f"nvidia-smi: {error}\n"


if __name__ == "__main__":
    main()
