"""Every image of a dataset decodes, checked once, before any cell reads it.

An archive can be complete and verified (size, checksums, a gzip trailer that matches) and still
hold an image that does not decode: a JPEG cut short before it was packed, a file that is not an
image at all. Left there, it crashes a training cell later, deep inside a loader worker. So
the routes to ``dataset.json`` that take files from elsewhere (an archive, a local folder)
decode every image once, the way the ``pil`` loader will (Pillow's ``open`` + ``load``), in
``jobs`` processes, and (the synthetic generator encodes its own JPEGs and needs no check):

- by default rejects the dataset, naming the first bad image (an archive's as its member) and
  how many there are;
- with ``bad_images: skip`` leaves them out and lists them in dataset.json
  (``skipped_images``), so what was left out is on record.

The same read of each file gives its sha256, so a local folder's dataset.json records a digest
of its content (``files_sha256``) for no I/O beyond the check.

Boundary: this module is imported by extract and local, which Snakemake's parse-time import
test keeps light, so Pillow is imported inside :func:`check_file`, when images are checked.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nettebench.vocabulary.worker_pool import worker_pool

from .walk import tree_images

BAD_IMAGE_POLICIES = ("reject", "skip")
LISTED = 5  # bad images named in a rejection message


@dataclass(frozen=True)
class BadImage:
    path: Path  # the file on disk
    rel: str  # its path under the dataset root (train/<class>/...), as dataset.json lists it
    error: str  # what the decoder said


def default_jobs() -> int:
    """The job's threads when Snakemake runs it (it exports them as OMP_NUM_THREADS), else the
    CPUs this process may use."""
    try:
        threads = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        threads = 0
    if threads > 0:
        return threads
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def image_files(root: str | os.PathLike[str], classes: Sequence[str]) -> list[Path]:
    """Every image file of both splits, in ImageFolder's order (:mod:`.walk`)."""
    return [Path(path) for path in tree_images(root, classes)]


def check_file(path: str | os.PathLike[str]) -> tuple[str | None, str]:
    """(why the image at ``path`` does not decode, or None; the sha256 of its bytes): one read
    of the file serves both, so the content digest costs no I/O beyond the check."""
    from PIL import Image  # boundary: see the module docstring

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}", ""
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    else:
        problem = None
    return problem, hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Checked:
    """What decoding every image of a tree found."""

    bad: list[BadImage]  # the images that do not decode, in ImageFolder order
    # sha256 over every image's path under the root and the sha256 of its bytes, in
    # ImageFolder order (bad images included): dataset.json's ``files_sha256``
    files_sha256: str


def check_images(
    root: str | os.PathLike[str], classes: Sequence[str], *, jobs: int | None = None
) -> Checked:
    """Decode and digest every image under ``root``'s splits, in ``jobs`` processes."""
    root = Path(root)
    paths = image_files(root, classes)
    jobs = min(jobs or default_jobs(), max(1, len(paths) // 64))
    if jobs == 1:
        results = [check_file(path) for path in paths]
    else:
        with worker_pool(jobs) as pool:
            results = pool.map(check_file, paths, chunksize=64)
    bad, digest = [], hashlib.sha256()
    for path, (problem, sha) in zip(paths, results, strict=True):
        rel = path.relative_to(root).as_posix()
        digest.update(f"{rel}\t{sha}\n".encode())
        if problem is not None:
            bad.append(BadImage(path, rel, problem))
    return Checked(bad, digest.hexdigest())


def find_bad_images(
    root: str | os.PathLike[str], classes: Sequence[str], *, jobs: int | None = None
) -> list[BadImage]:
    """Decode every image under ``root``'s splits; the ones that fail, in ImageFolder order."""
    return check_images(root, classes, jobs=jobs).bad


def rejection(bad: Sequence[BadImage], name_of: Callable[[BadImage], str], dataset: str) -> str:
    """The error for a dataset rejected for its bad images: the first one in the first line."""
    first = bad[0]
    more = ""
    if len(bad) > 1:
        listed = ", ".join(name_of(b) for b in bad[1:LISTED])
        extra = f" and {len(bad) - LISTED} more" if len(bad) > LISTED else ""
        more = f" ({len(bad)} images do not decode; also {listed}{extra})"
    return (
        f"{name_of(first)} does not decode ({first.error}){more}; a dataset with images that do "
        "not decode is rejected: replace them, or set `bad_images: skip` under "
        f"datasets.{dataset} in the config to leave them out (dataset.json then lists them)"
    )


def add_options(parser) -> None:
    """``--bad-images`` and ``--jobs``, for the commands that prepare a dataset from files."""
    parser.add_argument(
        "--bad-images",
        choices=BAD_IMAGE_POLICIES,
        default="reject",
        help="images that do not decode: reject the dataset (default) or leave them out",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="processes that decode the images (default: $OMP_NUM_THREADS, which Snakemake sets "
        "to the job's threads, else every CPU)",
    )


def skipped_entries(
    bad: Sequence[BadImage], name_of: Callable[[BadImage], str] | None = None
) -> list[dict[str, str]]:
    """dataset.json's ``skipped_images``: each left-out image, where it came from, why."""
    entries = []
    for image in bad:
        entry = {"path": image.rel, "error": image.error}
        if name_of is not None:
            entry["source"] = name_of(image)
        entries.append(entry)
    return entries
