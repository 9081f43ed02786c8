"""torch.optim without importing ``torch._dynamo`` (1.2-1.4 CPU-s of every training process).

In eager mode torch.optim asks three things of dynamo, none of which does anything while
nothing is compiled: ``torch._disable_dynamo`` wraps ``add_param_group``, ``state_dict``,
``load_state_dict`` and the update functions (``sgd``) in ``torch._dynamo.disable`` on their
first call (which, with nothing compiling, then just calls them), and ``Optimizer.step``'s
``_use_grad`` does ``import torch._dynamo`` and calls ``torch._dynamo.graph_break()`` (a no-op
outside tracing) around every step. For that, the first optimizer call imports all of dynamo
(sympy, the bytecode tracer): with the pinned torch on the 2-core AVX-512 EPYC, a 2-epoch
resnet18 cell of 40 images (``python -m nettebench.training``) took 3.9-4.3 CPU-s with it and
2.6-2.7 without it, three runs each.

So while the optimizer is built and called (:func:`optimizer_calls`), ``sys.modules`` holds a
stand-in ``torch._dynamo`` that answers those names as dynamo does when nothing compiles:
``disable`` returns the function, ``graph_break`` does nothing, ``is_compiling`` is False. Any
other name asked of it loads the real dynamo and answers from it. Whenever the real dynamo is
imported, through the stand-in or by anything else (a compiled model, DDP), the functions the
stand-in "disabled" are forgotten (torch caches the wrapper on the function as
``__dynamo_disable``), so from then on torch wraps them in the real ``disable``, as if the
stand-in had never been there. Where dynamo is loaded already, nothing is replaced.

Limits, said where they apply: a submodule import (``import torch._dynamo.utils``) cannot be
served by a stand-in, so the stand-in is used only with the torch versions whose optimizer code
the tests ran under it (:data:`VERIFIED_TORCH`: tests/test_dynamo_stand_in.py trains, saves and
restores with the default, the foreach and the fused SGD and a GradScaler, the CUDA path's
logic, on the CPU, and compares every weight with a run under the real dynamo); other versions
import dynamo as usual. A ``compile`` cell never uses it (:mod:`.step`).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch

DYNAMO = "torch._dynamo"
# torch releases (major.minor) whose torch.optim ran under the stand-in in the tests; the pin
# in envs/constraints.txt must be one of them (tests/test_dynamo_stand_in.py).
VERIFIED_TORCH = ("2.14",)
CACHE_ATTRIBUTE = "__dynamo_disable"  # where torch._disable_dynamo keeps the wrapped function


def torch_release(version: str = torch.__version__) -> str:
    """``2.14`` of ``2.14.1+cu130``."""
    return ".".join(version.split("+")[0].split(".")[:2])


class _StandIn(types.ModuleType):
    """``torch._dynamo`` as torch.optim meets it while nothing compiles."""

    def __init__(self) -> None:
        super().__init__(DYNAMO, "stand-in while torch.optim runs (nettebench)")
        self.disabled: list[Callable] = []  # what to forget once the real dynamo is loaded

    def disable(self, fn: Callable | None = None, recursive: bool = True, **_: Any) -> Any:
        if fn is None:  # the decorator form, disable(recursive=False)
            return lambda function: self.disable(function, recursive)
        self.disabled.append(fn)
        return fn

    def graph_break(self, *_: Any, **__: Any) -> None:
        return None

    def is_compiling(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # inspect.getmodule asks every module for __file__
            raise AttributeError(name)
        return getattr(load_real_dynamo(), name)


STAND_IN = _StandIn()


def forget_disabled() -> None:
    """Drop the wrappers torch cached from the stand-in: the next call wraps anew."""
    while STAND_IN.disabled:
        vars(STAND_IN.disabled.pop()).pop(CACHE_ATTRIBUTE, None)


class _ForgetOnRealImport(importlib.abc.MetaPathFinder):
    """Sees the real ``torch._dynamo`` being imported, by whatever imports it, and forgets the
    stand-in's wrappers first; finds nothing itself. It stays on ``sys.meta_path`` (a string
    comparison per import of a new module): removing itself while Python iterates that list
    would skip the finder after it for this one import."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname == DYNAMO:
            forget_disabled()
        return None


FINDER = _ForgetOnRealImport()


def load_real_dynamo() -> types.ModuleType:
    """The real ``torch._dynamo``, with the stand-in out of the way (its import passes
    :data:`FINDER`, which forgets the stand-in's wrappers)."""
    if sys.modules.get(DYNAMO) is STAND_IN:
        del sys.modules[DYNAMO]
    return importlib.import_module(DYNAMO)


TORCH_VERIFIED = torch_release() in VERIFIED_TORCH  # read once: checked on every step


def stand_in_applies() -> bool:
    return TORCH_VERIFIED and DYNAMO not in sys.modules


@contextlib.contextmanager
def optimizer_calls(enabled: bool = True) -> Iterator[None]:
    """The stand-in in place for the length of the block, where dynamo is not loaded yet (and
    ``enabled``: a ``compile`` cell passes False)."""
    if not enabled or not stand_in_applies():
        yield
        return
    if FINDER not in sys.meta_path:
        sys.meta_path.insert(0, FINDER)
    sys.modules[DYNAMO] = STAND_IN
    try:
        yield
    finally:
        if sys.modules.get(DYNAMO) is STAND_IN:
            del sys.modules[DYNAMO]
