"""Read a Chrome trace as torch.profiler (Kineto) writes it, and summarise it.

The trace is the one source of the torch backend's tables, so what the tables say can always be
checked against what Perfetto shows. Kineto files every event under a category (``cat``): GPU
work (``kernel``, ``gpu_memcpy``, ``gpu_memset``; ``Kernel``/``Memcpy``/``Memset`` in older
versions), CUDA API calls (``cuda_runtime``, ``cuda_driver``; ``Runtime``) and CPU-side
operators (``cpu_op``, ``user_annotation``; ``Operator``). Python frames, flow arrows and GPU-side
copies of annotations are left out.

A CPU operator's *self* time is its duration minus that of the operators directly inside it on
the same thread, which is what ``torch.profiler``'s ``self_cpu_time_total`` reports; the sum of
self times on a thread is the time that thread spent inside any traced range. Each training step
is a ``ProfilerStep#<n>`` range (one per ``profiler.step()``), which is how the window's steps are
counted and timed.

Standard library only.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nettebench.profiling import SOURCE_CPU, SOURCE_GPU
from nettebench.profiling.summaries import (
    Stat,
    Tables,
    category_rows,
    collect,
    cpu_op_rows,
    timing_rows,
)

GPU = "gpu"
API = "api"
CPU = "cpu"
KIND_BY_CATEGORY = {
    "kernel": GPU,
    "gpu_memcpy": GPU,
    "gpu_memset": GPU,
    "memcpy": GPU,
    "memset": GPU,
    "cuda_runtime": API,
    "cuda_driver": API,
    "runtime": API,
    "cpu_op": CPU,
    "operator": CPU,
    "user_annotation": CPU,
}
STEP_NAME = re.compile(r"^ProfilerStep#\d+$")
STEP_LABEL = "ProfilerStep*"  # all steps in one row of the CPU operator table, as torch does


@dataclass(frozen=True)
class Event:
    name: str
    kind: str  # GPU, API or CPU
    ts_us: float
    dur_us: float
    pid: Any
    tid: Any


@dataclass
class TraceSummary:
    tables: Tables
    categories: list[dict[str, Any]]
    category_source: str
    steps_profiled: int
    steps_span_ms: float  # sum of the ProfilerStep ranges' durations
    totals: dict[str, float]


def read_events(trace: Mapping[str, Any]) -> list[Event]:
    """The complete ("X") events of the kinds above, in file order."""
    events = []
    for raw in trace.get("traceEvents", []):
        if raw.get("ph") != "X":
            continue
        kind = KIND_BY_CATEGORY.get(str(raw.get("cat", "")).lower())
        if kind is None:
            continue
        events.append(
            Event(
                name=str(raw.get("name", "")),
                kind=kind,
                ts_us=float(raw.get("ts", 0.0)),
                dur_us=max(float(raw.get("dur", 0.0)), 0.0),
                pid=raw.get("pid"),
                tid=raw.get("tid"),
            )
        )
    return events


def self_times(events: Iterable[Event]) -> list[tuple[Event, float]]:
    """Each CPU event with its self time: its duration minus its direct children's, per thread.

    A child is an event that starts inside its parent; one that outlasts its parent (clock
    rounding) counts only up to the parent's end.
    """
    by_thread: dict[tuple[Any, Any], list[Event]] = defaultdict(list)
    for event in events:
        if event.kind == CPU:
            by_thread[(event.pid, event.tid)].append(event)
    result: list[tuple[Event, float]] = []
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e.ts_us, -e.dur_us))
        stack: list[list[Any]] = []  # [event, end, children time]

        def close(entry) -> None:
            result.append((entry[0], max(entry[0].dur_us - entry[2], 0.0)))

        for event in thread_events:
            while stack and event.ts_us >= stack[-1][1]:
                close(stack.pop())
            if stack:
                parent = stack[-1]
                parent[2] += min(event.ts_us + event.dur_us, parent[1]) - event.ts_us
            stack.append([event, event.ts_us + event.dur_us, 0.0])
        while stack:
            close(stack.pop())
    return result


def summarise(trace: Mapping[str, Any]) -> TraceSummary:
    """The kernel, API and CPU operator tables of a trace, its categories and totals."""
    events = read_events(trace)
    kernels = timing_rows(
        collect((e.name, e.dur_us) for e in events if e.kind == GPU).values(),
        with_category=True,
    )
    api = timing_rows(
        collect((e.name, e.dur_us) for e in events if e.kind == API).values(),
        with_category=False,
    )
    stats: dict[str, Stat] = {}
    thread_self: dict[tuple[Any, Any], float] = defaultdict(float)
    steps = []
    for event, self_us in self_times(events):
        name = event.name
        if STEP_NAME.match(name):
            steps.append(event)
            name = STEP_LABEL
        stats.setdefault(name, Stat(name)).add(event.dur_us, self_us)
        thread_self[(event.pid, event.tid)] += self_us
    cpu_ops = cpu_op_rows(stats.values())
    step_threads = {(e.pid, e.tid) for e in steps}
    if kernels:
        source, rows, column = SOURCE_GPU, kernels, "total_ms"
    else:
        source, rows, column = SOURCE_CPU, cpu_ops, "self_ms"
    totals = {
        "gpu_time_ms": sum(r["total_ms"] for r in kernels),
        "api_time_ms": sum(r["total_ms"] for r in api),
        "cpu_self_ms": sum(thread_self.values()) / 1000,
        "step_thread_self_ms": sum(thread_self[t] for t in step_threads) / 1000,
    }
    return TraceSummary(
        tables=Tables(kernels=kernels, api=api, cpu_ops=cpu_ops),
        categories=category_rows(rows, source=source, time_column=column, steps=len(steps)),
        category_source=source,
        steps_profiled=len(steps),
        steps_span_ms=sum(e.dur_us for e in steps) / 1000,
        totals=totals,
    )
