"""The default backend: torch.profiler (Kineto) over the window, in this process.

CUDA activities (kernels, memory copies, CUDA runtime calls) are recorded when the cell runs on a
GPU, CPU activities (PyTorch operators) always. On a CPU there are no kernels: ``kernels.csv`` and
``api.csv`` hold a header only, and the categories come from the CPU operators' self time
(``source`` says which), so a CPU profile still says where the step's time goes.

The last warm-up step is the profiler's own warm-up (``schedule(warmup=1)``): traced but thrown
away, so profiler start-up cost stays out of the window. The trace torch writes is kept as
``trace.json.gz`` and every table is computed from it (:mod:`nettebench.profiling.trace`).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, schedule

from nettebench.profiling.trace import TraceSummary, summarise
from nettebench.profiling.window import Window, Workload


def profile(workload: Workload, window: Window) -> tuple[TraceSummary, bytes, dict[str, Any]]:
    """Run the window under torch.profiler; return its summary, the gzipped trace, tool info."""

    activities = [ProfilerActivity.CPU]
    if workload.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    profiler_warmup = 1 if window.warmup_steps else 0
    workload.run(window.warmup_steps - profiler_warmup)

    with tempfile.TemporaryDirectory(prefix="nettebench-trace-") as tmp, _quiet_kineto(workload):
        raw = Path(tmp) / "trace.json"
        with torch.profiler.profile(
            activities=activities,
            schedule=schedule(wait=0, warmup=profiler_warmup, active=window.steps, repeat=1),
            on_trace_ready=lambda prof: prof.export_chrome_trace(str(raw)),
        ) as prof:
            for _ in range(profiler_warmup):
                workload.step()
                prof.step()
            workload.timed_window(window, after_step=lambda _index: prof.step())
        text = raw.read_bytes()
    summary = summarise(json.loads(text))
    tool = {"name": "torch.profiler", "version": torch.__version__}
    return summary, gzip.compress(text, mtime=0), tool


# Kineto's log levels: VERBOSE 0, INFO 1, WARNING 2, STAGE 3, ERROR 4, USDT 5.
_KINETO_ABOVE_ERRORS = "5"


@contextlib.contextmanager
def _quiet_kineto(workload: Workload) -> Iterator[None]:
    """On a CPU, Kineto (torch.profiler's tracer) still asks a CUDA build of torch for GPUs and,
    on a machine without a GPU driver, logs ``ERROR: ... DeviceProperties.cpp:56]
    gpuGetDeviceCount failed with code 35`` (cudaErrorInsufficientDriver) into every profile's
    log: harmless (the CPU trace is complete) but it reads as a failure. Kineto reads its level
    when the profiler starts, so it is raised above ERROR for that while, on a CPU only and
    unless the user set KINETO_LOG_LEVEL (set it to see Kineto's messages again)."""
    if workload.device.type != "cpu" or "KINETO_LOG_LEVEL" in os.environ:
        yield
        return
    os.environ["KINETO_LOG_LEVEL"] = _KINETO_ABOVE_ERRORS
    try:
        yield
    finally:
        del os.environ["KINETO_LOG_LEVEL"]
