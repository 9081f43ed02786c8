"""Profile one cell: warm up, then a window of training steps under a profiler; write summaries.

Runs with or without Snakemake::

    python -m nettebench profiling --data results/data/imagenette2-320/dataset.json \\
        --out-dir /tmp/profile --model resnet18 --precision O3 --batch-size 256 \\
        --warmup-steps 5 --steps 20 --backend torch

writes ``kernels.csv``, ``api.csv``, ``cpu_ops.csv``, ``categories.csv``, ``trace.json.gz`` and
``profile.json`` into --out-dir (see :mod:`nettebench.profiling`). The steps are the trainer's own
(:mod:`nettebench.profiling.window`), in a process of their own, so profiling never slows a timed
cell. Backends: ``torch`` (torch.profiler; the default, runs anywhere), ``nsys`` (Nsight Systems)
and ``nvprof`` (GPUs older than compute capability 8.0); one that cannot run here fails before any
work, saying why and which can. A precision the device cannot run, or a batch that does not fit,
is a result (``status`` in profile.json, empty tables, exit status 0), as for the trainer.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

import torch

from nettebench.builds import activate as libraries
from nettebench.builds.activate import LibraryError
from nettebench.datasets.info import load_data_root
from nettebench.models.errors import ModelLibraryMissing, PretrainedWeightsUnavailable
from nettebench.profiling import (
    BACKENDS,
    CATEGORIES_FILE,
    CATEGORY_COLUMNS,
    DEFAULT_BACKEND,
    DEFAULT_STEPS,
    DEFAULT_WARMUP_STEPS,
    OUTPUT_FILES,
    SOURCE_CPU,
    SOURCE_GPU,
    SUMMARY_FILE,
    TRACE_FILE,
    backends,
)
from nettebench.profiling.backends import BackendUnavailable
from nettebench.profiling.external import ToolFailed, run_inner
from nettebench.profiling.summaries import TABLE_COLUMNS, Tables, category_rows, write_csv
from nettebench.records import conditions, environment
from nettebench.study.cell_options import CommandParser, add_cell_options, cell_from_args
from nettebench.training.apex import ApexAmpUnavailable
from nettebench.training.cli import resolve_device
from nettebench.training.outcome import oom_message
from nettebench.vocabulary import commands
from nettebench.vocabulary.atomic import write_bytes_atomic, write_json_atomic
from nettebench.vocabulary.cell import CellSpec
from nettebench.vocabulary.dataset_errors import DatasetError
from nettebench.vocabulary.precision import unsupported_reason
from nettebench.vocabulary.record_keys import STATUS_OK, STATUS_OOM, STATUS_UNSUPPORTED

CATEGORY_NOTES = {
    SOURCE_GPU: "categories: GPU time of kernels and memory operations",
    SOURCE_CPU: (
        "no GPU kernels in this run (CPU device): kernels.csv and api.csv are empty and the "
        "categories are the CPU operators' self time"
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="python -m nettebench profiling", description=__doc__)
    parser.add_argument("--data", required=True, help="dataset.json or a train/ + val/ folder")
    parser.add_argument("--out-dir", required=True, help="where the summaries go")
    parser.add_argument("--backend", choices=BACKENDS, default=DEFAULT_BACKEND, help="the profiler")
    parser.add_argument(
        "--warmup-steps",
        type=int,
        default=DEFAULT_WARMUP_STEPS,
        help="untraced training steps before the window (default: %(default)s)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=DEFAULT_STEPS,
        help="training steps profiled (default: %(default)s)",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument(
        "--store", default=None, help="decoded store for loader cached (default: <out-dir>/store)"
    )
    parser.add_argument("--inner", choices=("nsys", "nvprof"), help=argparse.SUPPRESS)
    add_cell_options(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Profile one cell; a problem the user must fix is one line and exit status 1."""
    argv = list(sys.argv[1:] if argv is None else argv)  # the backend runs it again
    fix = (
        BackendUnavailable,
        ToolFailed,
        ApexAmpUnavailable,
        PretrainedWeightsUnavailable,
        ModelLibraryMissing,
        DatasetError,
        LibraryError,
    )
    return commands.run(build_parser(), lambda args: _main(args, argv), argv, errors=fix)


