"""NVIDIA apex's ``apex.amp`` as an optional training backend (``amp_backend: apex``).

The study's mixed-precision runs used apex's ``examples/imagenet/main_amp.py`` with
``--opt-level O0..O3``. :class:`nettebench.training.step.TrainingStep` reproduces those levels
with PyTorch's native tools; :class:`ApexTrainingStep` runs them through apex itself, so the two
can be compared. It has TrainingStep's interface and follows apex's documented API (the 24.x
``main_amp.py`` and the ``apex.amp`` docs): ``amp.initialize`` on an fp32 CUDA model and its SGD
optimiser, ``amp.scale_loss`` around backward, ``amp.state_dict`` in checkpoints.

It needs NVIDIA apex with ``apex.amp`` (a release before 25.07; a Python-only build of 25.05
is enough, ``tests/test_workflow_apex.py`` builds the vendored one through the workflow).
Without it :func:`require_apex_amp` explains why the cell cannot run; on a CPU apex itself
refuses the model (``amp.initialize`` wants CUDA tensors), which becomes
:class:`ApexUnsupported`: the cell is recorded ``unsupported`` with apex's own words.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from types import ModuleType

import torch
from torch import nn

from nettebench.models.torch_precision import TorchPrecision
from nettebench.records.environment import apex_package_dirs, is_nvidia_apex
from nettebench.training.step import main_logits
from nettebench.vocabulary import precision


class ApexAmpUnavailable(RuntimeError):
    """NVIDIA apex's ``apex.amp`` cannot be imported here."""


class ApexUnsupported(RuntimeError):
    """apex.amp is installed but refuses this device (it is CUDA-only): a recorded outcome,
    ``unsupported``, with apex's own reason, like a precision the device cannot run."""


def require_apex_amp() -> ModuleType:
    """The ``apex.amp`` module, or :class:`ApexAmpUnavailable` saying why not and what to do."""
    where = apex_package_dirs()
    if where is None:
        raise ApexAmpUnavailable(_message("no package named `apex` is installed"))
    if not is_nvidia_apex(where):
        raise ApexAmpUnavailable(
            _message(
                f"the `apex` installed here ({', '.join(map(str, where))}) is not "
                "NVIDIA apex but PyPI's unrelated package named `apex`, a web toolkit: it has "
                "none of apex.amp, apex.optimizers, apex.normalization. Uninstall it "
                "(`pip uninstall apex`) before installing NVIDIA apex"
            )
        )
    try:
        return importlib.import_module("apex.amp")
    except Exception as error:  # a missing module, or an extension built for another torch
        raise ApexAmpUnavailable(
            _message(
                f"NVIDIA apex is installed ({', '.join(map(str, where))}) but importing "
                f"apex.amp failed ({type(error).__name__}: {error})"
            )
        ) from error


def _message(cause: str) -> str:
    return (
        f"amp_backend: apex needs NVIDIA apex's `apex.amp`, which could not be imported: {cause}. "
        "`apex.amp` was removed from apex in release 25.07, so a current apex build has no amp; "
        "the native precision modes (O0, O1, O2, O3, bf16 through torch.autocast + GradScaler, "
        "amp_backend: native) are its replacement. To compare against the historical apex runs, "
        "build an apex release that still has `apex.amp` from source for this torch and CUDA "
        "(e.g. a 24.x tag of https://github.com/NVIDIA/apex). Note that `pip install apex` "
        "installs PyPI's package named `apex`, an unrelated web toolkit, not NVIDIA apex."
    )


def undo_earlier_patches() -> int:
    """Put back the torch functions an earlier ``amp.initialize`` in this process patched.

    apex O1 patches torch process-wide (``amp.init``) and never unpatches; a second
    ``amp.initialize`` (the cell job's ceiling after the cell's epochs) would wrap every wrapper
    again, and the ceiling would time two layers of apex's Python per patched call. apex keeps
    what it replaced in its handle (``_all_wrappers``: module, name, the function before);
    restored newest first, a function patched twice ends up as it was before the first. Returns
    how many patches were undone (0: none were in place).
    """
    state = importlib.import_module("apex.amp._amp_state")._amp_state
    handle = getattr(state, "handle", None)
    saved = list(getattr(handle, "_all_wrappers", None) or [])
    utils = importlib.import_module("apex.amp.utils")
    for module, name, before in reversed(saved):
        utils.set_func(module, name, before)
    if saved:
        handle._all_wrappers = []
    return len(saved)


