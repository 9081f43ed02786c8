"""What machine and software a result was measured on.

Every cell records this, so results from a laptop, a T4 and an H200 can be merged into one table
and compared, as the study compared PyTorch and cuDNN versions. Everything here is best effort:
a missing tool yields None, never an exception.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

_PACKAGE_DIR = Path(__file__).resolve().parent


def collect() -> dict[str, Any]:
    """Host, CPU, GPU, driver and library versions, and the project's git commit."""
    import torch

    cuda = torch.cuda.is_available()
    cudnn = torch.backends.cudnn.version() if cuda else None
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "gpu_name": torch.cuda.get_device_name(0) if cuda else None,
        "gpu_count": torch.cuda.device_count() if cuda else 0,
        "driver": _nvidia_driver() if cuda else None,
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
        "torch": torch.__version__,
        "torchvision": _version("torchvision"),
        "efficientnet_pytorch": _version("efficientnet_pytorch"),
        "apex": _apex_version(),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": _git_dirty(),
        "nettebench": _version("nettebench"),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
    }


def cpu_model() -> str:
    """The CPU's marketing name (from /proc/cpuinfo on Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        module = sys.modules.get(distribution)
        return getattr(module, "__version__", None)


def _apex_version() -> str | None:
    """NVIDIA apex's version if it is importable.

    PyPI's package named ``apex`` is an unrelated web toolkit: it has none of NVIDIA apex's
    subpackages, which is how the two are told apart.
    """
    try:
        import apex  # noqa: F401
    except Exception:
        return None
    nvidia_parts = ("apex.amp", "apex.optimizers", "apex.normalization")
    if not any(importlib.util.find_spec(name) for name in nvidia_parts):
        return None
    return _version("apex") or "unknown"


def _nvidia_driver() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(_PACKAGE_DIR), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _git_dirty() -> bool | None:
    status = _git("status", "--porcelain", "--untracked-files=no")
    if status is None:
        return None if _git("rev-parse", "HEAD") is None else False
    return True
