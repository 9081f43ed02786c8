"""Which GPU is a job's, as ``nvidia-smi`` and NVML name it, and a process on it.

:func:`gpu_target` finds the job's GPU (its UUID, and for a MIG instance the parent GPU's too)
from ``nvidia-smi -L``, once, before any window opens; the processes on it during a window are
read through NVML (:mod:`.nvml`, in this process), never by an ``nvidia-smi`` child inside a
timed window, whose CPU time would land in the window. Only the standard library.
"""

from __future__ import annotations

import subprocess
from collections.abc import Set
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    gpu_uuid: str
    used_mib: float | None


def _nvidia_smi(*args: str, timeout: float = 10) -> str | None:
    try:
        done = subprocess.run(
            ["nvidia-smi", *args], capture_output=True, text=True, timeout=timeout, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout


@dataclass(frozen=True)
class GpuTarget:
    """The GPU a job trains on, as nvidia-smi names it: its UUID and its nvidia-smi index; for
    a MIG instance, ``uuid`` is the instance's (``MIG-...``) and ``parent_uuid`` its GPU's."""

    uuid: str
    index: int | None = None
    parent_uuid: str | None = None


def resolve_gpu_target(device_uuid: str, listing: str | None) -> GpuTarget:
    """The :class:`GpuTarget` of the CUDA device whose UUID torch reports as ``device_uuid``
    (bare hex groups, or already prefixed), from ``nvidia-smi -L``'s ``listing``.

    torch reports a MIG instance's UUID without nvidia-smi's ``MIG-`` prefix; matched as
    ``GPU-`` (what was done before) a MIG job found no process at all, not even its own. A MIG
    line belongs to the ``GPU n:`` line above it, whose UUID and index are the parent's.
    """
    bare = device_uuid.removeprefix("GPU-").removeprefix("MIG-")
    parent: tuple[int, str] | None = None
    for line in (listing or "").splitlines():
        uuid = line.rpartition("(UUID: ")[2].rstrip(") \t")
        head = line.strip()
        if head.startswith("GPU ") and uuid.startswith("GPU-"):
            number = head[4:].partition(":")[0]
            parent = (int(number) if number.isdigit() else None, uuid)
            if uuid == f"GPU-{bare}":
                return GpuTarget(uuid, parent[0])
        elif head.startswith("MIG ") and uuid == f"MIG-{bare}" and parent is not None:
            return GpuTarget(uuid, parent[0], parent_uuid=parent[1])
    return GpuTarget(f"GPU-{bare}")


def gpu_target(device) -> GpuTarget | None:
    """The nvidia-smi identity of a torch CUDA device (None for a CPU or when unknown)."""
    if getattr(device, "type", None) != "cuda":
        return None
    try:
        import torch

        props = torch.cuda.get_device_properties(device)
        uuid = str(props.uuid)
    except Exception:  # best effort: an old torch without .uuid, no driver
        return None
    return resolve_gpu_target(uuid, _nvidia_smi("-L"))


@dataclass
class Seen:
    """What one process listing says about a job's GPU (fields of a conditions snapshot)."""

    own_visible: bool
    others: list[GpuProcess]  # on the job's GPU (or MIG instance), not the job's
    elsewhere: int | None  # MIG: processes listed for the parent GPU only (unjudged)
    foreign_pids: bool  # listed, none of this namespace: host PIDs, the job among them
    other_util: dict[int, float] | None  # pid -> SM % since the window began, when asked


def seen(
    device: Any, gpu: GpuTarget, own_pids: Set[int], visible: Set[int], util_since: float | None
) -> Seen | None:
    """The job's GPU's processes as ``device`` (an NVML view, :mod:`.nvml`) lists them, told
    apart from the job's own (``own_pids``) and from what this namespace shows (``visible``);
    with ``util_since``, the others' SM utilisation since then. None: no listing."""
    apps = device.processes()
    if apps is None:
        return None
    on_gpu = [p for p in apps if p.gpu_uuid == gpu.uuid]
    # MIG: a listing may name the parent GPU; the job's own process is found there too,
    # the others may be on any instance (whose SMs are not the job's): counted apart.
    parent = [p for p in apps if gpu.parent_uuid and p.gpu_uuid == gpu.parent_uuid]
    own_visible = any(p.pid in own_pids for p in on_gpu + parent)
    others = [p for p in on_gpu if p.pid not in own_pids]
    elsewhere = sum(p.pid not in own_pids for p in parent) if gpu.parent_uuid else None
    # Listed, but none of them the job nor any process this namespace shows: the listing's
    # PIDs are of another namespace, and the job (holding its CUDA context) is among them.
    listed = on_gpu + parent
    foreign = bool(listed) and not own_visible and not any(p.pid in visible for p in listed)
    if foreign and not others:  # the job is listed for the parent
        elsewhere, foreign = max((elsewhere or 0) - 1, 0), False
    util = None
    if util_since is not None and others and not foreign:
        sampled = device.utilisation(util_since)  # None: unreadable; a pid left out ran nothing
        if sampled is not None:
            util = {p.pid: sampled.get(p.pid, 0.0) for p in others}
    return Seen(own_visible, others, elsewhere, foreign, util)


def summarize(start: Any, end: Any) -> dict[str, Any]:
    """The window's ``gpu_*`` process keys from its two snapshots (:class:`.conditions.Snapshot`:
    ``gpu_others``, ``gpu_other_util``, ``gpu_own_visible``, ``gpu_foreign_pids``,
    ``gpu_elsewhere``)."""
    summary: dict[str, Any] = {}
    pids = sorted({p.pid for p in [*(start.gpu_others or []), *(end.gpu_others or [])]})
    util = end.gpu_other_util or {}
    summary["gpu_other_util"] = max((util.get(pid, 0.0) for pid in pids), default=0.0)
    if pids and not util:
        summary["gpu_other_util"] = None
    own_seen = end.gpu_own_visible or start.gpu_own_visible
    summary["gpu_visibility"] = "NVML" if own_seen else "NVML (processes hidden)"
    if start.gpu_foreign_pids or end.gpu_foreign_pids:
        pids = pids[1:]  # the job itself is one of them, whichever
        summary["gpu_other_util"] = None if pids else 0.0  # pmon's PIDs say nothing either
        summary["gpu_visibility"] = "NVML (host PIDs: the job counted out)"
    summary["gpu_other_processes"] = len(pids)
    memory = {p.pid: p.used_mib for p in [*(start.gpu_others or []), *(end.gpu_others or [])]}
    summary["gpu_other_memory_mib"] = (
        None
        if start.gpu_foreign_pids or end.gpu_foreign_pids
        else sum(memory.get(pid) or 0.0 for pid in pids)
    )
    elsewhere = max(start.gpu_elsewhere or 0, end.gpu_elsewhere or 0)
    if elsewhere:
        summary["gpu_visibility"] += (
            f"; MIG: {elsewhere} process(es) on the GPU's other instances, not judged"
        )
    return summary
