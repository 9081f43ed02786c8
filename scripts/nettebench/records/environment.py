"""What machine and software a result was measured on.

Every cell records this, so results from a laptop, a T4 and an H200 can be merged into one table
and compared, as the study compared PyTorch and cuDNN versions. Everything here is best effort:
a missing tool yields None, never an exception.

torch is imported inside the functions that describe it, so the report (which has no torch)
reads :data:`KEYS` from here.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nettebench.builds.activate import active_environment, find_build
from nettebench.records import conditions, cpu, lock, nvml
from nettebench.vocabulary.build_catalog import LIBRARIES

_PACKAGE_DIR = Path(__file__).resolve().parent

SLURM_KEYS = ("slurm_node", "slurm_partition", "slurm_restart_count", "slurm_log")
# Recorded since package environments (:func:`package_environment`); a record from before has
# none of them.
PACKAGE_KEYS = ("package_environment", "packages", "pillow", "process_id")
# The keys :func:`collect` writes, in the order runs.csv shows them (``env_<key>``); a test holds
# the two to each other.
KEYS = (
    "host",
    "platform",
    "python",
    "cpu_model",
    "cpu_count",
    *cpu.CPU_KEYS,
    "gpu_name",
    "gpu_count",
    "driver",
    "cuda",
    "cudnn",
    "torch",
    "torchvision",
    "efficientnet_pytorch",
    "apex",
    "apex_kernels",
    *(f"{library.name}_{part}" for library in LIBRARIES.values() for part in ("commit", "build")),
    "git_commit",
    "git_dirty",
    "nettebench",
    "lock",
    "slurm_job_id",
    *SLURM_KEYS,
    *PACKAGE_KEYS,
)


def collect() -> dict[str, Any]:
    """Host, CPU, GPU, driver and library versions, and the project's git commit."""
    import torch  # boundary: see the module docstring

    cuda = torch.cuda.is_available()
    commit = _git("rev-parse", "HEAD")
    cudnn = torch.backends.cudnn.version() if cuda else None
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        **cpu.describe(),  # capability, speed flags, affinity, native bf16 (records/cpu.py)
        "gpu_name": torch.cuda.get_device_name(0) if cuda else None,
        "gpu_count": torch.cuda.device_count() if cuda else 0,
        "driver": nvidia_driver() if cuda else None,
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
        "torch": torch.__version__,
        "torchvision": _version("torchvision"),
        "efficientnet_pytorch": _version("efficientnet_pytorch"),
        "apex": _apex_version(),
        "apex_kernels": apex_kernels(),
        **library_builds(),
        **package_environment(),
        "lock": lock.identity(),  # the lock installed from, by its hash; "none" (records/lock.py)
        "git_commit": commit,
        "git_dirty": _git_dirty(commit),
        "nettebench": _version("nettebench"),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        **slurm_job(),
    }


def device_info(device) -> dict[str, Any]:
    """The device a result was measured on: type, name (GPU or CPU model), torch CPU threads."""
    import torch  # boundary: see the module docstring

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model()
    return {"type": device.type, "name": name, "threads": torch.get_num_threads()}


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


# Subpackages NVIDIA apex has and PyPI's unrelated package named `apex` (a web toolkit) lacks.
NVIDIA_APEX_PARTS = ("amp", "optimizers", "normalization")


def apex_package_dirs() -> list[Path] | None:
    """Folders of the installed `apex` package, found without importing it; None if absent."""
    spec = importlib.util.find_spec("apex")
    if spec is None:
        return None
    return [Path(location) for location in (spec.submodule_search_locations or ())]


def is_nvidia_apex(package_dirs: list[Path]) -> bool:
    """Whether an `apex` package is NVIDIA's (it has one of NVIDIA apex's subpackages)."""
    return any((folder / part).is_dir() for folder in package_dirs for part in NVIDIA_APEX_PARTS)


def apex_kernels() -> str | None:
    """Which kernels NVIDIA apex runs here: ``amp_C`` (built with its C++/CUDA extensions, as
    the study's apex was: fused multi-tensor unscale and overflow check) or ``python`` (a
    Python-only build, apex's fallback: its loss scaler reads every gradient's sum back to the
    host, a synchronisation per parameter per step); None without NVIDIA apex."""
    if _apex_version() is None:
        return None
    try:
        importlib.import_module("amp_C")
    except Exception:  # absent, or built for another torch: apex falls back the same way
        return "python"
    return "amp_C"


def _apex_version() -> str | None:
    """NVIDIA apex's version if it is installed (PyPI's unrelated `apex` does not count)."""
    dirs = apex_package_dirs()
    if not dirs or not is_nvidia_apex(dirs):
        return None
    return _version("apex") or "unknown"


# The NVIDIA kernel module's version line: the driver's version is the first word after
# "Kernel Module" (``NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue ...``).
NVIDIA_DRIVER_FILE = Path("/proc/driver/nvidia/version")


def nvidia_driver() -> str | None:
    """The NVIDIA driver's version (``550.54.15``), the one definition the record's
    ``environment.driver`` and the result key's ``hardware.driver`` both use.

    Read from the kernel module's ``/proc`` file, else from NVML in this process (neither
    starts a process beside the epochs), else from ``nvidia-smi`` (where neither is there, as
    under WSL2 and in some containers); None when nothing answers."""
    try:
        text = NVIDIA_DRIVER_FILE.read_text(encoding="utf-8")
    except OSError:
        text = ""
    for word in text.split("Kernel Module", 1)[-1].split() if "Kernel Module" in text else ():
        if word[:1].isdigit() and "." in word:
            return word
    found = nvml.driver_version()  # in this process: no nvidia-smi child beside the epochs
    if found or nvml.load() is not None:
        return found
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
    return out.stdout.strip().splitlines()[0].strip() if out.stdout.strip() else None


