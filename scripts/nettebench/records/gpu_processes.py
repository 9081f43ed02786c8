"""Which GPU is a job's, as NVML and ``nvidia-smi`` name it, and a process on it.

:func:`resolve_gpu_target` finds the job's GPU (its UUID, and for a MIG instance the parent
GPU's too) in a listing of the GPUs (:class:`ListedGpu`): NVML's (:func:`list_gpus`, in this
process), or where NVML is absent ``nvidia-smi -L``'s (:func:`nvidia_smi_listing`), once,
before any window opens (:func:`.conditions.gpu_target`); the processes on it during a window
are read through NVML (:mod:`.nvml`), never by an ``nvidia-smi`` child inside a timed window,
whose CPU time would land in the window. Only the standard library.
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


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


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


@dataclass(frozen=True)
class ListedGpu:
    """One GPU as NVML or ``nvidia-smi -L`` lists it: its index (NVML's and nvidia-smi's, the
    same, and not CUDA's under ``CUDA_VISIBLE_DEVICES``), its ``GPU-`` UUID, and its MIG
    instances' ``MIG-`` UUIDs."""

    index: int | None
    uuid: str
    migs: tuple[str, ...] = ()


def parse_listing(listing: str | None) -> list[ListedGpu]:
    """``nvidia-smi -L``'s lines as :class:`ListedGpu`: a MIG line belongs to the ``GPU n:``
    line above it."""
    found: list[ListedGpu] = []
    for line in (listing or "").splitlines():
        uuid = line.rpartition("(UUID: ")[2].rstrip(") \t")
        head = line.strip()
        if head.startswith("GPU ") and uuid.startswith("GPU-"):
            number = head[4:].partition(":")[0]
            found.append(ListedGpu(int(number) if number.isdigit() else None, uuid))
        elif head.startswith("MIG ") and uuid.startswith("MIG-") and found:
            last = found[-1]
            found[-1] = ListedGpu(last.index, last.uuid, (*last.migs, uuid))
    return found


def nvidia_smi_listing() -> list[ListedGpu]:
    """The GPUs as ``nvidia-smi -L`` lists them (none where it cannot be run)."""
    return parse_listing(_nvidia_smi("-L"))


def list_gpus(nvml: Any) -> list[ListedGpu] | None:
    """Every GPU the driver knows, by NVML's index (the one ``nvidia-smi`` shows, whatever
    ``CUDA_VISIBLE_DEVICES`` says), with its UUID and, where MIG is on, its instances' UUIDs:
    what ``nvidia-smi -L`` prints, read in this process through ``nvml`` (pynvml, initialised:
    :func:`.nvml.load`). None without it, or where the driver does not answer."""
    if nvml is None:
        return None
    try:
        count = nvml.nvmlDeviceGetCount()
    except Exception:  # NVMLError: uninitialised, no driver
        return None
    found = []
    for index in range(count):
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(nvml.nvmlDeviceGetUUID(handle))
        except Exception:  # a GPU that does not answer (lost, no permission): not listed
            continue
        found.append(ListedGpu(index, uuid, tuple(_mig_uuids(nvml, handle))))
    return found


def _mig_uuids(nvml: Any, handle: Any) -> list[str]:
    """The UUIDs of a GPU's MIG instances (none where MIG is off or unsupported)."""
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
        slots = nvml.nvmlDeviceGetMaxMigDeviceCount(handle) if current else 0
    except Exception:  # NVML_ERROR_NOT_SUPPORTED: a GPU without MIG
        return []
    found = []
    for slot in range(slots):
        try:  # an empty slot answers NVML_ERROR_NOT_FOUND
            instance = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            found.append(_text(nvml.nvmlDeviceGetUUID(instance)))
        except Exception:
            continue
    return found


def resolve_gpu_target(device_uuid: str, listing: str | list[ListedGpu] | None) -> GpuTarget:
    """The :class:`GpuTarget` of the CUDA device whose UUID torch reports as ``device_uuid``
    (bare hex groups, or already prefixed), in ``listing`` (NVML's GPUs, or ``nvidia-smi -L``'s
    text). Matched by UUID, so ``CUDA_VISIBLE_DEVICES`` (which renumbers CUDA's devices, not
    NVML's) needs no mapping.

    torch reports a MIG instance's UUID without nvidia-smi's ``MIG-`` prefix; matched as
    ``GPU-`` (what was done before) a MIG job found no process at all, not even its own. An
    instance's index and parent UUID are its GPU's.
    """
    bare = device_uuid.removeprefix("GPU-").removeprefix("MIG-")
    gpus = parse_listing(listing) if isinstance(listing, str) or listing is None else listing
    for gpu in gpus:
        if gpu.uuid == f"GPU-{bare}":
            return GpuTarget(gpu.uuid, gpu.index)
        if f"MIG-{bare}" in gpu.migs:
            return GpuTarget(f"MIG-{bare}", gpu.index, parent_uuid=gpu.uuid)
    return GpuTarget(f"GPU-{bare}")


def cuda_uuid(device: Any) -> str | None:
    """The UUID torch reports for a CUDA device (None for a CPU, or when torch cannot say)."""
    if getattr(device, "type", None) != "cuda":
        return None
    try:
        import torch  # a GPU job's: the report and the workflow's parse never get here

        return str(torch.cuda.get_device_properties(device).uuid)
    except Exception:  # best effort: an old torch without .uuid, no driver
        return None


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
