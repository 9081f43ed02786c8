"""Profiling a cell: nvprof-style GPU kernel, CUDA API and CPU operator summaries.

The study ran ``nvprof --print-gpu-summary`` and ``--print-api-summary`` over an epoch and dumped
the output to a file too large to read. Here a profiled run is its own process, separate from the
timed cell (profiler overhead never reaches the metrics), over a short window of training steps
after a warm-up, and every backend's output becomes the same small tables:

- ``kernels.csv``: one row per GPU kernel or memory operation, nvprof's columns (calls, total,
  average, min, max time, share of GPU time) plus the kernel's category;
- ``api.csv``: CUDA runtime and driver calls (``cudaLaunchKernel``, ``cudaMemcpyAsync``, ...);
- ``cpu_ops.csv``: PyTorch operators on the CPU side (self and inclusive time);
- ``categories.csv``: the time grouped into convolution, GEMM, normalisation, elementwise,
  copies and other (:mod:`nettebench.profiling.categories`);
- ``trace.json.gz``: a trace that opens in Perfetto (ui.perfetto.dev) or chrome://tracing;
- ``profile.json``: what was profiled, how, and the totals.

Owns the command (:mod:`.cli`, ``python -m nettebench profiling``, the ``cell_profile`` rule),
the config's ``profile:`` plan (:mod:`.plan`), the window of steps (:mod:`.window`), the backends
(:mod:`.torch_backend`, :mod:`.nsys_backend`, :mod:`.nvprof_backend`, :mod:`.external`) and what
their output becomes (:mod:`.summaries`, :mod:`.trace`, :mod:`.categories`). The tables and
figure over profiled cells are :mod:`nettebench.report`'s.

This module (the file layout), :mod:`.plan` and :mod:`.categories` import nothing heavy: the
workflow imports them while it parses the config, and the report without torch. The rest may
import torch and the trainer.
"""

from __future__ import annotations

BACKENDS = ("torch", "nsys", "nvprof")
DEFAULT_BACKEND = "torch"
DEFAULT_WARMUP_STEPS = 5
DEFAULT_STEPS = 20

KERNELS_FILE = "kernels.csv"
API_FILE = "api.csv"
CPU_OPS_FILE = "cpu_ops.csv"
CATEGORIES_FILE = "categories.csv"
TRACE_FILE = "trace.json.gz"
SUMMARY_FILE = "profile.json"
OUTPUT_FILES = {
    "kernels": KERNELS_FILE,
    "api": API_FILE,
    "cpu_ops": CPU_OPS_FILE,
    "categories": CATEGORIES_FILE,
    "trace": TRACE_FILE,
    "summary": SUMMARY_FILE,
}

# Columns of kernels.csv and api.csv: nvprof's summary columns (Time(%), Time, Calls, Avg, Min,
# Max, Name), with units in the names. share_pct is the row's share of the table's total time.
KERNEL_COLUMNS = (
    "name",
    "category",
    "calls",
    "total_ms",
    "avg_us",
    "min_us",
    "max_us",
    "share_pct",
)
API_COLUMNS = ("name", "calls", "total_ms", "avg_us", "min_us", "max_us", "share_pct")
# cpu_ops.csv: self time excludes the operators an operator called; total includes them. The
# nsys backend knows operators only as NVTX ranges, so its self_ms is empty.
CPU_OP_COLUMNS = (
    "name",
    "category",
    "calls",
    "self_ms",
    "total_ms",
    "avg_self_us",
    "share_pct",
)
# categories.csv: one row per category, always all of them, in CATEGORY order.
CATEGORY_COLUMNS = ("category", "source", "calls", "total_ms", "ms_per_step", "share_pct")

# Where categories come from: GPU kernels when the run had any, else CPU operators' self time.
SOURCE_GPU = "gpu_kernels"
SOURCE_CPU = "cpu_ops"
