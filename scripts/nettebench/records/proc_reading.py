"""Reading ``/proc`` and the cgroup: the raw counters a window's conditions are the difference of.

Per-CPU busy and steal time (``/proc/stat``), a process tree's CPU time (``/proc/<pid>/stat``,
the job and its live descendants), and the cgroup v2 throttled time. Split from
:mod:`.conditions` (which takes the differences and decides), standard library only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


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
    """CPU ticks of process ``root`` and all its live descendants (``stats``: pid -> stat line);
    0 once ``root`` itself is gone."""
    if root not in stats:
        return 0
    total = 0
    for pid in tree_pids(root, stats):
        try:
            total += process_ticks(stats[pid])
        except (IndexError, ValueError):
            continue
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
