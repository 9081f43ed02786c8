"""``python -m nettebench inference measure|accuracy``: one inference cell, or one trained
cell's accuracy by precision, written as one JSON record.

    python -m nettebench inference measure --data results/data/d/dataset.json \\
        --out /tmp/inference.json --model resnet50 --precision bf16 --batch-size 1
    python -m nettebench inference accuracy --data results/data/d/dataset.json \\
        --weights results/runs/.../weights.pt --out /tmp/accuracy.json --model resnet18 \\
        --variants fp32:0:0 bf16:1:0

``measure`` takes every :class:`~nettebench.study.inference_cells.InferenceSpec` parameter as an
option (the workflow passes a cell's identity, defaults omitted) and the run settings (queries,
warm-up, CPU time cap). An out-of-memory batch or a precision the device cannot run is a result
(``status`` oom or unsupported, exit status 0), as it is for a training cell. Both records carry
the environment (host, CPU capability, GPU, library versions) and the timing conditions.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import torch

from nettebench.data.pil import build_pil_loaders
from nettebench.datasets.info import load_data_root
from nettebench.inference import accuracy, measure
from nettebench.models.errors import ModelLibraryMissing
from nettebench.records import conditions, energy, environment
from nettebench.records import files as records
from nettebench.study.cell_options import CommandParser, _option_type
from nettebench.study.inference_cells import SETTINGS, InferenceSpec
from nettebench.training.cli import resolve_device
from nettebench.training.loop import peak_memory_mb, reset_peak_memory
from nettebench.training.outcome import oom_message
from nettebench.vocabulary import commands, precision
from nettebench.vocabulary.record_keys import (
    SCHEMA_VERSION,
    STATUS_OK,
    STATUS_OOM,
    STATUS_UNSUPPORTED,
)

KIND = "inference"
PEAK_MEM = {"cuda": "cuda_allocated", "cpu": "cpu_max_rss"}


def measure_cell(
    spec: InferenceSpec,
    data: str | Path,
    *,
    budget: measure.Budget,
    threads: int | None = None,
) -> dict[str, Any]:
    """Run the three phases of an inference cell (see :mod:`.measure`); return its record."""
    if threads:
        torch.set_num_threads(threads)
    device = resolve_device(spec.device)
    env = environment.collect()
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "status": STATUS_OK,
        "message": None,
        "cell": spec.as_dict(),
        "cell_id": spec.cell_id(),
        "channels_last": spec.uses_channels_last(),
        "device": environment.device_info(device),
        "environment": env,
        "budget": dataclasses.asdict(budget),
        "precision_emulated": precision.emulated_reason(
            spec.precision, device.type, env.get("bf16_native")
        ),
        "offline": None,
        "pipeline": None,
        "single_stream": None,
        "conditions": None,
        "peak_mem_mb": None,
        "peak_mem_kind": PEAK_MEM[device.type],
    }
    reason = precision.unsupported_reason(spec.precision, device.type)
    if reason:
        record.update(status=STATUS_UNSUPPORTED, message=reason)
        return record
    root = load_data_root(data)
    loaders = build_pil_loaders(
        root.train_dir,
        root.val_dir,
        image_size=spec.image_size,
        batch_size=spec.batch_size,
        workers=spec.workers,
        pin_memory=device.type == "cuda",
        skip=root.skipped,
    )
    probe = conditions.Probe(gpu=conditions.gpu_target(device))
    try:
        model = measure.InferenceModel(
            spec.model,
            len(root.classes),
            spec.precision,
            device,
            channels_last=spec.uses_channels_last(),
            compile=spec.compile,
        )
        reset_peak_memory(device)
        window = probe.start(gpu=True)
        phase = probe.start()  # each phase its own window: its GPU state and its energy
        record["offline"] = measure.offline(model, spec.batch_size, spec.image_size, budget)
        _phase_end(record["offline"], probe.stop(phase), device)
        phase = probe.start()
        record["pipeline"] = measure.pipeline(model, loaders.val, budget)
        _phase_end(record["pipeline"], probe.stop(phase), device)
        if spec.batch_size == 1:
            val = loaders.val.dataset
            queries = [val[i][0].unsqueeze(0) for i in range(min(len(val), measure.LATENCY_IMAGES))]
            phase = probe.start()
            record["single_stream"] = measure.single_stream(model, queries, budget)
            _phase_end(record["single_stream"], probe.stop(phase), device)
        record["conditions"] = probe.stop(window, gpu=True)
    except (torch.OutOfMemoryError, MemoryError) as error:
        record.update(status=STATUS_OOM, message=oom_message(spec, device, error))
    record["peak_mem_mb"] = peak_memory_mb(device)
    return record


def _phase_end(result: dict[str, Any], found: dict[str, Any], device) -> None:
    """A timed phase's own conditions (its readings are in the whole window's, not repeated)
    and its energy per image (records.energy.phase_energy)."""
    result["conditions"] = {k: v for k, v in found.items() if k != "gpu_readings"}
    result["energy"] = energy.phase_energy(found, result, device.type)


def accuracy_record(args: argparse.Namespace) -> dict[str, Any]:
    """The accuracy of one trained cell's weights in every variant (see :mod:`.accuracy`)."""
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    saved = accuracy.load_weights(args.weights)
    trained = records.read_metrics(args.trained) if args.trained else None
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": "inference_accuracy",
        "status": STATUS_OK,
        "message": None,
        "model": args.model,
        "image_size": args.image_size,
        "trained_cell": trained["cell"] if trained else None,
        "trained_cell_id": saved.get("cell_id"),
        "trained_final_top1": (trained or {}).get("summary", {}).get("final_top1"),
        "device": environment.device_info(device),
        "environment": environment.collect(),
        "rows": [],
        "conditions": None,
    }
    if saved.get("state_dict") is None:
        status = (trained or {}).get("status") or "missing"
        record.update(status=status, message=f"the trained cell has no final weights ({status})")
        return record
    root = load_data_root(args.data)
    loaders = build_pil_loaders(
        root.train_dir,
        root.val_dir,
        image_size=args.image_size,
        batch_size=args.batch_size,
        workers=args.workers,
        pin_memory=device.type == "cuda",
        skip=root.skipped,
    )
    probe = conditions.Probe(gpu=conditions.gpu_target(device))
    window = probe.start()
    record["rows"] = accuracy.evaluate_variants(
        saved["state_dict"], args.model, len(root.classes), loaders.val, device, args.variants
    )
    record["conditions"] = probe.stop(window)
    return record