class ApexTrainingStep:
    """One optimiser step under an apex opt-level, with :class:`TrainingStep`'s interface.

    The precision name is the opt-level (O0..O3); apex's defaults for it apply (dynamic loss
    scaling for O1 and O2, a static scale of 1 for O0 and O3; O2 keeps batch-norm and master
    weights in fp32). The model arrives in fp32 and ``amp.initialize`` casts it. Inputs stay fp32
    as in apex's ``main_amp.py``: for O2/O3 ``amp.initialize`` patches the model's forward to cast
    floating-point inputs to fp16 and outputs back to fp32. :meth:`autocast` is a no-op, because
    apex casts by itself (O1 patches torch functions process-wide).
    """

    scaler = None  # apex keeps its loss scalers inside apex.amp (see state_dict)

    def __init__(
        self,
        model: nn.Module,
        mode: precision.PrecisionMode | str,
        device: torch.device,
        *,
        lr: float,
        momentum: float,
        weight_decay: float,
        channels_last: bool = False,
    ) -> None:
        name = mode if isinstance(mode, str) else mode.name
        if name not in precision.APEX_OPT_LEVELS:
            raise ValueError(
                f"amp_backend apex takes apex's opt-levels as precision: "
                f"{', '.join(precision.APEX_OPT_LEVELS)}; got {name!r}"
            )
        self.device = torch.device(device)
        self.amp = require_apex_amp()
        self.mode = precision.get(name)
        # The native modes' TF32 and memory format; dtypes and casts are apex's own (below).
        self.precision = TorchPrecision.for_mode(
            self.mode, self.device, channels_last=channels_last
        )
        self.precision.apply_tf32()  # off: the study's T4 had no TF32
        model = model.to(self.device, memory_format=self.precision.memory_format)
        optimizer = torch.optim.SGD(
            model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay
        )
        undo_earlier_patches()  # a second runner in this process (the ceiling after the cell)
        try:
            self.model, self.optimizer = self.amp.initialize(model, optimizer, opt_level=name)
        except RuntimeError as error:
            if self.device.type == "cuda":
                raise
            # apex.amp is CUDA-only and says so itself: that is the cell's outcome.
            raise ApexUnsupported(
                f"amp_backend apex cannot train on {self.device.type}: apex.amp refused the "
                f"model: {' '.join(str(error).split())}"
            ) from error
        # apex creates O2's fp32 master weights lazily; its patched zero_grad does it now, so
        # master_params and load_state_dict see them from the start.
        self.optimizer.zero_grad()
        self.criterion = nn.CrossEntropyLoss()

    @property
    def master_params(self) -> list[torch.Tensor] | None:
        """apex's fp32 master weights for O2, None for the levels that have none."""
        if not self.mode.master_weights:
            return None
        return list(self.amp.master_params(self.optimizer))

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def prepare_inputs(self, images: torch.Tensor) -> torch.Tensor:
        """Move a batch to the device in fp32; apex casts it for O2/O3 inside the forward."""
        return images.to(
            self.device,
            dtype=torch.float32,
            memory_format=self.precision.memory_format,
            non_blocking=True,
        )

    def step(self, images: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Train on one batch the way ``main_amp.py`` does; returns the detached fp32 loss."""
        outputs = main_logits(self.model(images))
        loss = self.criterion(outputs.float(), targets)
        self.optimizer.zero_grad()
        with self.amp.scale_loss(loss, self.optimizer) as scaled_loss:
            scaled_loss.backward()
        self.optimizer.step()
        return loss.detach().float()

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def state_dict(self) -> dict:
        """Model, optimiser and apex's loss scalers (apex's checkpointing recipe), plus O2's
        master weights, which the optimiser's state dict does not hold."""
        masters = self.master_params
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "amp": self.amp.state_dict(),
            "master_params": None if masters is None else [p.detach().clone() for p in masters],
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore in apex's order (after ``amp.initialize``: model, optimiser, amp)."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.amp.load_state_dict(state["amp"])
        masters = self.master_params
        if masters is not None:
            with torch.no_grad():
                for master, saved in zip(masters, state["master_params"], strict=True):
                    master.copy_(saved)
