"""All-or-nothing writes of files and folders: a reader sees the old version or the new one.

The workflow treats a file's existence as "this step finished" (dataset.json, metrics.json, a
checkpoint, a store), so a job killed mid-write must not leave a torn file or half a tree behind.
Every writer builds its result under a temporary name in the same folder (same filesystem, so the
final ``os.replace``/``os.rename`` is atomic), flushes files to disk, and only then moves it into
place. Standard library only: the datasets code imports it while Snakemake parses.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

STALE_PREFIX = ".stale-"


@contextlib.contextmanager
def open_atomic(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file to write ``path`` through, all-or-nothing: it replaces ``path`` (flushed
    to disk) only when the block ends without an error, so a writer can stream into it
    (``torch.save``) instead of building the whole file in memory first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # open() (not mkstemp, which makes the file private) so the usual umask decides who reads it.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` all-or-nothing."""
    with open_atomic(path) as handle:
        handle.write(data)
    return Path(path)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike[str], data: Mapping[str, Any]) -> Path:
    """``data`` as indented JSON (values JSON cannot hold written with ``str``)."""
    return write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


def make_work_dir(parent: str | os.PathLike[str], prefix: str) -> Path:
    """Create a fresh hidden folder inside ``parent`` to build a tree in before installing it.

    Leftovers of an earlier, killed run (this prefix, or a tree :func:`install_tree` had set
    aside) are removed first: only one job prepares a given dataset folder at a time, so nothing
    else can own them.
    """
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    for pattern in (f"{prefix}*", f"{STALE_PREFIX}*"):
        for stale in parent.glob(pattern):
            remove_tree(stale)
    work = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    # mkdtemp makes the folder private; it may become the dataset tree, which others may read.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(work, 0o777 & ~umask)
    return work


def install_tree(new: str | os.PathLike[str], final: str | os.PathLike[str]) -> None:
    """Move the finished folder ``new`` to ``final``, replacing what an earlier run left there.

    The old tree is renamed aside first and deleted only once the new one is in place, so at
    every moment ``final`` is either the complete old tree or the complete new one.
    """
    new, final = Path(new), Path(final)
    aside = None
    if final.is_symlink() or final.is_file():
        final.unlink()
    elif final.exists():
        aside = final.with_name(f"{STALE_PREFIX}{final.name}-{uuid.uuid4().hex[:8]}")
        os.rename(final, aside)
    try:
        os.rename(new, final)
    except BaseException:
        if aside is not None:
            os.rename(aside, final)
        raise
    if aside is not None:
        remove_tree(aside)


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Delete a file or folder if it exists; a missing path is not an error."""
    path = Path(path)
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        # An archive may carry read-only folders; give the owner rwx on every real folder first,
        # each before os.walk lists it. Symlinks are never followed or changed.
        _owner_rwx(path)
        for folder, dirs, _files in os.walk(path):
            for name in dirs:
                _owner_rwx(os.path.join(folder, name))
        shutil.rmtree(path)


def _owner_rwx(folder: str | os.PathLike[str]) -> None:
    mode = os.lstat(folder).st_mode
    if stat.S_ISDIR(mode) and mode & stat.S_IRWXU != stat.S_IRWXU:
        os.chmod(folder, mode | stat.S_IRWXU)
