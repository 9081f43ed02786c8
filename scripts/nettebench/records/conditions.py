"""What else the machine did while a job was timed: the conditions a number was measured in.

A timed window (an epoch, a whole cell, a ceiling's steps) is bracketed by two snapshots of:

- ``/proc/stat``, per CPU, for the CPUs the job may run on (its affinity): busy and steal time;
- the CPU time of the job's own process tree (this process, its threads and every live
  descendant, such as DataLoader workers; a worker that exits and is reaped moves into its
  parent's ``cutime``, so the difference stays right);
- the load average and, under cgroup v2, the time the job's cgroup was throttled;
- on a GPU, through NVML (:mod:`.nvml`, in this process: no ``nvidia-smi`` child in a window),
  the GPU's own state: clocks, power, temperature and clock-event (throttle) reasons sampled
  every :data:`GPU_SAMPLE_S` while any window is open, the energy counter at each edge, and at
  the edges of a job's whole window the other compute processes on its GPU and their SM
  utilisation.

The difference gives the CPU time *other* processes took on the job's CPUs (busy time there
minus the job's own), the share of those CPUs' time stolen by the hypervisor, and a verdict:
``interference`` with its reasons, or not; a window in which the GPU throttled (heat, a
hardware slowdown, a power brake: :data:`.nvml.THROTTLE_REASONS`) is interference too, so the
report's ‡ marks it wherever its number is shown. A GPU at its power limit (the software power
cap) is not: that is how a GPU runs under full load, recorded as its state
(``gpu_power_cap_share``, ``gpu_power_of_limit``, ...) and never a reason. Thresholds are the
constants below. Reading the files costs well under a millisecond and happens outside the
timed regions; the process listing is asked only at the edges of a job's whole window, never
per epoch, and with ``background=True`` (the trainer's probe) in a thread of its own: the
window's summary is returned at once and its GPU part filled in when the query is back;
:func:`settle` waits for every such query (the trainer calls it before writing its record).

Only the standard library: the trainer, the ceiling and the profiler use this without the
report, and the report reads the resulting dictionaries without torch.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nettebench.records import energy, gpu_processes, nvml
from nettebench.records.gpu_processes import (  # noqa: F401 - resolve_gpu_target: the tests'
    GpuProcess,
    GpuTarget,
    resolve_gpu_target,
)
from nettebench.records.proc_reading import (  # noqa: F401 - parse_proc_stat .. : the tests'
    CpuTimes,
    _read,
    cgroup_throttled_usec,
    parse_proc_stat,
    process_ticks,
    read_process_stats,
    tree_pids,
    tree_ticks,
)

# The verdict: a window was timed under interference when, on the CPUs the job may use, other
# processes took more than this share of the time (2 cores: 0.10 = a fifth of one core) ...
OTHER_CPU_SHARE_LIMIT = 0.10
# ... and at least this much CPU time (ticks are 10 ms: a short window's noise stays below it),
OTHER_CPU_MIN_S = 0.10
# or the hypervisor stole more than this share of those CPUs' time,
STEAL_SHARE_LIMIT = 0.05
# or the cgroup was throttled for more than this share of the window,
THROTTLED_SHARE_LIMIT = 0.05
# or another process used the job's GPU at more than this SM utilisation (percent).
GPU_OTHER_UTIL_LIMIT = 5.0
# The GPU's state (clocks, power, temperature, clock events) is read this often while a window
# is open, and at its edges (a short window has its two edge readings).
GPU_SAMPLE_S = 0.1
# A GPU job's windows where NVML cannot be read: neither its state nor its neighbours are seen.
NO_NVML = "not visible: NVML (nvidia-ml-py) not installed or the driver did not answer"

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def gpu_target(device: Any) -> GpuTarget | None:
    """The job's GPU (a torch device; None for a CPU or when torch cannot name it), found by
    the UUID torch reports in NVML's listing (:func:`find_gpu`)."""
    uuid = gpu_processes.cuda_uuid(device)
    return None if uuid is None else find_gpu(uuid)


def find_gpu(device_uuid: str, module: Any = None) -> GpuTarget:
    """The :class:`GpuTarget` whose CUDA UUID is ``device_uuid``, from NVML's listing of the
    GPUs (``module``: pynvml, loaded when not given; :func:`.gpu_processes.list_gpus`), and
    only where NVML is absent or does not answer from ``nvidia-smi -L``'s. Asked once, before
    any window opens."""
    listing = gpu_processes.list_gpus(nvml.load() if module is None else module)
    if listing is None:
        listing = gpu_processes.nvidia_smi_listing()
    return resolve_gpu_target(device_uuid, listing)


