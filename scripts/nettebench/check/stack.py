"""The stack a GPU run stands on, as ``python -m nettebench check --stack`` prints it.

The GPU, the NVIDIA driver and whether it is new enough for the CUDA that torch was built with
(:data:`MIN_DRIVER`), CUDA, torch and torchvision, cuDNN, NVML (``nvidia-ml-py``: installed,
and whether the driver answers), NVIDIA apex, and every TF32 getter of torch's two APIs
(:data:`TF32_GETTERS`): as the process started, and after each TF32 setting a precision's
set-up makes (``tf32``: on, ``O0``: off). A getter that raises is printed with its error, never
hidden: Inductor, the profiler and ``torch.backends.cudnn.flags()`` read them.

:func:`collect` sets TF32 process-wide, so it runs in a process of its own (the check's
``stack`` case, or a user's ``--stack``); :func:`lines` and :func:`summary` only format what it
found.
"""

from __future__ import annotations

import importlib.metadata
import warnings
from typing import Any

import torch

from nettebench.models.torch_precision import set_tf32
from nettebench.records import environment, nvml
from nettebench.vocabulary import precision

# The oldest Linux driver each CUDA major version runs on (minor version compatibility), from
# NVIDIA's table: docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html.
MIN_DRIVER = {13: 580, 12: 525, 11: 450}
TF32_GETTERS = (
    "torch.backends.cuda.matmul.allow_tf32",
    "torch.backends.cudnn.allow_tf32",
    "torch.get_float32_matmul_precision()",
    "torch.backends.fp32_precision",
    "torch.backends.cuda.matmul.fp32_precision",
    "torch.backends.cudnn.fp32_precision",
    "torch.backends.cudnn.conv.fp32_precision",
    "torch.backends.cudnn.rnn.fp32_precision",
)
SET_UPS = ("tf32", "O0")  # the two TF32 settings a precision's set-up makes: on, off
STARTED = "as the process started"


def read_getter(path: str) -> dict[str, Any]:
    """One getter, read: ``{"value": ...}``, ``{"error": "RuntimeError: ..."}`` when reading it
    raises, or ``{"absent": ...}`` when this torch has no such attribute."""
    names = path.removesuffix("()").split(".")[1:]
    found: Any = torch
    try:
        for name in names:
            found = getattr(found, name)
        value = found() if path.endswith("()") else found
    except AttributeError as error:
        return {"absent": f"not in torch {torch.__version__} ({error})"}
    except Exception as error:  # torch's "mix of the legacy and new APIs", and any other
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"}
    return {"value": value if isinstance(value, bool | int | str) else repr(value)}


def tf32_getters() -> dict[str, dict[str, dict[str, Any]]]:
    """Every getter as the process started, then after each set-up in :data:`SET_UPS` (on the
    CUDA device's flags, which exist without a GPU)."""
    found = {STARTED: {path: read_getter(path) for path in TF32_GETTERS}}
    for name in SET_UPS:
        set_tf32(torch.device("cuda"), precision.get(name).allow_tf32)
        found[f"after {name}'s set-up"] = {path: read_getter(path) for path in TF32_GETTERS}
    return found


def minimum_driver(cuda: str | None) -> int | None:
    """The oldest Linux driver (major version) a CUDA build runs on; None when unknown."""
    if not cuda:
        return None
    return MIN_DRIVER.get(int(cuda.split(".")[0]))


def driver_too_old(driver: str | None, cuda: str | None) -> bool:
    needed = minimum_driver(cuda)
    return bool(driver and needed and int(driver.split(".")[0]) < needed)


