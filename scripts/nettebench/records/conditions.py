"""What else the machine did while a job was timed: the conditions a number was measured in.

A timed window (an epoch, a whole cell, a ceiling's steps) is bracketed by two snapshots of:

- ``/proc/stat``, per CPU, for the CPUs the job may run on (its affinity): busy and steal time;
- the CPU time of the job's own process tree (this process, its threads and every live
  descendant, such as DataLoader workers; a worker that exits and is reaped moves into its
  parent's ``cutime``, so the difference stays right);
- the load average and, under cgroup v2, the time the job's cgroup was throttled;
- on a GPU, the other compute processes ``nvidia-smi`` lists on the job's GPU and their SM
  utilisation where it shows it.

The difference gives the CPU time *other* processes took on the job's CPUs (busy time there
minus the job's own), the share of those CPUs' time stolen by the hypervisor, and a verdict:
``interference`` with its reasons, or not. Thresholds are the constants below. Reading the
files costs well under a millisecond and happens outside the timed regions; ``nvidia-smi`` runs
only at the edges of a job's whole window, never per epoch, and with ``background=True`` (the
trainer's probe) in a thread of its own: the window's summary is returned at once and its GPU
part filled in when the query is back; :func:`settle` waits for every such query (the trainer
calls it before writing its record), so nvidia-smi costs the cell's wall time nothing.

Only the standard library: the trainer, the ceiling and the profiler use this without the
report, and the report reads the resulting dictionaries without torch.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nettebench.records.gpu_processes import (  # noqa: F401 - gpu_target: this module's API
    GpuProcess,
    GpuTarget,
    _nvidia_smi,
    gpu_target,
    parse_compute_apps,
    parse_pmon,
    resolve_gpu_target,
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

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


# ------------------------------------------------------------------------------ reading /proc


@dataclass(frozen=True)
class CpuTimes:
    """One CPU's cumulative times from a /proc/stat line, in clock ticks."""

    busy: int  # user + nice + system + irq + softirq (guest time is inside user)
    steal: int
    total: int  # busy + idle + iowait + steal


def parse_proc_stat(text: str) -> dict[int, CpuTimes]:
    """Per-CPU times (``cpuN`` lines) of /proc/stat text."""
    cpus = {}
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *values = line.split()
        try:
            number = int(name[3:])
            user, nice, system, idle, iowait, irq, softirq, steal = (
                int(v) for v in (values + ["0"] * 8)[:8]
            )
        except ValueError:
            continue
        busy = user + nice + system + irq + softirq
        cpus[number] = CpuTimes(busy=busy, steal=steal, total=busy + idle + iowait + steal)
    return cpus


def _stat_fields(text: str) -> list[str]:
    """The fields of a /proc/<pid>/stat line after the command name (which may hold spaces),
    so that index 0 is the state (field 3 in proc(5))."""
    return text.rsplit(")", 1)[1].split()


def process_ticks(stat_text: str) -> int:
    """utime + stime + cutime + cstime of one /proc/<pid>/stat line."""
    fields = _stat_fields(stat_text)
    return sum(int(fields[index]) for index in (11, 12, 13, 14))


def parent_pid(stat_text: str) -> int:
    return int(_stat_fields(stat_text)[1])


def tree_ticks(root: int, stats: Mapping[int, str]) -> int:
    """CPU ticks of process ``root`` and all its live descendants (``stats``: pid -> stat line)."""
    children: dict[int, list[int]] = {}
    for pid, text in stats.items():
        try:
            children.setdefault(parent_pid(text), []).append(pid)
        except (IndexError, ValueError):
            continue
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen or pid not in stats:
            continue
        seen.add(pid)
        try:
            total += process_ticks(stats[pid])
        except (IndexError, ValueError):
            continue
        todo.extend(children.get(pid, ()))
    return total


def tree_pids(root: int, stats: Mapping[int, str]) -> set[int]:
    """``root`` and its live descendants."""
    children: dict[int, list[int]] = {}
    for pid, text in stats.items():
        try:
            children.setdefault(parent_pid(text), []).append(pid)
        except (IndexError, ValueError):
            continue
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def read_process_stats(proc: str = "/proc") -> dict[int, str]:
    """Every process's /proc/<pid>/stat line (processes that vanish meanwhile are skipped)."""
    stats = {}
    try:
        names = os.listdir(proc)
    except OSError:
        return stats
    for name in names:
        if name.isdigit():
            text = _read(f"{proc}/{name}/stat")
            if text:
                stats[int(name)] = text
    return stats


