"""Which profiling backends can run here, and why not where they cannot.

- ``torch`` always can (CUDA activities on a GPU, CPU activities otherwise).
- ``nsys`` needs Nsight Systems' ``nsys`` on PATH and a CUDA GPU.
- ``nvprof`` needs ``nvprof`` on PATH and a CUDA GPU of compute capability below 8.0: nvprof does
  not support Ampere and newer GPUs (it was replaced by Nsight Systems and Nsight Compute).

The check runs before any work, so a profile that cannot run fails at once with the reason and
the backends that can. Imports nothing heavy; the caller says what device it has.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable

from nettebench.profiling import BACKENDS

NVPROF_MAX_CAPABILITY = (8, 0)  # nvprof profiles only GPUs below this compute capability


class BackendUnavailable(RuntimeError):
    """A backend cannot run on this machine; the message says why and what can."""


def unavailable_reason(
    backend: str,
    *,
    device_type: str,
    capability: tuple[int, int] | None = None,
    gpu_name: str | None = None,
    which: Callable[[str], str | None] = shutil.which,
) -> str | None:
    """Why ``backend`` cannot run here, or None when it can."""
    if backend not in BACKENDS:
        return f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})"
    if backend == "torch":
        return None
    if which(backend) is None:
        tool = "Nsight Systems" if backend == "nsys" else "the CUDA toolkit's nvprof"
        return f"{backend} is not on PATH (install {tool}, or put its bin/ on PATH)"
    if device_type != "cuda":
        return f"{backend} profiles CUDA GPUs and this cell runs on the {device_type}"
    if backend == "nvprof" and capability is not None and capability >= NVPROF_MAX_CAPABILITY:
        gpu = f"{gpu_name} " if gpu_name else ""
        return (
            f"nvprof cannot profile GPUs of compute capability 8.0 and newer; this {gpu}GPU "
            f"has {capability[0]}.{capability[1]}"
        )
    return None


def check(backend: str, **where) -> None:
    """Raise :class:`BackendUnavailable` naming why and the backends that can run here."""
    reason = unavailable_reason(backend, **where)
    if reason is None:
        return
    usable = [b for b in BACKENDS if unavailable_reason(b, **where) is None]
    raise BackendUnavailable(
        f"profiling backend {backend} cannot run here: {reason}. "
        f"Backends that can: {', '.join(usable)} (set `profile: backend:` in the config)."
    )
