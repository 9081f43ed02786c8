"""What a cell's result depends on: the one key both the restore and the resume are matched on.

Anything that skips work inside a job (the restore from ``finished.json``, :mod:`.finished`;
the resume from the epoch checkpoint, :mod:`.checkpoint`) may only skip it when the result it
brings back is the one the job would produce now. Snakemake's rerun decision is the floor: the
job reruns when a declared input, a param or the code changed, so the key holds everything the
rule declares, handed over by the rule itself (``--depends-on {input}``, the command line), and
adds what the job reads without declaring it. :func:`key` builds it, here and nowhere else; the
parts, in the order :func:`first_difference` reports them, and why each is in:

``cell``
    the cell's identity hash, so a record never answers for another cell (readable in a log).
``options``
    every option the job was started with, as parsed (defaults included): the cell's parameters,
    the kind, threads, warm-up steps, paths, and the options a command adds on top of the
    trainer (the matrix job's ``--ceiling`` and its steps). An option that changes the outputs,
    such as turning the ceiling on, is in here without anyone listing it. ``--retrain`` and
    ``--depends-on`` are not: the one says to train anyway, the other is the next part.
``inputs``
    every file the rule declares as an input (``--depends-on``), by content: dataset.json, the
    store manifest, the builds' and the package environment's ``install.json``, the code. A
    Snakemake rerun after any of those changed can never restore the old result.
``code``
    the trainer's own modules (the matrix cell job's code group) by content, for a trainer run
    by hand with no ``--depends-on``; under Snakemake it repeats part of ``inputs``.
``data``, ``store``, ``builds``
    dataset.json (or, for a bare folder, every image's path, size and mtime), the decoded
    store's manifest for a ``cached`` cell, and the manifests of the library builds and of the
    package environment the cell names, read where the trainer reads them: again for runs by
    hand, and because a path handed over is not always the file read (``$NETTEBENCH_BUILDS_DIR``).
``packages``
    every distribution importable in this process after the cell's builds and environment are
    activated (the first of each name on ``sys.path``, as ``import`` finds it), with its version,
    and the Python version: a package upgraded in place, or pinned in an environment, changes
    the numbers without changing a declared file.
``environment``
    the environment variables that change what torch, its kernels and the trainer do
    (:data:`ENV_PREFIXES`; device indices and scheduler ids excluded: they name a slot, not
    the hardware, and differ between the ranks of one cell).
``hardware``
    the resolved device's type and model (GPU name and compute capability, CUDA, cuDNN and
    driver versions; the CPU's model and the kernels torch picks for it), never its index or
    UUID: a result measured where no GPU was visible, or on another card, is not this device's.
    A GPU's power limit set below its default is a hardware setting too (``power_limit_w``,
    present only then, so a result at the default limit keeps its key): a result measured under
    a lowered limit is not the default card's, nor the other way round.

Only results whose status a rerun on this hardware would repeat are restored
(:data:`RESTORABLE_STATUSES`): ``ok``, and ``unsupported`` (the device refused the precision).
An ``oom`` may have been another process holding the memory, so it is measured again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from nettebench.builds.activate import (
    builds_root,
    environments_root,
    prefix_dir,
    read_build_manifest,
    read_environment_manifest,
)
from nettebench.datasets.info import IMAGE_EXTENSIONS, INFO_FILE
from nettebench.records.environment import cpu_model, lowered_power_limit, nvidia_driver
from nettebench.study import code_groups
from nettebench.vocabulary.cell import INSTALLED, LIBRARY_PARAMETERS, CellSpec
from nettebench.vocabulary.record_keys import STATUS_OK, STATUS_UNSUPPORTED

KEY_VERSION = 3  # bumped when the parts change: an older record or checkpoint never matches
# (3: the driver as its version number, from records.environment; folders framed by length)
PARTS = (
    "cell",
    "options",
    "inputs",
    "code",
    "data",
    "store",
    "builds",
    "packages",
    "environment",
    "hardware",
)
DIGESTED = ("inputs", "code", "data", "store", "builds")  # parts held as content digests
RESTORABLE_STATUSES = (STATUS_OK, STATUS_UNSUPPORTED)
STORE_MANIFEST = "store.json"
# Options that are no part of what the result is: how to treat an old one, and the inputs
# (digested by content under ``inputs``, not by their names).
NOT_IN_KEY = ("retrain", "depends_on")
# Environment variables that change torch's kernels, numerics or threads, or the trainer's
# libraries. CUDA_VISIBLE_DEVICES, SLURM_* and the like are left out on purpose (see above).
ENV_PREFIXES = (
    "ATEN_",
    "CUBLAS_",
    "CUDNN_",
    "KMP_",
    "MKL_",
    "NCCL_ALGO",
    "NETTEBENCH_BUILDS_DIR",
    "NETTEBENCH_ENVIRONMENTS_DIR",
    "NVIDIA_TF32_OVERRIDE",
    "OMP_",
    "ONEDNN_",
    "DNNL_",
    "PYTORCH_",
    "TORCH_",
)


def key(
    cell: CellSpec,
    *,
    device: torch.device,
    data: str | os.PathLike[str],
    options: Mapping[str, Any] | None = None,
    depends_on: Iterable[str | os.PathLike[str]] = (),
    store_dir: str | os.PathLike[str] | None = None,
    builds_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """The key of the result a cell's job would produce now (see the module docstring).

    Call it after the cell's builds and environment are activated (``packages`` is what this
    process can import) and with the device the run resolved. Plain JSON values, so it is
    stored as it is in ``finished.json`` and in the checkpoint.
    """
    found = {
        "key_version": KEY_VERSION,
        "cell": cell.cell_id(),
        "options": {
            name: _plain(value)
            for name, value in sorted((options or {}).items())
            if name not in NOT_IN_KEY
        },
        "inputs": {_name(path): _path_digest(Path(path)) for path in depends_on},
        "code": _code_digest(),
        "data": data_digest(Path(data)),
        "store": _file_digest(Path(store_dir) / STORE_MANIFEST)
        if cell.loader == "cached" and store_dir
        else None,
        "builds": _builds(cell, builds_dir),
        "packages": packages(),
        "environment": {
            name: value
            for name, value in sorted(os.environ.items())
            if name.startswith(ENV_PREFIXES)
        },
        "hardware": hardware(device),
    }
    return found


def first_difference(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str | None:
    """The first part of ``new`` that ``old`` does not hold, in words; None when they match.

    Within a part, names the first entry that differs (``packages: pillow 11.3.0 -> 12.3.0``,
    ``inputs: .snakemake/nettebench/code/matrix_train.sha256 changed``), so the log line says
    what to look at."""
    if not isinstance(old, Mapping):
        return "no key (written by an older trainer)"
    if old.get("key_version") != new.get("key_version"):
        return f"key version {old.get('key_version')} -> {new.get('key_version')}"
    for part in PARTS:
        before, after = old.get(part), new.get(part)
        if before == after:
            continue
        if isinstance(before, Mapping) and isinstance(after, Mapping):
            for name in sorted(set(before) | set(after)):
                if before.get(name) != after.get(name):
                    if part in DIGESTED:
                        return f"{part}: {name} changed"
                    return f"{part}: {name} {_short(before.get(name))} -> {_short(after.get(name))}"
        if part in DIGESTED:
            return f"{part} changed"
        return f"{part}: {_short(before)} -> {_short(after)}"
    extra = sorted(set(old) ^ set(new))
    return f"parts {extra}" if extra else None


def packages() -> dict[str, str]:
    """name -> version of every distribution this process can import, and Python's version.

    The first distribution of each (normalised) name in ``sys.path`` order is the one
    ``import`` finds, so an environment's pin put first on the path replaces the base one."""
    found = {"python": f"{platform.python_implementation()} {sys.version.split()[0]}"}
    for distribution in importlib.metadata.distributions():
        name = (distribution.metadata["Name"] or "").lower().replace("_", "-")
        if name and name not in found:
            found[name] = distribution.version
    return dict(sorted(found.items()))


