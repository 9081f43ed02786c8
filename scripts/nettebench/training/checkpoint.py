"""Per-epoch checkpoints, so a killed cell resumes from its last finished epoch.

A SLURM preemption or a laptop going to sleep must not cost the whole cell. After every epoch
but the last (which the results follow at once) the trainer writes ``checkpoint.pt`` next to
the cell's results, atomically (a temporary file renamed over the old one), so a kill at any
moment leaves either the previous checkpoint or the new one; a temporary file a kill left mid-save
is removed by the next run (:func:`discard_stale`). Randomness is re-seeded per epoch from
(seed, epoch), so a resumed run draws the same data order and augmentations as an uninterrupted
one. The checkpoint is deleted once the cell's metrics are written: results, not checkpoints, are
what a study keeps.

A save costs the trainer only the copy of the state to the host (:func:`save`): the file is
serialised, written and fsynced by a thread of its own while the next epoch trains. Measured on
the CPU twin (resnet18 weights + SGD momentum, 89.5 MB, to a local disk, load average ~14 on 2
cores): a synchronous save took 476 ms (median of 7), the host copy 213 ms, a load 238 ms; an
H200 cell of 10 epochs of a few seconds each would pay ~9 x 0.4 s, about a tenth of its wall
time, where the copy to the host (~10 ms per save over PCIe) and the serialising thread beside
the training loop remain. So on a GPU, where an epoch can take under a second, a checkpoint is
written at most every :data:`GPU_EVERY_S` seconds (:func:`due`: the first epoch's always), and a
kill costs at most that much; on a CPU every epoch keeps its checkpoint. What a stop reports is
the epochs the checkpoint on disk holds (:func:`saved_epochs`), and a rerun resumes from those,
so the results are the same either way (every epoch is seeded from (seed, epoch)). One write at
a time, in order: a save, a load or a removal first waits for the write before it
(:func:`wait`), so a removal after the results never sees a checkpoint reappear.

A checkpoint carries the result's key (:func:`nettebench.training.validity.key`), the same one
``finished.json`` is matched on: a rerun continues from it only when nothing the result depends
on changed (code, inputs, options, packages, hardware), so epochs of the old code are never
stored with epochs of the new one as one result. Any other checkpoint is discarded before the
first epoch, with a line naming the first part that changed; so is every checkpoint under
``--retrain``.

A resume is said twice (:func:`resumed`): in the cell's log, and in the terminal the run was
started from (:mod:`nettebench.vocabulary.terminal`), so a user watching the run sees which cell
goes on from where, and from which file.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from nettebench.training import startup, validity
from nettebench.vocabulary import terminal
from nettebench.vocabulary.atomic import open_atomic

CHECKPOINT_FILE = "checkpoint.pt"
GPU_EVERY_S = 10.0  # on a GPU, at most one checkpoint per this many seconds
# What vocabulary.atomic.open_atomic names the file it streams into until the rename.
TEMPORARY_PATTERN = f".{CHECKPOINT_FILE}.*.tmp"


def save(out_dir: str | os.PathLike, state: dict[str, Any]) -> Path:
    """Write ``state`` (must hold ``key``, the result's key) as the cell's checkpoint, atomically,
    in the background; returns once the state is copied (tensors to the host, containers
    anew), so training can change its own copy at once. An error of the write is raised by the
    next :func:`save`, :func:`load` or :func:`wait`.

    Streamed into the temporary file as it is serialised: no copy of the whole file in memory
    (about 94 MB for resnet18 under O1) on top of the host copy of the tensors.
    """
    if "key" not in state:
        raise ValueError("a checkpoint must carry the result's key (validity.key)")
    began = time.time()
    wait()
    path = Path(out_dir) / CHECKPOINT_FILE
    snapshot = _host_copy(state)
    startup.add("checkpoints", time.time() - began)
    if _WRITER["pool"] is None:
        _WRITER["pool"] = ThreadPoolExecutor(1, thread_name_prefix="nettebench-checkpoint")
    _WRITER["pending"] = _WRITER["pool"].submit(_write, path, snapshot)
    _WRITER["saved_at"], _WRITER["epochs"] = time.monotonic(), len(state.get("rows") or ())
    return path


def due(device, every_s: float = GPU_EVERY_S) -> bool:
    """Whether the epoch that just ended is checkpointed: always on a CPU; on a GPU the first
    of this run, then once ``every_s`` seconds have passed since the last save."""
    if device.type != "cuda" or _WRITER["saved_at"] is None:
        return True
    return time.monotonic() - _WRITER["saved_at"] >= every_s


def saved_epochs(rows: list) -> int:
    """The epochs the cell's checkpoint holds (for the line a stop prints): those of the last
    save or load of this run, else ``len(rows)``."""
    return len(rows) if _WRITER["epochs"] is None else _WRITER["epochs"]


def wait() -> None:
    """Until the last save's write ended; its error, if it failed (the previous checkpoint is
    then the one on disk)."""
    pending, _WRITER["pending"] = _WRITER["pending"], None
    if pending is not None:
        pending.result()


# The one writer thread and its pending write (non-daemon: a process exiting after an
# interruption finishes the write first).
_WRITER: dict[str, Any] = {"pool": None, "pending": None, "saved_at": None, "epochs": None}


def _write(path: Path, state: dict[str, Any]) -> Path:
    with open_atomic(path) as handle:
        torch.save(state, handle)
    return path


def _host_copy(value: Any) -> Any:
    """``value`` with every tensor copied to the host and every dict, list and tuple anew, so
    nothing the trainer changes after :func:`save` reaches the file (the rows list grows, the
    weights step on)."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {name: _host_copy(item) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_host_copy(item) for item in value)
    return value