def lowered_power_limit(device: Any) -> float | None:
    """The enforced power limit (W) of ``device`` (a torch CUDA device) where it is set below
    the card's default (:func:`.nvml.lowered_power_limit`), read through NVML: the one
    definition the result key's ``hardware.power_limit_w`` uses, as the record's windows carry
    ``gpu_power_limit_w``. None for a CPU, at the default, or without NVML."""
    gpu = nvml.open_device(conditions.gpu_target(device))
    return None if gpu is None else nvml.lowered_power_limit(gpu.identity())


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


def _git_dirty(commit: str | None) -> bool | None:
    """Whether tracked files differ from ``commit`` (None outside a git checkout)."""
    if commit is None:
        return None
    return _git("status", "--porcelain", "--untracked-files=no") is not None


def slurm_job(
    environ: Mapping[str, str] | None = None, scontrol: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Where a SLURM job ran (all None outside SLURM): node, partition, how often SLURM had
    requeued it before this run (preemption, node failure, ``scontrol requeue``), and its log.

    The environment alone is not enough: snakemake's SLURM job step strips SLURM_* variables
    (SLURM_RESTART_COUNT among them) before its srun, so the rest comes from ``scontrol``
    (``scontrol``: its fields, already parsed; None asks it)."""
    env = os.environ if environ is None else environ
    job_id = env.get("SLURM_JOB_ID")
    if not job_id:
        return dict.fromkeys(SLURM_KEYS)
    fields = _scontrol_job(job_id) if scontrol is None else scontrol
    # the controller's count: inside snakemake's srun step SLURM_RESTART_COUNT reads 0 even
    # after a requeue (seen on SLURM 22.05)
    restarts = fields.get("Restarts") or env.get("SLURM_RESTART_COUNT")
    return {
        "slurm_node": env.get("SLURMD_NODENAME") or fields.get("BatchHost"),
        "slurm_partition": env.get("SLURM_JOB_PARTITION") or fields.get("Partition"),
        "slurm_restart_count": int(restarts) if restarts and restarts.isdigit() else None,
        "slurm_log": fields.get("StdOut"),
    }


def slurm_job_line() -> str | None:
    """One line for a job's own log saying which SLURM job it is and where the scheduler's log
    of that job is (None outside SLURM)."""
    job_id = os.environ.get("SLURM_JOB_ID")
    if not job_id:
        return None
    job = slurm_job()
    return (
        f"SLURM job {job_id} on node {job['slurm_node']}"
        f" (requeued {job['slurm_restart_count']} times before this run);"
        f" the scheduler's log of this job: {job['slurm_log'] or 'unknown'}"
    )


def parse_scontrol(text: str) -> dict[str, str]:
    """``Key=Value`` fields of ``scontrol show job`` output (values without spaces)."""
    fields = {}
    for token in text.split():
        key, sep, value = token.partition("=")
        if sep and key not in fields:
            fields[key] = value
    return fields


def _scontrol_job(job_id: str) -> dict[str, str]:
    try:
        out = subprocess.run(
            ["scontrol", "show", "job", job_id],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    return parse_scontrol(out.stdout)


def library_builds() -> dict[str, Any]:
    """For torchvision and apex: the git commit of the copy that is imported here, and the name
    of the source build (``builds:`` in the config) it came from, None for the environment's own.

    torchvision's own ``version.git_version`` (written by its setup.py) is preferred; otherwise
    the commit comes from the manifest a build's install wrote beside the package
    (:func:`nettebench.builds.activate.find_build`), so a build is recorded even when the library
    records no commit of its own (apex).
    """

    found: dict[str, Any] = {}
    for library in LIBRARIES.values():
        try:
            build = find_build(library.package)
        except Exception:  # best effort, like everything here
            build = None
        commit = _torchvision_git_version() if library.name == "torchvision" else None
        found[f"{library.name}_commit"] = commit or (build or {}).get("commit")
        found[f"{library.name}_build"] = (build or {}).get("build")
    return found


def package_environment() -> dict[str, Any]:
    """The package environment (config ``environments:``) this process put first on its path
    and the version of each package it pins as imported here; Pillow's version (the ``pil``
    loader decodes with it) in every record; and this process's id (each seed of a cell is a
    process of its own)."""
    manifest = active_environment() or {}
    pins = manifest.get("pins") or {}
    return {
        "package_environment": manifest.get("environment"),
        "packages": {dist: _version(dist) for dist in sorted(pins)} or None,
        "pillow": _version("pillow"),
        "process_id": os.getpid(),
    }


def _torchvision_git_version() -> str | None:
    """The commit torchvision was built from, as its build recorded it (None: unknown)."""
    try:
        # Boundary (see the package docstring): imported after activate(), because it imports
        # torchvision, and a cell's torchvision build must be first on the path before that.
        import torchvision

        version = torchvision.version
    except Exception:  # not installed, or broken: recorded as unknown
        return None
    commit = getattr(version, "git_version", None)
    return commit if commit and commit != "Unknown" else None