def _main(args: argparse.Namespace, argv: list[str]) -> int:

    # Boundary (see the package docstring): imported after activate(), because it imports
    # torchvision, and a cell's torchvision build must be first on the path before that.
    from nettebench.profiling.window import Window

    if args.steps < 1 or args.warmup_steps < 0:
        raise SystemExit("error: --steps must be >= 1 and --warmup-steps >= 0")
    if args.dataset is None:
        args.dataset = load_data_root(args.data).name
    cell = cell_from_args(args)
    libraries.activate(cell)  # a cell naming a torchvision/apex build is profiled against it
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(cell.device)
    out_dir = Path(args.out_dir)
    store_dir = Path(args.store) if args.store else out_dir / "store"
    window = Window(args.warmup_steps, args.steps, batch_size=0)
    if args.inner:
        return _inner(args.inner, cell, args.data, device, store_dir, window, out_dir)

    on_gpu = device.type == "cuda"
    backends.check(
        args.backend,
        device_type=device.type,
        capability=torch.cuda.get_device_capability(device) if on_gpu else None,
        gpu_name=torch.cuda.get_device_name(device) if on_gpu else None,
    )
    record = _record(cell, args.backend, device)
    reason = unsupported_reason(cell.precision, device.type)
    if reason:
        return _write(out_dir, record, window, status=STATUS_UNSUPPORTED, message=reason)
    probe = conditions.Probe(gpu=conditions.gpu_target(device))  # warm-up and window
    started = probe.start(gpu=True)
    try:
        result = _profile(args.backend, argv, cell, args.data, device, store_dir, window, out_dir)
        record["conditions"] = probe.stop(started, gpu=True)
    except (torch.OutOfMemoryError, MemoryError) as error:
        message = oom_message(cell, device, error)
        return _write(out_dir, record, window, status=STATUS_OOM, message=message)
    return _write(out_dir, record, window, status=STATUS_OK, message=None, **result)


def _inner(backend, cell, data, device, store_dir, window, out_dir) -> int:
    """The run an external profiler starts (see nettebench.profiling.external)."""
    # Boundary (see the package docstring): imported after activate(), because it imports
    # torchvision, and a cell's torchvision build must be first on the path before that.
    from nettebench.profiling.window import Workload

    workload = Workload(cell, data, device, store_dir)
    window.batch_size = workload.batch_size
    work_dir = out_dir / backend
    work_dir.mkdir(parents=True, exist_ok=True)
    run_inner(workload, window, work_dir, operator_ranges=backend == "nsys")
    return 0


def _profile(backend, argv, cell, data, device, store_dir, window, out_dir) -> dict[str, Any]:
    """Run one backend; return the tables, categories, trace and totals it found."""

    # Boundary (see the package docstring): imported after activate(), because it imports
    # torchvision, and a cell's torchvision build must be first on the path before that.
    from nettebench.profiling import external, nsys_backend, nvprof_backend, torch_backend

    # Boundary (see the package docstring): imported after activate(), because it imports
    # torchvision, and a cell's torchvision build must be first on the path before that.
    from nettebench.profiling.window import Workload

    if backend == "torch":
        workload = Workload(cell, data, device, store_dir)
        window.batch_size = workload.batch_size
        summary, trace, tool = torch_backend.profile(workload, window)
        return dict(
            tables=summary.tables,
            categories=summary.categories,
            category_source=summary.category_source,
            trace=trace,
            tool=tool,
            steps_profiled=summary.steps_profiled,
            steps_span_ms=summary.steps_span_ms,
            totals=summary.totals,
        )

    work_dir = out_dir / backend
    work_dir.mkdir(parents=True, exist_ok=True)
    inner = external.inner_command(argv, backend)
    version = external.run_tool([backend, "--version"], f"{backend} --version").strip()
    if backend == "nsys":
        external.run_tool(nsys_backend.profile_command(inner, work_dir), "nsys profile")
        external.read_window(work_dir, window)
        external.run_tool(nsys_backend.stats_command(work_dir), "nsys stats")
        reports = {}
        for report in nsys_backend.REPORTS:
            path = nsys_backend.stats_file(work_dir, report)
            reports[report] = path.read_text() if path.is_file() else ""
        tables = nsys_backend.tables_from_stats(reports)
        trace = nsys_backend.trace_from_gpu_trace(reports["cuda_gpu_trace"])
    else:
        external.run_tool(nvprof_backend.profile_command(inner, work_dir), "nvprof")
        external.read_window(work_dir, window)
        tables = nvprof_backend.tables_from_summary(
            (work_dir / nvprof_backend.LOG_FILE).read_text()
        )
        trace = external.spans_trace(window, "nvprof")
    steps = len(window.step_spans_s)
    return dict(
        tables=tables,
        categories=category_rows(
            tables.kernels, source=SOURCE_GPU, time_column="total_ms", steps=steps
        ),
        category_source=SOURCE_GPU,
        trace=gzip.compress(json.dumps(trace).encode(), mtime=0),
        tool={"name": backend, "version": version.splitlines()[-1] if version else None},
        steps_profiled=steps,
        steps_span_ms=sum(1000 * (end - begin) for begin, end in window.step_spans_s),
        totals={
            "gpu_time_ms": sum(r["total_ms"] for r in tables.kernels),
            "api_time_ms": sum(r["total_ms"] for r in tables.api),
        },
    )


