"""torchvision, imported without importing ``torch._dynamo`` (1.2-1.6 s of every job's start).

``torchvision/ops/roi_align.py`` does ``from torch._dynamo.utils import is_compile_supported``
at import time, and ``import torchvision`` reaches it through ``torchvision.models`` ->
``torchvision.ops``. That one line imports all of dynamo (sympy, the bytecode tracer, ...):
measured with ``python -X importtime -c "import torch, torchvision"`` on a 2-core Xeon, torch
1.5 s and torchvision 1.4 s, of which 1.2 s is ``torch._dynamo``. Of the workflow's jobs, the
inference and accuracy jobs build no optimizer and so need no dynamo at all: they save it.
torch.optim would import it in a training or profile job (``torch._disable_dynamo`` on
``add_param_group``, ``graph_break`` around every step), and there
:mod:`nettebench.training.dynamo_stand_in` keeps it out too. Only a ``compile`` cell, DDP or
roi_align's rare fallback (no compiled torchvision ops, or deterministic mode on a GPU) ever
uses dynamo itself.

So torchvision is imported here with a stand-in ``torch._dynamo.utils`` in ``sys.modules`` for
the length of that one import: ``is_compile_supported`` is bound to a function that imports the
real one on its first call, and any other name asked of the stand-in imports the real module at
once (so a torchvision build that wants more of it still gets it, only not faster). The
stand-in is removed before anything else can see it. Where dynamo is already imported, or the
import of torchvision already happened, nothing is replaced.

Every module of the package that uses torchvision imports it from here (``from
nettebench.models.torchvision_import import torchvision``), so the first import in a process
takes this path whichever module comes first. Importing this module imports torchvision: the
commands that run a cell import it only after :func:`nettebench.builds.activate.activate` has
put the cell's torchvision build first on the path, as before.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

DYNAMO_UTILS = "torch._dynamo.utils"


def is_compile_supported(device_type: Any) -> Any:
    """torch's own ``torch._dynamo.utils.is_compile_supported``, imported on the first call."""
    from torch._dynamo.utils import is_compile_supported as real

    return real(device_type)


def _stand_in() -> types.ModuleType:
    """A ``torch._dynamo.utils`` that has ``is_compile_supported`` and imports the real module
    for any other public name (dunder names are not asked of the module: ``inspect.getmodule``,
    which torch.library's registrations call, reads ``__file__`` of every loaded module)."""
    module = types.ModuleType(DYNAMO_UTILS, "stand-in while torchvision is imported")
    module.is_compile_supported = is_compile_supported

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):  # inspect.getmodule asks every module for __file__
            raise AttributeError(name)
        if sys.modules.get(DYNAMO_UTILS) is module:
            del sys.modules[DYNAMO_UTILS]
        return getattr(importlib.import_module(DYNAMO_UTILS), name)

    module.__getattr__ = __getattr__
    return module


def import_torchvision() -> types.ModuleType:
    """``import torchvision``, with dynamo left unimported where it was not imported yet."""
    if "torchvision" in sys.modules or "torch._dynamo" in sys.modules:
        return importlib.import_module("torchvision")
    stand_in = _stand_in()
    sys.modules[DYNAMO_UTILS] = stand_in
    try:
        return importlib.import_module("torchvision")
    finally:
        if sys.modules.get(DYNAMO_UTILS) is stand_in:
            del sys.modules[DYNAMO_UTILS]


torchvision = import_torchvision()
