"""Every aten op a block of code runs and the bytes it wrote: the CPU twin of CUDA's sync debug
mode and of counting a pipeline's memory traffic.

On a CPU nothing synchronises with a device, but the ops that would on CUDA are the same ops
wherever they run: reading a value back into Python (``_local_scalar_dense``: ``item()``,
``bool()``, ``int()``), making a tensor from Python data (``lift_fresh``: on CUDA a pageable
host-to-device copy, which waits for it), indexing with a host list or a mask (``index.Tensor``)
and ops whose output size depends on the data (``nonzero``, ``masked_select``, ``unique``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SYNCING_OPS = (
    "aten._local_scalar_dense",
    "aten.lift_fresh",
    "aten.lift_fresh_copy",
    "aten.index.Tensor",
    "aten.nonzero",
    "aten.masked_select",
    "aten._unique2",
    "aten.unique_consecutive",
)

# Ops that allocate without writing anything.
_ALLOCATING_ONLY = ("aten.empty", "aten.new_empty")


@dataclass
class Op:
    name: str  # e.g. "aten.addcmul.out"
    written: int  # bytes it wrote (a new output, an out= or in-place target; not empty())
    fresh: int  # bytes of the new tensors it allocated (outputs that alias no input)


class OpLog(TorchDispatchMode):
    """``with OpLog() as log: ...`` records ``log.ops``."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[Op] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        values = out if isinstance(out, (tuple, list)) else (out,)
        written = fresh = 0
        for returned, value in zip(func._schema.returns, values, strict=False):
            if not isinstance(value, torch.Tensor):
                continue
            size = value.numel() * value.element_size()
            alias = returned.alias_info
            if alias is None:
                written += size
                fresh += size
            elif alias.is_write:
                written += size
        name = str(func)
        if name.startswith(_ALLOCATING_ONLY):
            written = 0
        self.ops.append(Op(name, written, fresh))
        return out

    def names(self) -> list[str]:
        return [op.name for op in self.ops]

    def syncing(self) -> list[str]:
        """The recorded ops that would wait for the device on CUDA."""
        return [name for name in self.names() if name.startswith(SYNCING_OPS)]

    def written(self) -> int:
        return sum(op.written for op in self.ops)
