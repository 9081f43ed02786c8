"""TF32 set so that every reader of torch's two APIs accepts it (models/torch_precision.py).

torch compares the legacy flags with the ``fp32_precision`` settings whenever a legacy getter is
read, and raises "mix of the legacy and new APIs" when they disagree; Inductor, the profiler and
``torch.backends.cudnn.flags()`` read those getters. The flags exist without CUDA, so the set-up
of each precision mode is driven on the ``cuda`` path on any machine. The flags are
process-global: every test here restores them.
"""

from __future__ import annotations

import types
import warnings

import pytest
import torch

from nettebench.models.torch_precision import TorchPrecision, apply_tf32
from nettebench.vocabulary import precision

B = torch.backends
CUDA = torch.device("cuda")  # a device value only: nothing here allocates on it
HAS_NEW_API = hasattr(B.cuda.matmul, "fp32_precision")
needs_new_api = pytest.mark.skipif(not HAS_NEW_API, reason="this torch has no fp32_precision")


def _new_settings() -> dict[str, str]:
    """Every ``fp32_precision`` this torch has, by where it is read."""
    places = {
        "generic": B,
        "cuda": getattr(B, "cuda", None),
        "cudnn": B.cudnn,
        "cuda.matmul": B.cuda.matmul,
        "cudnn.conv": getattr(B.cudnn, "conv", None),
        "cudnn.rnn": getattr(B.cudnn, "rnn", None),
        "mkldnn": getattr(B, "mkldnn", None),
        "mkldnn.matmul": getattr(getattr(B, "mkldnn", None), "matmul", None),
    }
    return {
        name: place.fp32_precision
        for name, place in places.items()
        if place is not None and hasattr(place, "fp32_precision")
    }


def _legacy_readings() -> dict[str, object]:
    """The legacy getters, each read on its own: a RuntimeError is a reading too."""
    getters = {
        "cuda.matmul.allow_tf32": lambda: B.cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": lambda: B.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision,
    }
    readings = {}
    for name, getter in getters.items():
        try:
            readings[name] = getter()
        except RuntimeError as error:
            readings[name] = f"RuntimeError: {str(error)[:90]}"
    return readings


@pytest.fixture
def restore_tf32():
    """Put every setting back as it was, from the outermost to the per-operator ones (the
    legacy setters rewrite the operators' settings, so they come before them)."""
    legacy, new = _legacy_readings(), _new_settings()
    assert not any(str(value).startswith("RuntimeError") for value in legacy.values()), legacy
    yield
    for name in ("generic", "cuda", "cudnn", "mkldnn"):
        if name in new:
            place = {"generic": B, "cuda": B.cuda, "cudnn": B.cudnn, "mkldnn": B.mkldnn}[name]
            place.fp32_precision = new[name]
    torch.set_float32_matmul_precision(legacy["float32_matmul_precision"])
    B.cudnn.allow_tf32 = legacy["cudnn.allow_tf32"]
    for name, place in (
        ("cuda.matmul", B.cuda.matmul),
        ("cudnn.conv", getattr(B.cudnn, "conv", None)),
        ("cudnn.rnn", getattr(B.cudnn, "rnn", None)),
        ("mkldnn.matmul", getattr(getattr(B, "mkldnn", None), "matmul", None)),
    ):
        if name in new:
            place.fp32_precision = new[name]
    assert (_legacy_readings(), _new_settings()) == (legacy, new)


def _expected_legacy(allow: bool) -> dict[str, object]:
    return {
        "cuda.matmul.allow_tf32": allow,
        "cudnn.allow_tf32": allow,
        "float32_matmul_precision": "high" if allow else "highest",
    }


def _set_up(name: str) -> None:
    """What a training step, apex's step and an inference model do with TF32 on CUDA."""
    TorchPrecision.for_mode(precision.get(name), CUDA, channels_last=False).apply_tf32()


def _opposite(name: str) -> str:
    """A mode with the other TF32 setting, to set up before ``name``."""
    allow = precision.get(name).allow_tf32
    return next(n for n in precision.PRECISION_NAMES if precision.get(n).allow_tf32 != allow)