# ----------------------------------------------------------------------------------- snapshots


@dataclass
class Snapshot:
    """Everything a window's summary is computed from, at one instant."""

    clock: float  # time.monotonic()
    cpus: dict[int, CpuTimes]  # the allowed CPUs' /proc/stat times
    own_ticks: int  # the job's process tree
    loadavg: float | None = None  # 1-minute load average
    throttled_usec: int | None = None
    gpu_others: list[GpuProcess] | None = None  # None: not asked or not visible
    gpu_own_visible: bool | None = None  # this job's own process is in NVML's list
    gpu_other_util: dict[int, float] | None = None  # pid -> SM % (end snapshot only)
    # NVML listed processes on the job's GPU but not the job's own, which holds a CUDA
    # context there: its PIDs are of another namespace (gVisor's NVML reports host PIDs), the
    # job is one of ``gpu_others`` and cannot be told apart
    gpu_foreign_pids: bool = False
    gpu_elsewhere: int | None = None  # MIG: processes listed for the parent GPU only (unjudged)
    own_pids: set[int] = field(default_factory=set)
    unix: float | None = None  # time.time(), to find windows of two jobs that overlapped
    gpu_query: threading.Thread | None = None  # the GPU part's process listing, when asked
    readings_from: int | None = None  # index of this edge's NVML reading in the probe's list
    energy_mj: int | None = None  # NVML's energy counter at this edge
    rapl: tuple[float, int] | None = None  # the CPU packages' energy at this edge (RaplMeter)


def summarize(start: Snapshot, end: Snapshot, *, clock_ticks: int = _CLOCK_TICKS) -> dict[str, Any]:
    """The window's conditions (:data:`CONDITION_KEYS`) from its two snapshots."""
    wall = max(end.clock - start.clock, 0.0)
    common = sorted(set(start.cpus) & set(end.cpus))
    busy = sum(end.cpus[c].busy - start.cpus[c].busy for c in common)
    steal = sum(end.cpus[c].steal - start.cpus[c].steal for c in common)
    total = sum(end.cpus[c].total - start.cpus[c].total for c in common)
    own = max(end.own_ticks - start.own_ticks, 0)
    other = max(busy - own, 0)
    capacity_s = wall * len(common)
    other_s = other / clock_ticks
    summary: dict[str, Any] = {
        "started_at": start.unix,
        "ended_at": end.unix,
        "wall_s": wall,
        "cpus": len(common),
        "own_cpu_s": own / clock_ticks,
        "other_cpu_s": other_s,
        "other_cpu_share": other_s / capacity_s if capacity_s > 0 else None,
        "steal_share": steal / total if total > 0 else None,
        "loadavg_start": start.loadavg,
        "loadavg_end": end.loadavg,
        "throttled_s": None,
        "gpu_other_processes": None,
        "gpu_other_util": None,
        "gpu_visibility": None,
        "gpu_other_memory_mib": None,
        **dict.fromkeys(nvml.GPU_STATE_KEYS),  # filled in by the probe where NVML reads them
        "cpu_energy_j": None,  # filled in by the probe where RAPL is readable
        "cpu_energy_source": None,
    }
    if start.throttled_usec is not None and end.throttled_usec is not None:
        summary["throttled_s"] = (end.throttled_usec - start.throttled_usec) / 1e6
    if start.gpu_others is not None or end.gpu_others is not None:
        summary.update(gpu_processes.summarize(start, end))
    summary.update(verdict(summary))
    return summary