def hardware(device: torch.device) -> dict[str, Any]:
    """The device's type and model, and a GPU's power limit where lowered; the CPU's model and
    torch's CPU kernels (always: the host feeds the device and times the epochs). No index, no
    UUID (see the module docstring)."""
    found: dict[str, Any] = {
        "device": device.type,
        "cpu": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "machine": platform.machine(),
    }
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        found.update(
            gpu=properties.name,
            compute_capability=f"{properties.major}.{properties.minor}",
            gpu_memory_mb=properties.total_memory // 2**20,
            cuda=torch.version.cuda,
            cudnn=torch.backends.cudnn.version(),
            driver=nvidia_driver(),
        )
        lowered = lowered_power_limit(device)
        if lowered is not None:  # absent at the default: those results keep their keys
            found["power_limit_w"] = lowered
    return found


def data_digest(path: Path) -> str:
    """dataset.json's digest (it names the tree, its classes and its source's checksum); for a
    bare folder (the trainer run by hand), a digest of every image's path, size and mtime."""
    if path.is_file():
        return _file_digest(path) or "missing"
    if (path / INFO_FILE).is_file():
        return _file_digest(path / INFO_FILE) or "missing"
    digest = hashlib.sha256()
    for root, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            if name.lower().endswith(IMAGE_EXTENSIONS):
                full = os.path.join(root, name)
                stat = os.stat(full)
                rel = os.path.relpath(full, path)
                digest.update(f"{rel}\t{stat.st_size}\t{stat.st_mtime_ns}\n".encode())
    return "tree:" + digest.hexdigest()


