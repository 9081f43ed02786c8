"""One cell of the study: its parameters, their defaults, its identity and where it lives.

A cell's *identity* is the set of parameters that tell it apart: the core axes (dataset, model,
precision, batch size, epochs, seed) always, and any other parameter only when it differs from
its default. The identity alone decides the cell's directory, its hash and the arguments the
workflow passes to the trainer. That is what lets a later version add a parameter (say
``loader`` or ``torchvision``) with a default without moving existing results or making
Snakemake think they are outdated: cells that keep the default keep their identity.

Imports nothing heavy: the workflow builds every cell while it parses the config.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from nettebench.vocabulary import precision

# Always part of a cell's identity and path, in this order.
CORE_KEYS = ("dataset", "model", "precision", "batch_size", "epochs", "seed")
# Short path labels for the core keys (``batch~256`` reads better than ``batch_size~256``).
PATH_LABELS = {"batch_size": "batch"}
# The reference validates on a centre crop of an image resized to crop / 0.875 (224 -> 256).
VAL_RESIZE_RATIO = 0.875
# The decoded store keeps a training image's longer side up to 1.5x its shorter one (3:2).
STORE_MAX_ASPECT = 1.5
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9._+-]+$")
# Parameters that pick a library build per cell (nettebench.builds.activate): the environment's own
# copy, or one built from source under the config's `builds:` section.
LIBRARY_PARAMETERS = ("torchvision", "apex")
INSTALLED = "installed"
# Parameters of a whole run rather than axes of its matrix: set once at the top level of the
# config (``machine: t4``, ``--config machine=t4``) and given to every cell of that run.
RUN_PARAMETERS = ("machine",)


@dataclasses.dataclass(frozen=True)
class CellSpec:
    """Every parameter of a training cell, with the defaults of the reference recipe.

    ``schemas/config.schema.yaml`` documents the same defaults for config authors;
    ``tests/test_cell.py`` keeps the two equal.
    """

    dataset: str
    model: str = "resnet18"
    precision: str = "O0"
    batch_size: int | str = 256  # or "auto": halve from 256 until a training step fits
    epochs: int = 10
    seed: int = 0
    workers: int = 4  # DataLoader worker processes (the study's -j)
    image_size: int = 224  # training crop; validation resizes to image_size / 0.875, centre-crops
    device: str = "auto"  # auto (CUDA when present, else CPU), cpu or cuda
    max_steps: int | None = None  # run this many steps per epoch, extrapolate epoch times
    lr: float | None = None  # None: the reference 0.1 x batch_size / 256
    momentum: float = 0.9
    weight_decay: float = 1e-4
    lr_schedule: str = "step"  # step (x0.1 every 30 epochs, the reference) or cosine
    # NHWC memory format for the model and its inputs; auto: on for the mixed- and
    # half-precision modes, whose tensor-core convolutions want NHWC, off otherwise
    channels_last: bool | str = "auto"
    deterministic: bool = False  # deterministic algorithms, cuDNN autotuning off
    pretrained: bool = False  # start from the libraries' ImageNet weights (new classifier head)
    amp_backend: str = "native"  # native (torch.autocast) or apex (NVIDIA apex.amp, O0-O3)
    loader: str = "pil"  # pil (the reference ImageFolder + PIL pipeline) or cached
    compile: bool = False  # torch.compile the model; its compile time is reported apart
    torchvision: str = "installed"  # installed, or a source build named under `builds.torchvision`
    apex: str = "installed"  # installed, or a source build named under `builds.apex`
    # cuDNN autotuning (torch.backends.cudnn.benchmark, as the reference sets it); always off
    # under deterministic
    cudnn_benchmark: bool = True
    # cached loader on a GPU: auto (in device memory when the store fits in half the free
    # memory, else streamed from host memory), device (always resident) or host (always
    # streamed); nothing to choose on a CPU, where the store is host memory already
    store_placement: str = "auto"
    # installed, or a package environment named under `environments:` (pinned packages from the
    # registry, installed into a prefix of their own that the cell puts first on its path)
    environment: str = "installed"
    # Data-parallel processes (torchrun's --nproc-per-node): one per GPU (NCCL) or CPU process
    # (gloo) under DistributedDataParallel; batch_size stays the global batch, split across them
    # (nettebench.training.distributed). 1, the default, is the plain single-process cell.
    processes: int = 1
    # The machine or site label of the run (top-level `machine:`): part of the path and hash
    # only when set, so results of two clusters never land on each other's paths.
    machine: str | None = None

    def effective_lr(self, batch_size: int | None = None) -> float:
        """The learning rate used: explicit, or the reference 0.1 scaled with the batch size
        (``batch_size`` is the size actually used, which ``auto`` only knows at run time)."""
        if self.lr is not None:
            return self.lr
        return 0.1 * (self.batch_size if batch_size is None else batch_size) / 256

    def uses_channels_last(self) -> bool:
        """``channels_last`` resolved: ``auto`` is on exactly for the reduced-precision modes."""
        if self.channels_last == "auto":
            return precision.get(self.precision).reduced_precision
        return bool(self.channels_last)

    def store_resolution(self) -> int:
        """Side of the decoded store a ``cached`` cell samples from: the reference's
        validation resize (224 -> 256), so crops have the context the reference's have."""
        return round(self.image_size / VAL_RESIZE_RATIO)

    def identity(self) -> dict[str, Any]:
        """Core keys plus every parameter that differs from its default, in field order."""
        return identity_of(self, CORE_KEYS)

    def cell_id(self) -> str:
        """A short stable hash of the identity (with the machine label, when the run has one)."""
        blob = json.dumps(self.identity(), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def path(self) -> str:
        """``<dataset>/model~<m>/precision~<p>/batch~<b>/epochs~<e>/seed~<s>[/<key>~<v>...]``.

        Non-default extras follow the core keys sorted by name, one directory level each, so a
        human can find a cell and Snakemake can tell cells apart; a run's label (``machine``)
        comes last, so two machines' copies of a cell sit side by side.
        """
        return identity_path(self.identity(), CORE_KEYS)

    def cli_args(self) -> list[str]:
        """The trainer's command-line arguments for this cell's identity (defaults omitted)."""
        return identity_args(self.identity())

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def store_frame_width(resolution: int) -> int:
    """Width of a training image's slot in a store of ``resolution``: the longest longer side
    a stored frame keeps (here, so the workflow can size jobs without importing the store)."""
    return int(resolution * STORE_MAX_ASPECT)


def field_defaults() -> dict[str, Any]:
    """Every parameter's default (``dataset`` has none and is left out)."""
    return {
        field.name: field.default
        for field in dataclasses.fields(CellSpec)
        if field.default is not dataclasses.MISSING
    }


PARAMETER_NAMES = tuple(field.name for field in dataclasses.fields(CellSpec))


def identity_of(spec, core_keys: Sequence[str]) -> dict[str, Any]:
    """A spec dataclass's identity: its ``core_keys`` plus every field that differs from its
    default, in field order (so adding a field with a default keeps every existing path)."""
    ident: dict[str, Any] = {}
    for field in dataclasses.fields(spec):
        value = getattr(spec, field.name)
        if field.name in core_keys or value != field.default:
            ident[field.name] = value
    return ident


def identity_path(ident: dict[str, Any], core_keys: Sequence[str]) -> str:
    """A result path from an identity (:meth:`CellSpec.identity`, or an inference cell's): the
    dataset, then ``<label>~<value>`` for each of ``core_keys``, the other keys sorted by name,
    and a run's label (``machine``) last. Shared so every kind of cell lays its results out
    alike."""
    ident = dict(ident)
    parts = [_path_value("dataset", ident.pop("dataset"))]
    for key in core_keys[1:]:
        parts.append(f"{PATH_LABELS.get(key, key)}~{_path_value(key, ident.pop(key))}")
    run = [key for key in RUN_PARAMETERS if key in ident]
    extras = sorted(key for key in ident if key not in run)
    parts.extend(f"{key}~{_path_value(key, ident[key])}" for key in [*extras, *run])
    return "/".join(parts)


def identity_args(ident: dict[str, Any]) -> list[str]:
    """Command-line options for an identity: ``--key value`` each, ``none`` for None."""
    args: list[str] = []
    for key, value in ident.items():
        args += [f"--{key.replace('_', '-')}", "none" if value is None else str(value)]
    return args


def _path_value(key: str, value: Any) -> str:
    text = "none" if value is None else str(value)
    if not _SAFE_VALUE.match(text):
        raise ValueError(
            f"{key}={text!r} cannot be part of a result path; use letters, digits and . _ + -"
        )
    return text