def verdict(summary: Mapping[str, Any]) -> dict[str, Any]:
    """``interference`` (bool) and ``interference_reasons`` (list of text) of a window."""
    reasons = []
    if summary.get("gpu_throttled"):
        shares = summary.get("gpu_throttle_reasons") or {}
        named = ", ".join(
            f"{name} in {100 * part:.0f}% of readings" for name, part in shares.items()
        )
        reasons.append(f"the GPU throttled ({named})")
    share = summary.get("other_cpu_share")
    if (
        share is not None
        and share > OTHER_CPU_SHARE_LIMIT
        and summary.get("other_cpu_s", 0) >= OTHER_CPU_MIN_S
    ):
        reasons.append(
            f"other processes used {100 * share:.0f}% of the job's {summary['cpus']} CPUs"
            f" ({summary['other_cpu_s']:.1f} CPU-s in {summary['wall_s']:.1f} s)"
        )
    steal = summary.get("steal_share")
    if steal is not None and steal > STEAL_SHARE_LIMIT:
        reasons.append(f"the hypervisor stole {100 * steal:.0f}% of the job's CPU time")
    throttled, wall = summary.get("throttled_s"), summary.get("wall_s") or 0
    if throttled is not None and wall > 0 and throttled / wall > THROTTLED_SHARE_LIMIT:
        reasons.append(f"the job's cgroup was throttled for {throttled:.1f} s of {wall:.1f} s")
    others = summary.get("gpu_other_processes") or 0
    util = summary.get("gpu_other_util")
    if others and util is None:
        reasons.append(f"{others} other process(es) on the GPU (their utilisation not visible)")
    elif others and util > GPU_OTHER_UTIL_LIMIT:
        reasons.append(f"{others} other process(es) used the GPU (up to {util:.0f}% SM)")
    return {"interference": bool(reasons), "interference_reasons": reasons}


# Keys of a window's conditions dictionary (metrics.json["conditions"], ceiling.json's, and
# the per-epoch columns in epochs.csv take a subset), in order.
CONDITION_KEYS = (
    "started_at",  # Unix time of the window's edges (to see whether two jobs overlapped)
    "ended_at",
    "wall_s",  # the window's length
    "cpus",  # CPUs the job was allowed (and that /proc/stat lists)
    "own_cpu_s",  # CPU time of the job's process tree
    "other_cpu_s",  # CPU time other processes took on those CPUs
    "other_cpu_share",  # other_cpu_s / (wall_s x cpus)
    "steal_share",  # stolen time / all time on those CPUs (VMs)
    "loadavg_start",
    "loadavg_end",
    "throttled_s",  # cgroup v2 throttling during the window, None without a cgroup limit
    "gpu_other_processes",  # other compute processes on the job's GPU (None: CPU job)
    "gpu_other_util",  # their highest SM utilisation (%) seen; None: not visible
    "gpu_visibility",  # "NVML", "NVML (processes hidden)", why not visible, or None (a CPU)
    "gpu_other_memory_mib",  # the other processes' GPU memory (None: not visible)
    *nvml.GPU_STATE_KEYS,  # the GPU's own state (None or absent: a CPU, or no NVML)
    "cpu_energy_j",  # the CPU packages' energy (RAPL, records.energy), None: not measured
    "cpu_energy_source",  # energy.RAPL_SOURCE or "not measured: why"
    "interference",  # bool: see verdict()
    "interference_reasons",  # list of text
)


