"""The one table of precision modes.

Every other module asks this table what a precision name means; nothing else branches on the
names. The table itself imports no torch (the workflow validates precision names when it parses
the config); :mod:`nettebench.models.torch_precision` turns a mode into torch objects, for the
trainer and the inference model alike.

apex's historical opt-levels map onto PyTorch's native tools:

- ``O0``: pure fp32. TF32 is switched *off*, so O0 on an Ampere-or-newer GPU means what it meant
  on the study's T4 (use ``tf32`` for fp32 with TF32 tensor cores).
- ``O1``: autocast to fp16 around the forward pass, dynamic loss scaling (apex's O1 patched casts;
  ``torch.autocast`` is its replacement).
- ``O2``: the model in fp16 except batch-norm, fp32 master weights for the optimiser, dynamic loss
  scaling (what apex's O2 did).
- ``O3``: everything in fp16, no master weights, no loss scaling (apex's O3 default: scale 1).
- ``bf16``: autocast to bfloat16; its fp32-sized exponent needs no loss scaling.
- ``tf32``: fp32 with TF32 matmuls/convolutions allowed on tensor cores.
- ``fp32``: plain fp32 (the CPU's natural mode; on CUDA it is O0).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PrecisionMode:
    """What one precision name means for the model, the forward pass and the optimiser."""

    name: str
    description: str
    autocast_dtype: str | None = None  # dtype for torch.autocast; None = no autocast
    model_dtype: str = "float32"  # dtype the model's parameters are cast to
    keep_batchnorm_fp32: bool = False  # batch-norm layers stay fp32 when the model is cast
    master_weights: bool = False  # the optimiser steps on fp32 copies of fp16 parameters
    loss_scaling: bool = False  # dynamic loss scaling (GradScaler-style)
    allow_tf32: bool = False  # TF32 for matmuls and cuDNN convolutions
    devices: frozenset[str] = frozenset({"cuda", "cpu"})  # device types that can run it
    unsupported_hint: str = ""  # what to use instead where a device cannot run it

    @property
    def reduced_precision(self) -> bool:
        """Whether convolutions run in fp16/bf16 (autocast or a cast model): the modes whose
        tensor-core kernels want channels_last inputs."""
        return self.autocast_dtype is not None or self.model_dtype != "float32"


_CUDA_ONLY = frozenset({"cuda"})
_FP16_HINT = "float16 training needs CUDA; on a CPU use `fp32` or `bf16`"

PRECISIONS: dict[str, PrecisionMode] = {
    mode.name: mode
    for mode in (
        PrecisionMode("O0", "fp32, TF32 off"),
        PrecisionMode(
            "tf32",
            "fp32 with TF32 tensor-core matmuls and convolutions",
            allow_tf32=True,
            devices=_CUDA_ONLY,
            unsupported_hint="TF32 exists only on CUDA GPUs; on a CPU use `fp32`",
        ),
        PrecisionMode(
            "O1",
            "autocast fp16 + dynamic loss scaling",
            autocast_dtype="float16",
            loss_scaling=True,
            devices=_CUDA_ONLY,
            unsupported_hint=_FP16_HINT,
        ),
        PrecisionMode(
            "O2",
            "fp16 model (batch-norm fp32), fp32 master weights, dynamic loss scaling",
            model_dtype="float16",
            keep_batchnorm_fp32=True,
            master_weights=True,
            loss_scaling=True,
            devices=_CUDA_ONLY,
            unsupported_hint=_FP16_HINT,
        ),
        PrecisionMode(
            "O3",
            "everything fp16, no loss scaling",
            model_dtype="float16",
            devices=_CUDA_ONLY,
            unsupported_hint=_FP16_HINT,
        ),
        PrecisionMode("bf16", "autocast bfloat16", autocast_dtype="bfloat16"),
        PrecisionMode("fp32", "plain fp32"),
    )
}

PRECISION_NAMES = tuple(PRECISIONS)
# The precisions NVIDIA apex's amp knows (its opt-levels), for cells with `amp_backend: apex`.
APEX_OPT_LEVELS = ("O0", "O1", "O2", "O3")


def get(name: str) -> PrecisionMode:
    """Look a precision up by name, failing with the allowed names."""
    try:
        return PRECISIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown precision {name!r}; allowed: {', '.join(PRECISION_NAMES)}"
        ) from None


def unsupported_reason(name: str, device_type: str) -> str | None:
    """Why ``device_type`` cannot run precision ``name``, or None when it can."""
    mode = get(name)
    if device_type in mode.devices:
        return None
    return (
        f"precision {name} ({mode.description}) cannot run on {device_type}: "
        f"{mode.unsupported_hint}"
    )


def emulated_reason(name: str, device_type: str, bf16_native: bool | None) -> str | None:
    """Why a cell's precision ran emulated, or None: bf16 on a CPU without native bf16
    arithmetic (``environment.bf16_native``, records/cpu.py) is converted to fp32 and back in
    software, so it measures the emulation, not bf16. Unknown (old records): None."""
    mode = get(name)
    uses_bf16 = "bfloat16" in (mode.autocast_dtype, mode.model_dtype)
    if device_type != "cpu" or not uses_bf16 or bf16_native is not False:
        return None
    return (
        f"precision {name} ({mode.description}) on a CPU without native bf16 arithmetic "
        "(no avx512_bf16 or amx_bf16 that oneDNN may use): emulated in software"
    )
