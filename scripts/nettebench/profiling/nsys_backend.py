"""The nsys backend: Nsight Systems records the window, ``nsys stats`` reports become the tables.

    nsys profile --trace=cuda,nvtx --capture-range=cudaProfilerApi --capture-range-end=stop \\
        --output <out>/nsys/report python -m nettebench profiling ... --inner nsys
    nsys stats --report cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_api_sum,nvtx_sum,\\
        cuda_gpu_trace --format csv --output <out>/nsys/stats <out>/nsys/report.nsys-rep

Only the window is captured (see :mod:`nettebench.profiling.external`). The kernel table merges
``cuda_gpu_kern_sum`` (kernels) and ``cuda_gpu_mem_time_sum`` (memory copies and sets, as
nvprof's GPU summary did); ``cuda_api_sum`` is the API table; ``nvtx_sum`` over the operator
ranges ``emit_nvtx`` opens gives the CPU operator table, with inclusive times only (NVTX knows no
self time); ``cuda_gpu_trace`` becomes ``trace.json.gz``. ``report.nsys-rep`` stays beside them
for the Nsight Systems GUI.

The CSV layout is the one the reports declare in Nsight Systems' own report scripts: a header
row such as ``"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)",
"Max (ns)","StdDev (ns)","Name"``, then one row per name. Units are read from the header, and
the older layout (``Time(%)``, ``Average``, ``Minimum``, ``Maximum``, nanoseconds) is read too.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from nettebench.profiling.summaries import Stat, Tables, cpu_op_rows, timing_rows

REPORTS = (
    "cuda_gpu_kern_sum",
    "cuda_gpu_mem_time_sum",
    "cuda_api_sum",
    "nvtx_sum",
    "cuda_gpu_trace",
)
REPORT_BASE = "report"  # nsys writes report.nsys-rep
STATS_BASE = "stats"  # nsys stats writes stats_<report>.csv
_UNIT_US = {"ns": 1e-3, "us": 1.0, "μs": 1.0, "ms": 1e3, "s": 1e6}
_CALLS = ("Instances", "Num Calls", "Count", "Calls", "Operations")
_NAMES = ("Name", "Operation", "Range")
# emit_nvtx names a range "aten::add_, seq = 12" or "aten::add_, op_id = 3, sizes = [...]".
_NVTX_SUFFIX = re.compile(r",\s*(seq|op_id|sizes|input_op_ids|stack)\s*=.*$")
_STEP_RANGE = re.compile(r"^ProfilerStep#\d+$")


def profile_command(inner: list[str], work_dir: Path) -> list[str]:
    return [
        "nsys",
        "profile",
        "--trace=cuda,nvtx",
        "--capture-range=cudaProfilerApi",
        "--capture-range-end=stop",
        "--sample=none",
        "--cpuctxsw=none",
        "--force-overwrite=true",
        f"--output={work_dir / REPORT_BASE}",
        *inner,
    ]


def stats_command(work_dir: Path) -> list[str]:
    return [
        "nsys",
        "stats",
        "--report",
        ",".join(REPORTS),
        "--format",
        "csv",
        "--force-export=true",
        "--output",
        str(work_dir / STATS_BASE),
        str(work_dir / f"{REPORT_BASE}.nsys-rep"),
    ]


def stats_file(work_dir: Path, report: str) -> Path:
    return work_dir / f"{STATS_BASE}_{report}.csv"


# ------------------------------------------------------------------------------------- parsing


def read_stats_csv(text: str) -> list[dict[str, str]]:
    """The rows of one ``nsys stats --format csv`` report (lines before the header skipped; a
    report with no data gives no rows)."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        fields = next(csv.reader([line]), [])
        if any(f in _NAMES for f in fields) and any("Time" in f or "Start" in f for f in fields):
            return list(csv.DictReader(io.StringIO("\n".join(lines[index:]))))
    return []


def _column(row: Mapping[str, str], *prefixes: str) -> tuple[str, float] | None:
    """(column name, microseconds per unit) of the first column starting with a prefix."""
    for prefix in prefixes:
        for key in row:
            if key is not None and (key == prefix or key.startswith(prefix + " (")):
                unit = re.search(r"\((\w+)\)$", key)
                return key, _UNIT_US.get(unit.group(1), 1e-3) if unit else 1e-3
    return None


def _number(text: Any) -> float:
    return float(str(text).replace(",", "").strip() or 0)


def summary_stats(rows: Iterable[Mapping[str, str]], rename=None) -> dict[str, Stat]:
    """One Stat per name from a *_sum report's rows (``rename`` maps a name to its label)."""
    stats: dict[str, Stat] = {}
    for row in rows:
        name_key = next((k for k in _NAMES if k in row), None)
        total = _column(row, "Total Time")
        minimum = _column(row, "Min", "Minimum")
        maximum = _column(row, "Max", "Maximum")
        calls = next((k for k in _CALLS if k in row), None)
        if not (name_key and total and minimum and maximum and calls):
            raise ValueError(f"not an nsys summary row (columns {sorted(row)})")
        name = row[name_key] if rename is None else rename(row[name_key])
        stats.setdefault(name, Stat(name)).add_summary(
            int(_number(row[calls])),
            _number(row[total[0]]) * total[1],
            _number(row[minimum[0]]) * minimum[1],
            _number(row[maximum[0]]) * maximum[1],
        )
    return stats


def operator_name(nvtx_range: str) -> str:
    """An operator's name from its emit_nvtx range; all step ranges under one label."""
    name = _NVTX_SUFFIX.sub("", nvtx_range).strip()
    return "ProfilerStep*" if _STEP_RANGE.match(name) else name


def tables_from_stats(reports: Mapping[str, str]) -> Tables:
    """kernels, API and CPU operator rows from the text of the *_sum reports."""
    kernels = summary_stats(read_stats_csv(reports.get("cuda_gpu_kern_sum", "")))
    memory = summary_stats(read_stats_csv(reports.get("cuda_gpu_mem_time_sum", "")))
    for name, stat in memory.items():
        kernels.setdefault(name, Stat(name)).add_summary(
            stat.calls, stat.total_us, stat.min_us, stat.max_us
        )
    api = summary_stats(read_stats_csv(reports.get("cuda_api_sum", "")))
    operators = summary_stats(read_stats_csv(reports.get("nvtx_sum", "")), rename=operator_name)
    return Tables(
        kernels=timing_rows(kernels.values(), with_category=True),
        api=timing_rows(api.values(), with_category=False),
        cpu_ops=cpu_op_rows(operators.values()),
    )


def trace_from_gpu_trace(text: str) -> dict[str, Any]:
    """A Chrome trace (one track per GPU stream) from ``cuda_gpu_trace``'s rows."""
    rows = read_stats_csv(text)
    events = []
    first = None
    for row in rows:
        start = _column(row, "Start")
        duration = _column(row, "Duration")
        if not (start and duration):
            continue
        ts = _number(row[start[0]]) * start[1]
        first = ts if first is None else min(first, ts)
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": row.get("Name", ""),
                "pid": row.get("Device", "GPU"),
                "tid": f"stream {row.get('Strm', '')}",
                "ts": ts,
                "dur": _number(row[duration[0]]) * duration[1],
            }
        )
    for event in events:
        event["ts"] -= first or 0.0
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"tool": "nsys"}}