class Probe:
    """Snapshots of a running job; ``start()`` and ``stop()`` bracket a window.

    ``gpu`` (a :class:`GpuTarget`) adds the GPU's other processes at both edges and their
    utilisation at the end (NVML's samples since the window began, only when others are
    present); with NVML (``device``, opened from ``gpu`` unless given: a recorded stream in
    the tests) every window, whole run or epoch, gets the GPU's state (:func:`.nvml.summarize`).
    Several windows may be open at once (the whole run and the current epoch): each ``start()``
    returns its own snapshot, handed back to ``stop()``.
    """

    def __init__(
        self,
        *,
        gpu: GpuTarget | None = None,
        proc: str = "/proc",
        pid: int | None = None,
        cpus: Iterable[int] | None = None,
        device: nvml.Device | None = None,
        background: bool = False,
        sample_s: float = GPU_SAMPLE_S,
        powercap: str = energy.POWERCAP,
    ) -> None:
        self.gpu = gpu
        self.background = background
        self.proc = proc
        self.pid = os.getpid() if pid is None else pid
        if cpus is None:
            try:
                cpus = os.sched_getaffinity(0)
            except (AttributeError, OSError):
                cpus = None
        self.cpus = None if cpus is None else set(cpus)
        self.device = device if device is not None else nvml.open_device(gpu)
        self.sampler = None if self.device is None else nvml.Sampler(self.device, sample_s)
        self.rapl = energy.RaplMeter(powercap)

    def snapshot(
        self,
        *,
        gpu: bool = False,
        gpu_util: bool = False,
        wait: bool = True,
        since: float | None = None,
    ) -> Snapshot:
        """The CPU's counters now; with ``gpu``, the GPU's processes (``gpu_util``: and their SM
        utilisation since ``since``, the window's start)."""
        stat = parse_proc_stat(_read(f"{self.proc}/stat") or "")
        cpus = {c: t for c, t in stat.items() if self.cpus is None or c in self.cpus}
        stats = read_process_stats(self.proc)
        load = (_read(f"{self.proc}/loadavg") or "").split()
        snap = Snapshot(
            clock=time.monotonic(),
            unix=time.time(),
            cpus=cpus,
            own_ticks=tree_ticks(self.pid, stats),
            loadavg=float(load[0]) if load else None,
            throttled_usec=cgroup_throttled_usec(self.proc),
            own_pids=tree_pids(self.pid, stats),
        )
        if gpu and self.gpu is not None and self.device is not None:
            query = threading.Thread(
                target=self._gpu_snapshot, args=(snap,),
                kwargs={"want_util": gpu_util, "visible": set(stats), "since": since},
                name="nettebench-gpu-processes", daemon=True,
            )  # fmt: skip
            query.start()
            snap.gpu_query = query
            if wait:
                query.join()
        return snap

    def _gpu_snapshot(
        self, snap: Snapshot, *, want_util: bool, visible: set[int], since: float | None
    ) -> None:
        seen = gpu_processes.seen(
            self.device, self.gpu, snap.own_pids, visible, util_since=since if want_util else None
        )
        if seen is not None:
            snap.gpu_own_visible, snap.gpu_others = seen.own_visible, seen.others
            snap.gpu_elsewhere, snap.gpu_foreign_pids = seen.elsewhere, seen.foreign_pids
            snap.gpu_other_util = seen.other_util

    def start(self, *, gpu: bool = False) -> Snapshot:
        snap = self.snapshot(gpu=gpu, wait=not self.background)
        if self.sampler is not None:
            snap.readings_from, snap.energy_mj = self.sampler.open()
        snap.rapl = self.rapl.read()
        return snap

    def stop(self, started: Snapshot, *, gpu: bool = False) -> dict[str, Any]:
        """The window's summary; in the background, GPU queries pending, filled in later
        (:func:`settle`): the CPU part and the GPU's state are final at once."""
        state = {"gpu_visibility": NO_NVML} if self.gpu is not None else {}
        if self.sampler is not None and started.readings_from is not None:
            state = self.sampler.close(started.readings_from, started.energy_mj)
        state = {**state, **_cpu_energy(*self.rapl.window(started.rapl, self.rapl.read()))}
        ended = self.snapshot(gpu=gpu, gpu_util=gpu, wait=not self.background, since=started.unix)
        pending = [s.gpu_query for s in (started, ended) if s.gpu_query is not None]
        if not any(query.is_alive() for query in pending):
            return _with_state(summarize(started, ended), state)
        found = _with_state(summarize(_without_gpu(started), _without_gpu(ended)), state)

        def complete() -> None:
            for query in pending:
                query.join()
            found.update(_with_state(summarize(started, ended), state))

        finisher = threading.Thread(target=complete, name="nettebench-conditions", daemon=True)
        finisher.start()
        _PENDING.append(finisher)
        return found


def _with_state(summary: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """``summary`` with the GPU's state added and the verdict taken again with it."""
    summary.update(state)
    summary.update(verdict(summary))
    return summary


def _cpu_energy(joules: float | None, source: str) -> dict[str, Any]:
    return {"cpu_energy_j": joules, "cpu_energy_source": source}


_PENDING: list[threading.Thread] = []


def settle(timeout: float = 30.0) -> None:
    """Until every background GPU query has filled its window's summary in."""
    while _PENDING:
        _PENDING.pop().join(timeout)


def _without_gpu(snap: Snapshot) -> Snapshot:
    """``snap`` as if the GPU had not been asked (a query still running)."""
    return Snapshot(
        clock=snap.clock, cpus=snap.cpus, own_ticks=snap.own_ticks, loadavg=snap.loadavg,
        throttled_usec=snap.throttled_usec, own_pids=snap.own_pids, unix=snap.unix,
    )  # fmt: skip


def epoch_columns(summary: Mapping[str, Any] | None) -> dict[str, Any]:
    """The per-epoch subset written to epochs.csv (its last columns, records.files)."""
    summary = summary or {}
    return {
        "other_cpu_share": summary.get("other_cpu_share"),
        "steal_share": summary.get("steal_share"),
        "interference": summary.get("interference"),
    }