def _builds(cell: CellSpec, builds_dir) -> dict[str, str | None]:
    found = {
        library: _json_digest(
            read_build_manifest(prefix_dir(builds_root(builds_dir), library, build))
        )
        for library in LIBRARY_PARAMETERS
        if (build := getattr(cell, library)) != INSTALLED
    }
    if cell.environment != INSTALLED:
        prefix = environments_root() / cell.environment / "prefix"
        found["environment"] = _json_digest(read_environment_manifest(prefix))
    return found


def _path_digest(path: Path) -> str | None:
    """A file's content digest; a folder's, of every file's relative path and content, each
    framed by its length, so a rename, or bytes moved from one file's end to the next file,
    changes the digest."""
    if path.is_dir():
        digest = hashlib.sha256()
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            name, content = file.relative_to(path).as_posix().encode(), file.read_bytes()
            for part in (name, content):
                digest.update(len(part).to_bytes(8, "big") + part)
        return "dir:" + digest.hexdigest()
    return _file_digest(path)


def _file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _json_digest(value: Any) -> str | None:
    if value is None:
        return None
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _code_digest() -> str:
    """Every module of the matrix cell job's code group (the trainer and the ceiling it measures
    after the epochs; Snakemake's rerun trigger for the rule), by content."""
    digest = hashlib.sha256()
    for module in code_groups.modules("matrix_train"):
        digest.update(module.encode() + b"\0")
        digest.update((code_groups.PACKAGE_DIR / module).read_bytes())
    return digest.hexdigest()


def _name(path: str | os.PathLike[str]) -> str:
    """An input's name in the key: relative to the working directory when inside it (the rule
    hands the code over as absolute paths), so a copied or moved workflow keeps its keys."""
    relative = os.path.relpath(os.path.abspath(path))
    return str(path) if relative.startswith(os.pardir) else relative


def _plain(value: Any) -> Any:
    """An option's value as JSON holds it (a path as its text), so a key read back from
    ``finished.json`` compares equal to one built now."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return str(value)


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."
