"""Per-epoch checkpoints, so a killed cell resumes from its last finished epoch.

A SLURM preemption or a laptop going to sleep must not cost the whole cell. After every epoch
but the last (which the results follow at once) the trainer writes ``checkpoint.pt`` next to
the cell's results, atomically (a temporary file renamed over the old one), so a kill at any
moment leaves either the previous checkpoint or the new one; a temporary file a kill left mid-save
is removed by the next run (:func:`discard_stale`). Randomness is re-seeded per epoch from
(seed, epoch), so a resumed run draws the same data order and augmentations as an uninterrupted
one. The checkpoint is deleted once the cell's metrics are written: results, not checkpoints, are
what a study keeps.

A checkpoint carries the result's key (:func:`nettebench.training.validity.key`), the same one
``finished.json`` is matched on: a rerun continues from it only when nothing the result depends
on changed (code, inputs, options, packages, hardware), so epochs of the old code are never
stored with epochs of the new one as one result. Any other checkpoint is discarded before the
first epoch, with a line naming the first part that changed; so is every checkpoint under
``--retrain``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from nettebench.records.atomic import open_atomic
from nettebench.training import validity

CHECKPOINT_FILE = "checkpoint.pt"
# What records.atomic.open_atomic names the file it streams into until the rename.
TEMPORARY_PATTERN = f".{CHECKPOINT_FILE}.*.tmp"


def save(out_dir: str | os.PathLike, state: dict[str, Any]) -> Path:
    """Write ``state`` (must hold ``key``, the result's key) as the cell's checkpoint, atomically.

    Streamed into the temporary file as it is serialised: no copy of the whole checkpoint in
    memory (about 94 MB for resnet18 under O1) on top of the tensors' own copies to the host.
    """
    if "key" not in state:
        raise ValueError("a checkpoint must carry the result's key (validity.key)")
    path = Path(out_dir) / CHECKPOINT_FILE
    with open_atomic(path) as handle:
        torch.save(state, handle)
    return path


def load(out_dir: str | os.PathLike, key: dict[str, Any]) -> dict[str, Any] | None:
    """The cell's checkpoint, or None when there is none or it was written under another key."""
    path = Path(out_dir) / CHECKPOINT_FILE
    if not path.is_file():
        return None
    state = torch.load(path, map_location="cpu", weights_only=False)
    if validity.first_difference(state.get("key"), key) is not None:
        return None
    return state


def discard_stale(out_dir: str | os.PathLike, key: dict[str, Any], retrain: bool) -> list[str]:
    """Before the first epoch: remove temporary files of a save a kill interrupted, and the
    checkpoint unless it holds ``key`` (always, under ``retrain``). The lines to log, one per
    thing removed."""
    out_dir = Path(out_dir)
    said = []
    leftovers = sorted(out_dir.glob(TEMPORARY_PATTERN))
    for leftover in leftovers:
        leftover.unlink(missing_ok=True)
    if leftovers:
        said.append(
            f"removed {len(leftovers)} temporary file(s) of a checkpoint save that was cut short "
            f"({', '.join(p.name for p in leftovers)})"
        )
    path = out_dir / CHECKPOINT_FILE
    if not path.is_file():
        return said
    why = "--retrain trains from scratch" if retrain else _mismatch(path, key)
    if why is not None:
        path.unlink(missing_ok=True)
        said.append(f"discarded the checkpoint {path}: {why}; training from scratch")
    return said


def _mismatch(path: Path, key: dict[str, Any]) -> str | None:
    """Why the checkpoint at ``path`` may not be resumed under ``key`` (None: it may). Read
    memory-mapped: the tensors are not read to look at the key."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=False, mmap=True)
    except Exception as error:  # a torn or foreign file: nothing to resume from
        return f"it is unreadable ({type(error).__name__}: {error})"
    changed = validity.first_difference(state.get("key"), key)
    return None if changed is None else f"it was written with another {changed}"


def remove(out_dir: str | os.PathLike) -> None:
    (Path(out_dir) / CHECKPOINT_FILE).unlink(missing_ok=True)
