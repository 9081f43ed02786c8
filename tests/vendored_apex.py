"""Where the vendored NVIDIA apex 25.05 lies, and its ``apex.amp`` patching of torch on a CPU.

The tarball (a one-commit git repository, the last release with ``apex.amp``) lies in the
project's shared notes beside the checkout; a clean clone made elsewhere (CI's) finds it through
``$NETTEBENCH_VENDOR_DIR`` or the workplace's fixed place.

:func:`o1_patches` runs apex's own O1 patching (``amp.init``, what ``amp.initialize(...,
opt_level="O1")`` runs) from that source, so code meant to run under apex O1 on a GPU can be
run under it here. Two things are changed, and only these: apex's cast functions act on CPU
tensors as they act on CUDA ones (apex leaves anything not ``is_cuda`` alone, so on a CPU its
fp32/fp16 lists would change nothing), and the loss scaler's ``torch.cuda.IntTensor`` overflow
buffer is not made (a loss scaler is not what is tested). The promotion wrappers, the patch
lists and the handle are apex's.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
APEX_TARBALL = "apex-25.05-git.tar.gz"
_VENDOR_DIRS = [
    *(
        [Path(os.environ["NETTEBENCH_VENDOR_DIR"])]
        if os.environ.get("NETTEBENCH_VENDOR_DIR")
        else []
    ),
    REPO.parent / "shared" / "vendor",
    Path("/work/shared/vendor"),
]
VENDORED_APEX = next(
    (d / APEX_TARBALL for d in _VENDOR_DIRS if (d / APEX_TARBALL).is_file()),
    _VENDOR_DIRS[0] / APEX_TARBALL,
)


def extract(dest: Path) -> Path:
    """The vendored apex repository, extracted under ``dest``; returns its checkout."""
    with tarfile.open(VENDORED_APEX) as archive:
        archive.extractall(dest, filter="data")
    return dest / "apex"


def _forget_apex() -> None:
    for name in [name for name in sys.modules if name == "apex" or name.startswith("apex.")]:
        del sys.modules[name]


@contextlib.contextmanager
def imported(source: Path):
    """``apex.amp`` imported from the checkout ``source`` (Python only: no amp_C), forgotten
    afterwards."""
    _forget_apex()
    sys.path.insert(0, str(source))
    try:
        yield importlib.import_module("apex.amp")
    finally:
        sys.path.remove(str(source))
        _forget_apex()


def _as_on_cuda(to_type: str, convert: str):
    """apex's ``maybe_float``/``maybe_half`` without their ``is_cuda`` test."""
    from apex.amp import utils

    def cast(x, name="", verbose=False):
        if utils.is_nested(x):
            return type(x)([cast(y) for y in x])
        return x if utils.type_string(x) == to_type else getattr(x, convert)()

    return cast


class _NoLossScaler:
    def __init__(self, *args, **kwargs) -> None:
        pass


@contextlib.contextmanager
def o1_patches(amp):
    """torch patched as apex O1 patches it on a GPU (see the module docstring); unpatched
    after, through :func:`nettebench.training.apex.undo_earlier_patches`."""
    from apex.amp import handle as handles
    from apex.amp import utils

    from nettebench.training.apex import undo_earlier_patches

    saved = (utils.maybe_float, utils.maybe_half, handles.LossScaler)
    rnn_vf = sys.modules["torch.nn.modules.rnn"]._VF
    utils.maybe_float = _as_on_cuda("FloatTensor", "float")
    utils.maybe_half = _as_on_cuda("HalfTensor", "half")
    handles.LossScaler = _NoLossScaler
    try:
        yield amp.amp.init(enabled=True)
    finally:
        undo_earlier_patches()
        utils.maybe_float, utils.maybe_half, handles.LossScaler = saved
        sys.modules["torch.nn.modules.rnn"]._VF = rnn_vf
