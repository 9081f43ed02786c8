"""TF32 set by what the installed torch has, never by its version string (training/step.py)."""

from __future__ import annotations

import types
import warnings

import torch

from nettebench.training.step import apply_tf32


def _settings() -> tuple[str, str]:
    return torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision


def test_this_torch_sets_tf32_through_fp32_precision_without_a_warning():
    before = _settings()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the old flags warn on torch >= 2.9
            apply_tf32(torch.backends, True)
            assert _settings() == ("tf32", "tf32")
            apply_tf32(torch.backends, False)
            assert _settings() == ("ieee", "ieee")
    finally:
        torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision = before


def test_a_torch_without_fp32_precision_gets_the_allow_tf32_flags():
    """What torch before 2.9 offers: only the two flags (a namespace with their attributes)."""
    old = types.SimpleNamespace(
        cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=False)),
        cudnn=types.SimpleNamespace(allow_tf32=False),
    )
    apply_tf32(old, True)
    assert old.cuda.matmul.allow_tf32 is True and old.cudnn.allow_tf32 is True
    apply_tf32(old, False)
    assert old.cuda.matmul.allow_tf32 is False and old.cudnn.allow_tf32 is False
