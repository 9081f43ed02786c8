"""The record of a finished cell, so an interruption never makes anyone train it again.

A cell's results (``metrics.json``, ``epochs.csv``) are Snakemake's outputs, and Snakemake owns
them: a job it started but never saw end (Snakemake killed, or stopped by Ctrl-C while the
trainer finished) leaves them marked incomplete, and the next run deletes them and runs the job
again. The trainer's per-epoch checkpoint cannot help there: it is gone once the cell finished.

So after its last epoch the trainer writes ``finished.json`` beside the results, atomically and
*before* them: the exact text of both files plus a fingerprint of everything the result depends
on (:func:`fingerprint`: the cell's identity, the dataset, the decoded store, the library builds,
the trainer's code and the library versions). It is no Snakemake output, so Snakemake never
deletes it. A trainer started on a cell whose ``finished.json`` holds the same fingerprint writes
the two files back byte for byte and exits in a second (:func:`restore`); anything that changed
(code, data, a parameter, a version) trains the cell. To measure a finished cell again on purpose,
pass ``--retrain`` (``NETTEBENCH_RETRAIN=1`` for ``snakemake --forcerun``) or delete the file.

It holds a few kilobytes of text and no model state, so it costs nothing after the last epoch
(no checkpoint is needed there).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from nettebench.builds.activate import builds_root, prefix_dir, read_build_manifest
from nettebench.datasets.info import IMAGE_EXTENSIONS, INFO_FILE
from nettebench.records import files as records
from nettebench.records.atomic import write_json_atomic, write_text_atomic
from nettebench.study import code_groups
from nettebench.study.cell import INSTALLED, LIBRARY_PARAMETERS, CellSpec
from nettebench.study.outputs import EPOCHS_FILE, METRICS_FILE

FINISHED_FILE = "finished.json"
FORMAT_VERSION = 1
RESULT_FILES = (EPOCHS_FILE, METRICS_FILE)  # the order they are written back in
RETRAIN_ENV = "NETTEBENCH_RETRAIN"
STORE_MANIFEST = "store.json"
# Libraries whose version can change a cell's numbers.
VERSIONED = ("torch", "torchvision", "numpy", "pillow", "efficientnet_pytorch")


def fingerprint(
    cell: CellSpec,
    *,
    kind: str,
    data: str | os.PathLike[str],
    warmup_steps: int,
    store_dir: str | os.PathLike[str] | None,
    builds_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """What a cell's result depends on, each part a digest or a short value."""
    return {
        "cell_id": cell.cell_id(),
        "kind": kind,
        "warmup_steps": warmup_steps,
        "data": _data_digest(Path(data)),
        "store": _file_digest(Path(store_dir) / STORE_MANIFEST)
        if cell.loader == "cached" and store_dir
        else None,
        "builds": {
            library: _json_digest(
                read_build_manifest(prefix_dir(builds_root(builds_dir), library, build))
            )
            for library in LIBRARY_PARAMETERS
            if (build := getattr(cell, library)) != INSTALLED
        },
        "code": _code_digest(),
        "versions": {"python": sys.version.split()[0], **_versions()},
    }


def write(out_dir: str | os.PathLike[str], stamp: dict[str, Any], texts: dict[str, str]) -> Path:
    """Write ``finished.json`` (fingerprint + the results' texts), atomically."""
    return write_json_atomic(
        Path(out_dir) / FINISHED_FILE,
        {"format_version": FORMAT_VERSION, "fingerprint": stamp, "files": texts},
    )


def restore(out_dir: str | os.PathLike[str], stamp: dict[str, Any]) -> bool:
    """Write the results back from ``finished.json`` when its fingerprint is ``stamp``."""
    out_dir = Path(out_dir)
    try:
        record = json.loads((out_dir / FINISHED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    files = record.get("files") or {}
    if (
        record.get("format_version") != FORMAT_VERSION
        or record.get("fingerprint") != stamp
        or not all(isinstance(files.get(name), str) for name in RESULT_FILES)
    ):
        return False
    extras = [name for name in files if name not in RESULT_FILES]  # the ceiling, say
    for name in [*extras, *RESULT_FILES]:  # metrics.json last: it is what says "done"
        write_text_atomic(out_dir / name, files[name])
    return True


def retrain_requested(flag: bool) -> bool:
    return flag or os.environ.get(RETRAIN_ENV, "") not in ("", "0")


def result_texts(record: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, str]:
    """metrics.json and epochs.csv exactly as :mod:`nettebench.records.files` writes them."""
    with tempfile.TemporaryDirectory(prefix="nettebench-result-") as scratch:
        records.write_epochs(scratch, rows)
        records.write_metrics(scratch, record)
        return {name: (Path(scratch) / name).read_text(encoding="utf-8") for name in RESULT_FILES}


def file_texts(out_dir: str | os.PathLike[str], paths) -> dict[str, str]:
    """The texts of files a cell's job wrote beside its results (by name; files elsewhere are
    not the cell's to restore)."""
    out_dir = Path(out_dir).resolve()
    return {
        Path(path).name: Path(path).read_text(encoding="utf-8")
        for path in paths
        if Path(path).resolve().parent == out_dir
    }


def _data_digest(path: Path) -> str:
    """dataset.json's digest (it names the tree, its classes and its source's checksum); for a
    bare folder (the trainer run by hand), a digest of every image's path, size and mtime."""
    if path.is_file():
        return _file_digest(path)
    if (path / INFO_FILE).is_file():
        return _file_digest(path / INFO_FILE)
    digest = hashlib.sha256()
    for root, dirs, names in os.walk(path, followlinks=True):
        dirs.sort()
        for name in sorted(names):
            if name.lower().endswith(IMAGE_EXTENSIONS):
                full = os.path.join(root, name)
                stat = os.stat(full)
                rel = os.path.relpath(full, path)
                digest.update(f"{rel}\t{stat.st_size}\t{stat.st_mtime_ns}\n".encode())
    return "tree:" + digest.hexdigest()


def _file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _json_digest(value: Any) -> str | None:
    if value is None:
        return None
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _code_digest() -> str:
    """The trainer's code: every module of the matrix cell job's code group (the trainer and the
    ceiling it measures after the epochs; Snakemake's rerun trigger for the rule), by content."""
    digest = hashlib.sha256()
    for module in code_groups.modules("matrix_train"):
        digest.update(module.encode() + b"\0")
        digest.update((code_groups.PACKAGE_DIR / module).read_bytes())
    return digest.hexdigest()


def _versions() -> dict[str, str | None]:
    found = {}
    for package in VERSIONED:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found
