"""The processes on a job's GPU as ``nvidia-smi`` names them, for :mod:`.conditions`.

Which GPU is the job's (:func:`gpu_target`: its UUID as nvidia-smi writes it, and for a MIG
instance the parent GPU's too) and the parsers of the two listings read at a window's edges:
the compute processes (:func:`parse_compute_apps`) and their SM utilisation
(:func:`parse_pmon`). Only the standard library, as :mod:`.conditions`.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    gpu_uuid: str
    used_mib: float | None


def parse_compute_apps(text: str) -> list[GpuProcess]:
    """``nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,
    nounits`` output."""
    found = []
    for line in text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) < 2 or not parts[0].isdigit():
            continue
        try:
            used = float(parts[2]) if len(parts) > 2 else None
        except ValueError:
            used = None
        found.append(GpuProcess(int(parts[0]), parts[1], used))
    return found


def parse_pmon(text: str) -> dict[tuple[int, int], float]:
    """``nvidia-smi pmon -c 1 -s u`` output: (gpu index, pid) -> SM utilisation in percent
    (rows whose SM column reads ``-`` are left out: no sample)."""
    header: list[str] = []
    found = {}
    for line in text.splitlines():
        if line.startswith("#"):
            names = line.lstrip("#").split()
            if "pid" in names and "sm" in names:
                header = names
            continue
        parts = line.split()
        if not header or len(parts) < len(header) - 1:
            continue
        row = dict(zip(header, parts, strict=False))
        try:
            found[(int(row["gpu"]), int(row["pid"]))] = float(row["sm"])
        except (KeyError, ValueError):
            continue
    return found


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