@pytest.mark.parametrize("name", precision.PRECISION_NAMES)
def test_after_each_modes_set_up_every_getter_reads_what_the_mode_says(name, restore_tf32):
    allow = precision.get(name).allow_tf32
    before = _new_settings()
    _set_up(_opposite(name))  # so the set-up under test has to change every flag
    _set_up(name)
    assert _legacy_readings() == _expected_legacy(allow)
    if HAS_NEW_API:
        now = _new_settings()
        wanted = "tf32" if allow else "ieee"
        operators = {op: now[op] for op in ("cuda.matmul", "cudnn.conv", "cudnn.rnn") if op in now}
        assert operators == dict.fromkeys(operators, wanted)
        # the backend-wide settings (and the CPU's oneDNN) are not the trainer's to change
        untouched = {k: v for k, v in now.items() if k not in operators}
        assert untouched == {k: v for k, v in before.items() if k not in operators}


@pytest.mark.parametrize("name", precision.PRECISION_NAMES)
def test_cudnn_flags_works_after_each_modes_set_up(name, restore_tf32):
    """``cudnn.flags()`` reads the legacy cuDNN getter when it enters (Inductor, the profiler and
    torch's own tests use it); it must enter, read consistently inside and leave it so."""
    allow = precision.get(name).allow_tf32
    _set_up(name)
    with B.cudnn.flags(enabled=True, benchmark=False, deterministic=False, allow_tf32=allow):
        assert _legacy_readings() == _expected_legacy(allow)
    assert _legacy_readings() == _expected_legacy(allow)


@needs_new_api
@pytest.mark.parametrize("allow", [True, False])
def test_the_set_up_mends_flags_set_through_the_new_api_only(allow, restore_tf32):
    """What the set-up at 2b03d34 left (``fp32_precision`` only) and what other code may leave:
    the legacy getters raise until a mode is set up."""
    wanted = "tf32" if allow else "ieee"
    B.cuda.matmul.fp32_precision = wanted
    B.cudnn.conv.fp32_precision = wanted
    mixed = _legacy_readings()
    assert any(str(value).startswith("RuntimeError") for value in mixed.values()), mixed
    _set_up("tf32" if allow else "O0")
    assert _legacy_readings() == _expected_legacy(allow)


def test_setting_up_tf32_warns_nothing_on_this_torch(restore_tf32):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _set_up("tf32")
        _set_up("O0")
        _legacy_readings()


def test_the_legacy_flags_deprecation_warning_is_kept_out_and_nothing_else():
    """torch 2.9 and 2.10 warn when the ``allow_tf32`` flags are set; the set-up sets them on
    purpose (the new API alone breaks the legacy getters), so only that warning is held back."""

    class Flags:
        def __init__(self, message: str) -> None:
            self.message = message

        def __setattr__(self, name: str, value) -> None:
            if name == "allow_tf32":
                warnings.warn(self.message, UserWarning, stacklevel=2)
            object.__setattr__(self, name, value)

    deprecation = (
        "Please use the new API settings to control TF32 behavior, such as "
        "torch.backends.cudnn.conv.fp32_precision = 'tf32'"
    )
    quiet = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=Flags(deprecation)))
    quiet.cudnn = Flags(deprecation)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        apply_tf32(quiet, True)
    assert caught == [] and quiet.cuda.matmul.allow_tf32 is True and quiet.cudnn.allow_tf32

    loud = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=Flags("something else")))
    loud.cudnn = Flags("something else")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        apply_tf32(loud, False)
    assert [str(w.message) for w in caught] == ["something else", "something else"]


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


def test_a_cpu_run_leaves_tf32_alone(restore_tf32):
    """TF32 is CUDA's: the set-up on a CPU changes no flag of either API."""
    before = (_legacy_readings(), _new_settings())
    cpu = torch.device("cpu")
    for name in precision.PRECISION_NAMES:
        TorchPrecision.for_mode(precision.get(name), cpu, channels_last=False).apply_tf32()
    assert (_legacy_readings(), _new_settings()) == before
