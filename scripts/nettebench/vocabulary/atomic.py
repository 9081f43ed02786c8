"""All-or-nothing writes of files and folders: a reader sees the old version or the new one.

The workflow treats a file's existence as "this step finished" (dataset.json, metrics.json, a
checkpoint, a store), so a job killed mid-write must not leave a torn file or half a tree behind.
Every writer builds its result under a temporary name in the same folder (same filesystem, so the
final ``os.replace``/``os.rename`` is atomic), flushes files to disk, and only then moves it into
place. A folder replacing an older one is swapped with it in one step where Linux can
(:func:`install_tree`). Standard library only: the datasets code imports it while Snakemake
parses.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import io
import json
import os
import re
import shutil
import stat
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, TextIO

STALE_PREFIX = ".stale-"  # an old tree set aside whole by install_tree: can be put back
DOOMED_PREFIX = ".doomed-"  # an old tree being deleted: may be torn, never put back
_LEFTOVER = re.compile(r"(?P<kind>\.stale-|\.doomed-)(?P<name>.+)-[0-9a-f]{8}")


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


@contextlib.contextmanager
def open_text_atomic(path: str | os.PathLike[str], newline: str | None = None) -> Iterator[TextIO]:
    """:func:`open_atomic` as UTF-8 text (``newline`` as :func:`open` takes it; ``""`` for the
    csv module), for a writer that streams rows rather than building the whole text first."""
    with open_atomic(path) as handle:
        text = io.TextIOWrapper(handle, encoding="utf-8", newline=newline)
        try:
            yield text
        finally:
            text.detach()  # flushes; the binary file stays open_atomic's to close


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

    Leftovers of an earlier, killed run are dealt with first (:func:`recover_tree` for each
    tree :func:`install_tree` had set aside; work folders of this prefix are removed): only one
    job prepares a given dataset folder at a time, so nothing else can own them.
    """
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    for name in {match["name"] for match in map(_LEFTOVER.fullmatch, os.listdir(parent)) if match}:
        recover_tree(parent / name)
    for pattern in (f"{prefix}*", f"{STALE_PREFIX}*", f"{DOOMED_PREFIX}*"):
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

    Where Linux swaps two paths in one step (``renameat2`` with ``RENAME_EXCHANGE``: ext4, xfs,
    btrfs, tmpfs), ``final`` holds the complete old tree up to the instant it holds the complete
    new one, and the old one is then deleted from ``new``'s place. Elsewhere the old tree is
    renamed aside, the new one renamed into place, and the old one deleted: a run killed between
    the two renames leaves no tree at ``final`` and the complete old one aside, which
    :func:`recover_tree` (the next run's first step) puts back. Either way a kill leaves at
    ``final``, once recovered, the old tree or the new one, never a mix.
    """
    new, final = Path(new), Path(final)
    aside = None
    if final.is_symlink() or final.is_file():
        final.unlink()
    elif final.exists():
        if _exchange(new, final):
            remove_tree(new)  # the old tree, now under the work name (never put back)
            return
        aside = final.with_name(f"{STALE_PREFIX}{final.name}-{uuid.uuid4().hex[:8]}")
        os.rename(final, aside)
    try:
        os.rename(new, final)
    except BaseException:
        if aside is not None:
            os.rename(aside, final)
        raise
    if aside is not None:
        _discard(aside)


def recover_tree(final: str | os.PathLike[str]) -> None:
    """Undo what a run killed inside :func:`install_tree` left beside ``final``: where no tree
    is at ``final``, the complete old tree it had set aside goes back there; every other
    leftover of ``final`` (an aside not needed, an old tree half deleted) is removed."""
    final = Path(final)
    if not final.parent.is_dir():
        return
    whole, doomed = [], []
    for path in final.parent.iterdir():
        match = _LEFTOVER.fullmatch(path.name)
        if match and match["name"] == final.name:
            (whole if match["kind"] == STALE_PREFIX else doomed).append(path)
    if whole and not os.path.lexists(final):
        newest = max(whole, key=lambda path: path.lstat().st_ctime_ns)  # a rename sets it
        os.rename(newest, final)
        whole.remove(newest)
    for leftover in whole + doomed:
        remove_tree(leftover)


def _discard(aside: Path) -> None:
    """Delete an old tree set aside, first renamed to a name :func:`recover_tree` never puts
    back: a kill halfway through the deletion must not leave a torn tree that looks whole."""
    name = aside.name.removeprefix(STALE_PREFIX)
    doomed = aside.with_name(DOOMED_PREFIX + name)
    os.rename(aside, doomed)
    remove_tree(doomed)


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100
# What renameat2 answers where the kernel, the C library's filesystem or a sandbox cannot swap.
_NO_EXCHANGE = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EPERM}


@functools.cache
def _renameat2() -> Any:
    """The C library's ``renameat2`` (glibc 2.28+), or None where there is none."""
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError, TypeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    function.argtypes += [ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def _exchange(first: Path, second: Path) -> bool:
    """Swap two existing paths in one step; False (nothing done) where this system cannot."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    paths = (os.fsencode(first), os.fsencode(second))
    if renameat2(_AT_FDCWD, paths[0], _AT_FDCWD, paths[1], _RENAME_EXCHANGE) == 0:
        return True
    error = ctypes.get_errno()
    if error in _NO_EXCHANGE:
        return False
    raise OSError(error, os.strerror(error), str(first), None, str(second))


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
