"""The CPU a result was measured on, as far as speed depends on it.

Two machines that both say ``AMD EPYC`` can differ tenfold in bf16: one has native bf16
arithmetic (``avx512_bf16`` or AMX), the other converts every bf16 value to fp32 and back in
software. So a record names the instruction sets that decide speed, what torch actually uses of
them (``torch.backends.cpu.get_cpu_capability()`` and oneDNN's bf16 support, which honour
``ATEN_CPU_CAPABILITY`` and ``ONEDNN_MAX_CPU_ISA``), and which CPUs the job was allowed to run
on, and how its OpenMP threads waited at a barrier (``OMP_WAIT_POLICY``: spinning threads take
CPU from other processes and lose theirs to them; the rules set ``PASSIVE``). Best effort like
the rest of the environment: what cannot be read is None.

:func:`describe` imports torch; the flag and CPU-list helpers do not.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

# The /proc/cpuinfo flags that decide a training step's speed on a CPU, in the order recorded.
SPEED_FLAGS = (
    "avx2",
    "avx512f",
    "avx512_bf16",
    "avx512_fp16",
    "amx_bf16",
    "amx_tile",
    "amx_fp16",
)
# Flags that give native bf16 arithmetic (dot products in bf16): AVX-512 BF16 or AMX.
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
# Environment variables that cap the instruction sets torch and oneDNN use (how an AVX-512
# machine is made to behave like an AVX2-only one: see the README's quick start).
ISA_LIMIT_VARIABLES = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")


def cpu_flags(cpuinfo: str) -> list[str]:
    """The :data:`SPEED_FLAGS` the first ``flags`` line of /proc/cpuinfo text lists."""
    for line in cpuinfo.splitlines():
        if line.startswith("flags") and ":" in line:
            present = set(line.split(":", 1)[1].split())
            return [flag for flag in SPEED_FLAGS if flag in present]
    return []


def read_cpu_flags(path: str = "/proc/cpuinfo") -> list[str] | None:
    """:func:`cpu_flags` of this machine; None where /proc/cpuinfo cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return cpu_flags(handle.read())
    except OSError:
        return None


def format_cpu_list(cpus: Iterable[int]) -> str:
    """CPU numbers in the kernel's list format: ``0-3,8,10-11``."""
    numbers = sorted(set(cpus))
    parts: list[str] = []
    start = previous = None
    for number in [*numbers, None]:
        if start is not None and number == previous + 1:
            previous = number
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = number
    return ",".join(parts)


def allowed_cpus() -> set[int] | None:
    """The CPUs this process may run on (its affinity), None where the OS does not say."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def isa_limits(environ: dict[str, str] | None = None) -> str | None:
    """``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2``: the caps set, None if none."""
    env = os.environ if environ is None else environ
    found = [f"{name}={env[name]}" for name in ISA_LIMIT_VARIABLES if env.get(name)]
    return " ".join(found) or None


def omp_wait_policy(environ: dict[str, str] | None = None) -> str:
    """``OMP_WAIT_POLICY`` as the job saw it: ``PASSIVE``, ``ACTIVE``, or ``default`` (unset: the
    OpenMP runtime's own policy, which spins for a while before it sleeps)."""
    env = os.environ if environ is None else environ
    return env.get("OMP_WAIT_POLICY") or "default"


def bf16_is_native(flags: Iterable[str] | None, onednn_bf16: bool | None) -> bool | None:
    """Whether bf16 arithmetic runs in hardware: the CPU has a native bf16 instruction set and
    oneDNN may use it (``ONEDNN_MAX_CPU_ISA`` can forbid it). None when neither is known."""
    if flags is None and onednn_bf16 is None:
        return None
    has_flags = flags is not None and any(flag in NATIVE_BF16_FLAGS for flag in flags)
    return bool(has_flags and onednn_bf16 is not False)


def describe() -> dict[str, Any]:
    """The CPU keys of a run's environment (see :data:`CPU_KEYS`)."""
    import torch

    flags = read_cpu_flags()
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):
        capability = None
    try:
        onednn_bf16 = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        onednn_bf16 = None
    cpus = allowed_cpus()
    return {
        "cpu_capability": capability,
        "cpu_flags": None if flags is None else " ".join(flags),
        "cpu_isa_limits": isa_limits(),
        "cpu_affinity": None if cpus is None else format_cpu_list(cpus),
        "cpu_affinity_count": None if cpus is None else len(cpus),
        "omp_wait_policy": omp_wait_policy(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "onednn_bf16": onednn_bf16,
        "bf16_native": bf16_is_native(flags, onednn_bf16),
    }


# Keys describe() adds to metrics.json["environment"], in order (runs.csv: env_<key>).
CPU_KEYS = (
    "cpu_capability",  # torch's CPU kernels: "AVX2", "AVX512", ... (ATEN_CPU_CAPABILITY caps it)
    "cpu_flags",  # the SPEED_FLAGS /proc/cpuinfo lists, space-separated
    "cpu_isa_limits",  # ATEN_CPU_CAPABILITY / ONEDNN_MAX_CPU_ISA when set, else None
    "cpu_affinity",  # CPUs the job was allowed, "0-3,8" (os.sched_getaffinity)
    "cpu_affinity_count",  # how many
    "omp_wait_policy",  # OMP_WAIT_POLICY: PASSIVE, ACTIVE, or default (unset)
    "torch_interop_threads",  # torch's inter-op pool (intra-op threads: device.threads)
    "onednn_bf16",  # oneDNN reports bf16 support (honours ONEDNN_MAX_CPU_ISA)
    "bf16_native",  # native bf16 arithmetic: a bf16 flag and oneDNN allowed to use it
)