def cgroup_throttled_usec(proc: str = "/proc", root: str = "/sys/fs/cgroup") -> int | None:
    """``throttled_usec`` of this process's cgroup v2 ``cpu.stat``; None without one."""
    text = _read(f"{proc}/self/cgroup")
    if not text:
        return None
    for line in text.splitlines():
        if line.startswith("0::"):
            stat = _read(f"{root}{line[3:].strip()}/cpu.stat")
            for entry in (stat or "").splitlines():
                key, _, value = entry.partition(" ")
                if key == "throttled_usec" and value.strip().isdigit():
                    return int(value)
    return None


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
    gpu_own_visible: bool | None = None  # this job's own process is in nvidia-smi's list
    gpu_other_util: dict[int, float] | None = None  # pid -> SM % (end snapshot only)
    # nvidia-smi listed processes on the job's GPU but not the job's own, which holds a CUDA
    # context there: its PIDs are of another namespace (gVisor's NVML reports host PIDs), the
    # job is one of ``gpu_others`` and cannot be told apart
    gpu_foreign_pids: bool = False
    gpu_elsewhere: int | None = None  # MIG: processes listed for the parent GPU only (unjudged)
    own_pids: set[int] = field(default_factory=set)
    unix: float | None = None  # time.time(), to find windows of two jobs that overlapped
    gpu_query: threading.Thread | None = None  # the GPU part's nvidia-smi, when asked


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
    }
    if start.throttled_usec is not None and end.throttled_usec is not None:
        summary["throttled_s"] = (end.throttled_usec - start.throttled_usec) / 1e6
    if start.gpu_others is not None or end.gpu_others is not None:
        pids = sorted({p.pid for p in [*(start.gpu_others or []), *(end.gpu_others or [])]})
        util = end.gpu_other_util or {}
        summary["gpu_other_util"] = max((util.get(pid, 0.0) for pid in pids), default=0.0)
        if pids and not util:
            summary["gpu_other_util"] = None
        own_seen = end.gpu_own_visible or start.gpu_own_visible
        summary["gpu_visibility"] = "nvidia-smi" if own_seen else "nvidia-smi (processes hidden)"
        if start.gpu_foreign_pids or end.gpu_foreign_pids:
            pids = pids[1:]  # the job itself is one of them, whichever
            summary["gpu_other_util"] = None if pids else 0.0  # pmon's PIDs say nothing either
            summary["gpu_visibility"] = "nvidia-smi (host PIDs: the job counted out)"
        summary["gpu_other_processes"] = len(pids)
        elsewhere = max(start.gpu_elsewhere or 0, end.gpu_elsewhere or 0)
        if elsewhere:
            summary["gpu_visibility"] += (
                f"; MIG: {elsewhere} process(es) on the GPU's other instances, not judged"
            )
    summary.update(verdict(summary))
    return summary


def verdict(summary: Mapping[str, Any]) -> dict[str, Any]:
    """``interference`` (bool) and ``interference_reasons`` (list of text) of a window."""
    reasons = []
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
    "gpu_visibility",  # "nvidia-smi", "nvidia-smi (processes hidden)" or None
    "interference",  # bool: see verdict()
    "interference_reasons",  # list of text
)


class Probe:
    """Snapshots of a running job; ``start()`` and ``stop()`` bracket a window.

    ``gpu`` (a :class:`GpuTarget`) adds the GPU's other processes at both edges and their
    utilisation at the end (one ``nvidia-smi pmon`` sample, only when others are present).
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
        smi: Callable[..., str | None] = _nvidia_smi,
        background: bool = False,
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
        self._smi = smi

    def snapshot(self, *, gpu: bool = False, gpu_util: bool = False, wait: bool = True) -> Snapshot:
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
        if gpu and self.gpu is not None:
            query = threading.Thread(
                target=self._gpu_snapshot, args=(snap,),
                kwargs={"want_util": gpu_util, "visible": set(stats)},
                name="nettebench-nvidia-smi", daemon=True,
            )  # fmt: skip
            query.start()
            snap.gpu_query = query
            if wait:
                query.join()
        return snap

    def _gpu_snapshot(self, snap: Snapshot, *, want_util: bool, visible: set[int]) -> None:
        listing = self._smi(
            "--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits"
        )
        if listing is None:
            return
        apps = parse_compute_apps(listing)
        on_gpu = [p for p in apps if p.gpu_uuid == self.gpu.uuid]
        # MIG: a listing may name the parent GPU; the job's own process is found there too,
        # the others may be on any instance (whose SMs are not the job's): counted apart.
        parent = [p for p in apps if self.gpu.parent_uuid and p.gpu_uuid == self.gpu.parent_uuid]
        snap.gpu_own_visible = any(p.pid in snap.own_pids for p in on_gpu + parent)
        snap.gpu_others = [p for p in on_gpu if p.pid not in snap.own_pids]
        if self.gpu.parent_uuid:
            snap.gpu_elsewhere = sum(p.pid not in snap.own_pids for p in parent)
        # Listed, but none of them the job nor any process this namespace shows: the listing's
        # PIDs are of another namespace, and the job (holding its CUDA context) is among them.
        listed = on_gpu + parent
        snap.gpu_foreign_pids = (
            bool(listed) and not snap.gpu_own_visible and not any(p.pid in visible for p in listed)
        )
        if snap.gpu_foreign_pids and not snap.gpu_others:  # the job is listed for the parent
            snap.gpu_elsewhere = max((snap.gpu_elsewhere or 0) - 1, 0)
            snap.gpu_foreign_pids = False
        if want_util and snap.gpu_others and not snap.gpu_foreign_pids:
            pmon = self._smi("pmon", "-c", "1", "-s", "u")
            samples = parse_pmon(pmon or "")
            snap.gpu_other_util = {
                pid: util
                for (index, pid), util in samples.items()
                if (self.gpu.index is None or index == self.gpu.index) and pid not in snap.own_pids
            }

    def start(self, *, gpu: bool = False) -> Snapshot:
        return self.snapshot(gpu=gpu, wait=not self.background)

    def stop(self, started: Snapshot, *, gpu: bool = False) -> dict[str, Any]:
        """The window's summary; in the background, GPU queries pending, filled in later
        (:func:`settle`): the CPU part is final at once."""
        ended = self.snapshot(gpu=gpu, gpu_util=gpu, wait=not self.background)
        pending = [s.gpu_query for s in (started, ended) if s.gpu_query is not None]
        if not any(query.is_alive() for query in pending):
            return summarize(started, ended)
        found = summarize(_without_gpu(started), _without_gpu(ended))

        def complete() -> None:
            for query in pending:
                query.join()
            found.update(summarize(started, ended))

        finisher = threading.Thread(target=complete, name="nettebench-conditions", daemon=True)
        finisher.start()
        _PENDING.append(finisher)
        return found


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
