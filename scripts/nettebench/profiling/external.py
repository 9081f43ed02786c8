"""What the nsys and nvprof backends share: the window run inside the tool, and its handover.

An external profiler runs a second ``python -m nettebench profiling`` process (the *inner* run)
under itself. The inner run warms up untraced, then opens the tool's capture range with
``cudaProfilerStart`` (``torch.cuda.profiler.start``), runs the window with one NVTX range per step
(``ProfilerStep#<n>``, as torch.profiler names them) and, for nsys, PyTorch operators as NVTX
ranges (``torch.autograd.profiler.emit_nvtx``), closes the range with ``cudaProfilerStop`` and
writes ``window.json`` for the outer process, which turns the tool's reports into the tables.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from nettebench.vocabulary.atomic import write_json_atomic

WINDOW_FILE = "window.json"


if TYPE_CHECKING:  # only for annotations: window imports the trainer, which imports torchvision
    from nettebench.profiling.window import Window, Workload


class ToolFailed(RuntimeError):
    """An external profiler or its report step failed; the message holds its command and output."""


def run_inner(workload: Workload, window: Window, work_dir: Path, *, operator_ranges: bool) -> None:
    """The inner run: warm-up, then the window inside the tool's capture range."""

    workload.run(window.warmup_steps)
    torch.cuda.profiler.start()
    try:
        ranges = (
            torch.autograd.profiler.emit_nvtx(record_shapes=False)
            if operator_ranges
            else contextlib.nullcontext()
        )
        with ranges:
            workload.timed_window(
                window, around_step=lambda i: torch.cuda.nvtx.range(f"ProfilerStep#{i}")
            )
    finally:
        torch.cuda.profiler.stop()
    write_json_atomic(
        work_dir / WINDOW_FILE,
        {**window.as_dict(), "step_spans_s": window.step_spans_s},
    )


def read_window(work_dir: Path, window: Window) -> None:
    """Fill ``window`` from what the inner run wrote."""
    path = work_dir / WINDOW_FILE
    if not path.is_file():
        raise ToolFailed(f"the profiled run wrote no {path}: see the log above for why")
    data = json.loads(path.read_text())
    window.batch_size = data["batch_size"]
    window.wall_s = data["wall_s"]
    window.step_spans_s = [tuple(span) for span in data["step_spans_s"]]


def inner_command(argv: list[str], backend: str) -> list[str]:
    """This process's own command line, as the inner run of ``backend``."""
    return [sys.executable, "-m", "nettebench", "profiling", *argv, "--inner", backend]


def run_tool(command: list[str], what: str) -> str:
    """Run an external tool and echo its output into this process's log; fail with its command
    and the tail of its output."""
    result = subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    output = (result.stdout or "") + (result.stderr or "")
    print(output, flush=True)
    if result.returncode != 0:
        raise ToolFailed(
            f"{what} failed (exit status {result.returncode}): {shlex.join(command)}\n"
            f"{output[-3000:]}"
        )
    return output


def spans_trace(window: Window, tool: str) -> dict[str, Any]:
    """A Chrome trace of the window's steps alone (for a tool whose timeline stays in its own
    report file)."""
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": f"ProfilerStep#{index}",
            "pid": "steps",
            "tid": "steps",
            "ts": 1e6 * began,
            "dur": 1e6 * (ended - began),
        }
        for index, (began, ended) in enumerate(window.step_spans_s)
    ]
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"tool": tool}}