def no_gpu_reason() -> str | None:
    """Why torch sees no CUDA GPU here, in words a user can act on; None when it sees one."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = torch.cuda.is_available()
    if available:
        return None
    said = next((str(w.message).splitlines()[0] for w in caught), None)
    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is built without CUDA: install a CUDA build"
    built = f"torch {torch.__version__} is built for CUDA {torch.version.cuda}"
    driver = environment.nvidia_driver()
    if driver is None:
        return f"{built}, and no NVIDIA driver is loaded (no /proc/driver/nvidia/version)"
    if driver_too_old(driver, torch.version.cuda):
        needed = minimum_driver(torch.version.cuda)
        return f"{built}, which needs driver >= {needed}; this one is {driver}"
    return f"{built}; driver {driver}; it found no device" + (f" ({said})" if said else "")


def nvml_state() -> dict[str, Any]:
    try:
        package = importlib.metadata.version("nvidia-ml-py")
    except importlib.metadata.PackageNotFoundError:
        package = None
    return {"package": package, "answers": nvml.load() is not None}


def collect() -> dict[str, Any]:
    """The stack, as :func:`lines` prints it (sets TF32 process-wide: run it in its own
    process)."""
    no_gpu = no_gpu_reason()  # first: torch's warning about the driver is said once
    env = environment.collect()
    gpu = None
    if no_gpu is None:
        props = torch.cuda.get_device_properties(0)
        gpu = {
            "name": props.name,
            "capability": f"{props.major}.{props.minor}",
            "memory_gib": round(props.total_memory / 2**30, 1),
            "count": torch.cuda.device_count(),
        }
    return {
        "gpu": gpu,
        "no_gpu": no_gpu,
        "driver": environment.nvidia_driver(),
        "cuda": torch.version.cuda,
        "driver_needed": minimum_driver(torch.version.cuda),
        "torch": torch.__version__,
        "torchvision": env.get("torchvision"),
        "python": env.get("python"),
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "nvml": nvml_state(),
        "apex": env.get("apex"),
        "apex_kernels": env.get("apex_kernels"),
        "git_commit": env.get("git_commit"),
        "tf32": tf32_getters(),
    }


def cudnn_text(version: int | None) -> str:
    """cuDNN's version number as a version (91900 -> 9.19.0; 8902 -> 8.9.2)."""
    if not version:
        return "none"
    if version >= 10000:  # cuDNN 9 on: major * 10000 + minor * 100 + patch
        return f"{version // 10000}.{version // 100 % 100}.{version % 100}"
    return f"{version // 1000}.{version // 100 % 10}.{version % 100}"


def _getter_text(path: str, read: dict[str, Any]) -> str:
    if "value" in read:
        return f"{path} = {read['value']!r}"
    if "error" in read:
        return f"{path} RAISES {read['error']}"
    return f"{path}: absent"


def lines(found: dict[str, Any]) -> list[str]:
    """The stack, one line a part (TF32: a line per setting, its getters indented)."""
    gpu = found.get("gpu")
    if gpu:
        where = (f"{gpu['name']}, compute capability {gpu['capability']}, "
                 f"{gpu['memory_gib']:g} GiB ({gpu['count']} device(s))")  # fmt: skip
    else:
        where = f"none: {found.get('no_gpu')}"
    driver, needed = found.get("driver"), found.get("driver_needed")
    driver_text = driver or "none found"
    if needed:
        old = driver_too_old(driver, found.get("cuda"))
        state = ": TOO OLD" if old else ": ok" if driver else ""
        driver_text += f" (CUDA {found.get('cuda')} needs >= {needed} on Linux{state})"
    nvml_found = found.get("nvml") or {}
    if not nvml_found.get("package"):
        nvml_text = "nvidia-ml-py not installed: no clocks, power, energy or throttle marks"
    else:
        answer = "answers" if nvml_found.get("answers") else "the driver did not answer"
        nvml_text = f"nvidia-ml-py {nvml_found['package']}: {answer}"
    apex = found.get("apex")
    apex_text = f"{apex} ({found.get('apex_kernels')} kernels)" if apex else "not installed"
    out = [
        f"GPU      {where}",
        f"driver   {driver_text}",
        f"CUDA     {found.get('cuda') or 'none (a CPU build of torch)'} (torch's build)",
        f"torch    {found.get('torch')}, torchvision {found.get('torchvision')}, "
        f"Python {found.get('python')}",
        f"cuDNN    {cudnn_text(found.get('cudnn'))}",
        f"NVML     {nvml_text}",
        f"apex     {apex_text}",
    ]
    for setting, getters in (found.get("tf32") or {}).items():
        out.append(f"TF32     {setting}:")
        out += [f"           {_getter_text(path, read)}" for path, read in getters.items()]
    return out


def summary(found: dict[str, Any]) -> str:
    """One line for the table: GPU, driver, CUDA, torch, cuDNN, NVML, the TF32 getters."""
    gpu = (found.get("gpu") or {}).get("name") or "no GPU"
    raising = sum("error" in read for getters in (found.get("tf32") or {}).values()
                  for read in getters.values())  # fmt: skip
    nvml_found = found.get("nvml") or {}
    nvml_text = "answers" if nvml_found.get("answers") else (
        "no driver answer" if nvml_found.get("package") else "not installed")  # fmt: skip
    return (
        f"{gpu}; driver {found.get('driver') or 'none'}; CUDA {found.get('cuda')}; torch "
        f"{found.get('torch')}; cuDNN {cudnn_text(found.get('cudnn'))}; NVML {nvml_text}; TF32 "
        + (f"getters: {raising} reading(s) raise" if raising else "getters all read")
    )