def _record(cell: CellSpec, backend: str, device) -> dict[str, Any]:
    return {
        "status": None,
        "message": None,
        "backend": backend,
        "tool": None,
        "cell": cell.as_dict(),
        "cell_id": cell.cell_id(),
        "device": environment.device_info(device),
        "environment": environment.collect(),
        "window": None,
        "conditions": None,  # what else the machine did meanwhile (records.conditions)
        "category_source": None,
        "totals": {},
        "notes": [],
        "files": dict(OUTPUT_FILES),
    }


def _write(
    out_dir: Path,
    record: dict[str, Any],
    window,
    *,
    status: str,
    message: str | None,
    tables: Tables | None = None,
    categories=None,
    category_source: str | None = None,
    trace: bytes | None = None,
    tool=None,
    steps_profiled: int = 0,
    steps_span_ms: float = 0.0,
    totals=None,
) -> int:
    """Write every output file; a profile that did not run writes them empty."""

    tables = tables or Tables()
    for name, columns in TABLE_COLUMNS.items():
        write_csv(out_dir / OUTPUT_FILES[name], columns, getattr(tables, name))
    write_csv(out_dir / CATEGORIES_FILE, CATEGORY_COLUMNS, categories or [])
    empty_trace = gzip.compress(b'{"traceEvents": []}', mtime=0)
    write_bytes_atomic(out_dir / TRACE_FILE, trace or empty_trace)
    record.update(
        status=status,
        message=message,
        tool=tool,
        window={
            **window.as_dict(),
            "steps_profiled": steps_profiled,
            "steps_span_ms": steps_span_ms,
        },
        category_source=category_source,
        totals=totals or {},
    )
    if category_source:
        record["notes"].append(CATEGORY_NOTES[category_source])
    if record["backend"] == "nsys":
        record["notes"].append(
            "cpu_ops.csv: operators as NVTX ranges (emit_nvtx), inclusive times only; the "
            "timeline is nsys/report.nsys-rep (Nsight Systems), trace.json.gz its GPU part"
        )
    if record["backend"] == "nvprof":
        record["notes"].append(
            "nvprof records no PyTorch operators (cpu_ops.csv is empty); trace.json.gz holds "
            "the window's steps only"
        )
    write_json_atomic(out_dir / SUMMARY_FILE, record)
    line = f"{status}: {record['cell']['model']} {record['cell']['precision']}"
    if status == STATUS_OK:
        line += (
            f", {steps_profiled} steps profiled with {record['backend']} ({window.wall_s:.2f} s)"
        )
    else:
        line += f": {message}"
    print(line, file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":  # run as python -m nettebench profiling
    sys.exit(commands.moved(__spec__.name))
