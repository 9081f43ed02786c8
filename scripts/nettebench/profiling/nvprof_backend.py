"""The nvprof backend: the study's own tool, where it still works.

    nvprof --profile-from-start off --csv --log-file <out>/nvprof/summary.csv \\
        python -m nettebench profiling ... --inner nvprof

nvprof's summary mode prints the GPU activities and the API calls in one CSV table (what the
study's ``--print-gpu-summary`` and ``--print-api-summary`` printed apart): a header
``"Type","Time(%)","Time","Calls","Avg","Min","Max","Name"``, a row of units (``,%,ms,,us,us,us,``)
and rows typed ``GPU activities`` or ``API calls``. Only the window is captured (the inner run's
``cudaProfilerStart``/``Stop``). nvprof records no PyTorch operators (``cpu_ops.csv`` holds a header
only) and its timeline stays in its own format, so ``trace.json.gz`` holds the window's steps.

nvprof does not support GPUs of compute capability 8.0 and newer (Ampere, Hopper): there it
refuses to run, and so does this backend, naming the ones that can.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path

from nettebench.profiling.summaries import Stat, Tables, timing_rows

LOG_FILE = "summary.csv"
HEADER = ("Type", "Time(%)", "Time", "Calls", "Avg", "Min", "Max", "Name")
GPU_TYPE = "GPU activities"
API_TYPE = "API calls"
_UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def profile_command(inner: list[str], work_dir: Path) -> list[str]:
    return [
        "nvprof",
        "--profile-from-start",
        "off",
        "--csv",
        "--log-file",
        str(work_dir / LOG_FILE),
        *inner,
    ]


def read_summary(text: str) -> dict[str, dict[str, Stat]]:
    """{row type: {name: Stat}} from nvprof's ``--csv`` summary (``==PID==`` lines skipped)."""
    lines = [line for line in text.splitlines() if not line.startswith("==")]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    try:
        start = next(i for i, row in enumerate(rows) if tuple(row[:8]) == HEADER)
    except StopIteration:
        raise ValueError("no nvprof summary table (header " + ",".join(HEADER) + ")") from None
    units = rows[start + 1]
    scale = {column: _UNIT_US.get(units[i].strip(), 1.0) for i, column in enumerate(HEADER)}
    found: dict[str, dict[str, Stat]] = {}
    for row in rows[start + 2 :]:
        if len(row) < len(HEADER):
            continue
        values = dict(zip(HEADER, row, strict=False))
        stat = found.setdefault(values["Type"], {}).setdefault(values["Name"], Stat(values["Name"]))
        stat.add_summary(
            int(float(values["Calls"])),
            float(values["Time"]) * scale["Time"],
            float(values["Min"]) * scale["Min"],
            float(values["Max"]) * scale["Max"],
        )
    return found


def tables_from_summary(text: str) -> Tables:
    found = read_summary(text)

    def rows(kind: str, stats: Iterable[Stat]):
        return timing_rows(stats, with_category=kind == GPU_TYPE)

    return Tables(
        kernels=rows(GPU_TYPE, found.get(GPU_TYPE, {}).values()),
        api=rows(API_TYPE, found.get(API_TYPE, {}).values()),
        cpu_ops=[],
    )