def load(out_dir: str | os.PathLike, key: dict[str, Any]) -> dict[str, Any] | None:
    """The cell's checkpoint, or None when there is none or it was written under another key.
    Called as a cell's epochs begin: :func:`due` and :func:`saved_epochs` start over."""
    wait()
    _WRITER["saved_at"] = _WRITER["epochs"] = None
    path = Path(out_dir) / CHECKPOINT_FILE
    if not path.is_file():
        return None
    state = torch.load(path, map_location="cpu", weights_only=False)
    if validity.first_difference(state.get("key"), key) is not None:
        return None
    _WRITER["epochs"] = len(state.get("rows") or ())
    return state


def resumed(out_dir: str | os.PathLike, cell, epochs_done: int) -> None:
    """Say that ``cell`` resumes from its checkpoint after ``epochs_done`` epochs: a line in the
    log, and one in the terminal that names the cell and the file."""
    print(f"resumed from the checkpoint after epoch {epochs_done}", flush=True)
    terminal.say(
        f"{cell.path()} resumes after epoch {epochs_done}/{cell.epochs} from its checkpoint "
        f"({Path(out_dir) / CHECKPOINT_FILE})"
    )


def discard_stale(out_dir: str | os.PathLike, key: dict[str, Any], retrain: bool) -> list[str]:
    """Before the first epoch: remove temporary files of a save a kill interrupted, and the
    checkpoint unless it holds ``key`` (always, under ``retrain``). The lines to log, one per
    thing removed."""
    wait()
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
    why = "asked to retrain (--retrain)" if retrain else _mismatch(path, key)
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
    return None if changed is None else f"it no longer matches ({changed})"


def remove(out_dir: str | os.PathLike) -> None:
    """Delete the checkpoint (the results are written): after the pending write, whatever it
    came to (a failed one costs nothing now, but is said)."""
    try:
        wait()
    except Exception as error:
        print(f"warning: the last checkpoint save had failed: {error}", file=sys.stderr)
    (Path(out_dir) / CHECKPOINT_FILE).unlink(missing_ok=True)


def save_weights(path: str | os.PathLike, model, cell_id: str) -> Path:
    """A finished cell's final weights in fp32 (``--weights``, for nettebench.inference's
    accuracy by precision); ``model`` None (the cell did not finish) writes ``state_dict`` None,
    so the declared output exists and says why it is empty."""
    state = None
    if model is not None:
        state = {
            k: v.detach().float() if v.is_floating_point() else v
            for k, v in model.state_dict().items()
        }
    with open_atomic(Path(path)) as handle:
        torch.save({"cell_id": cell_id, "state_dict": state}, handle)
    return Path(path)