def variant(text: str) -> dict[str, Any]:
    """``bf16:1:0`` -> precision bf16, channels_last on, compile off."""
    try:
        name, channels_last, compiled = text.split(":")
        precision.get(name)
        return {
            "precision": name,
            "channels_last": channels_last == "1",
            "compile": compiled == "1",
        }
    except ValueError as error:
        raise argparse.ArgumentTypeError(
            f"{text!r}: PRECISION:CHANNELS_LAST:COMPILE ({error})"
        ) from None


def build_parser() -> argparse.ArgumentParser:
    # CommandParser (study.cell_options): plain-text help, defaults shown, one-line errors, as
    # every command the README shows; its subcommands get the same class.
    parser = CommandParser(prog="python -m nettebench inference", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    run = commands.add_parser("measure", help="one inference cell: throughput and latency")
    run.add_argument("--data", required=True, help="dataset.json or a train/ + val/ folder")
    run.add_argument("--out", required=True, help="where the record (inference.json) goes")
    run.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    for key in ("latency_queries", "warmup", "max_seconds"):
        default = SETTINGS[key]
        run.add_argument(
            f"--{key.replace('_', '-')}",
            type=type(default),
            default=default,
            help=f"(default: {default})",
        )
    for field in dataclasses.fields(InferenceSpec):
        default = None if field.default is dataclasses.MISSING else field.default
        run.add_argument(
            f"--{field.name.replace('_', '-')}",
            type=_option_type(field.type),
            default=default,
            help=f"(default: {default})",
        )
    acc = commands.add_parser("accuracy", help="a trained cell's accuracy in each precision")
    acc.add_argument("--data", required=True)
    acc.add_argument("--weights", required=True, help="the trained cell's weights.pt")
    acc.add_argument("--trained", default=None, help="the trained cell's metrics.json")
    acc.add_argument("--out", required=True, help="where accuracy.json goes")
    acc.add_argument("--model", required=True)
    acc.add_argument("--image-size", type=int, default=224)
    acc.add_argument("--device", default="auto")
    acc.add_argument("--batch-size", type=int, default=SETTINGS["accuracy_batch_size"])
    acc.add_argument("--workers", type=int, default=4)
    acc.add_argument("--threads", type=int, default=None)
    acc.add_argument(
        "--variants",
        nargs="+",
        type=variant,
        default=[variant("fp32:0:0")],
        help="PRECISION:CHANNELS_LAST:COMPILE, fp32:0:0 first (the reference)",
    )
    return parser


def summary_line(record: dict[str, Any]) -> str:
    """``resnet18 bf16 batch 1 on cpu: 812 img/s on device, 95 through the pipeline, p99 ...``."""
    cell = record["cell"]
    where = record["device"]["name"]
    head = f"{cell['model']} {cell['precision']} batch {cell['batch_size']} on {where}"
    if record["status"] != STATUS_OK:
        return f"{head}: {record['status']}: {record['message']}"
    line = f"{head}: {record['offline']['img_s']:,.1f} img/s on the device"
    if record["pipeline"] and record["pipeline"]["img_s"]:
        line += f", {record['pipeline']['img_s']:,.1f} through the pipeline"
    stream = record["single_stream"]
    if stream:
        latency = stream["latency_ms"]
        line += (
            f"; SingleStream over {stream['queries']} queries: p50 {latency['median']:.2f} ms, "
            f"p90 {latency['p90']:.2f}, p99 {latency['p99']:.2f}"
        )
    return line


def main(argv: list[str] | None = None) -> int:
    """Measure or evaluate one inference cell; a model library that is not installed is one
    line and exit status 1."""
    return commands.run(build_parser(), _main, argv, errors=(ModelLibraryMissing,))


def _main(args: argparse.Namespace) -> int:
    if args.command == "accuracy":
        record = accuracy_record(args)
        for row in record["rows"]:
            print(json.dumps({k: row.get(k) for k in ("precision", "top1", "top1_diff")}))
    else:
        values = {f.name: getattr(args, f.name) for f in dataclasses.fields(InferenceSpec)}
        if values["dataset"] is None:
            values["dataset"] = load_data_root(args.data).name
        budget = measure.Budget(
            warmup=args.warmup, max_seconds=args.max_seconds, latency_queries=args.latency_queries
        )
        record = measure_cell(
            InferenceSpec(**values), args.data, budget=budget, threads=args.threads
        )
        print(summary_line(record), flush=True)
    text = json.dumps(record, indent=2, default=str) + "\n"
    records.atomic_write_text(Path(args.out), text)
    return 0


if __name__ == "__main__":  # run as python -m nettebench inference
    sys.exit(commands.moved(__spec__.name))
