"""Unpack a dataset archive safely and all-or-nothing, then write dataset.json.

An archive may come from anywhere a user's ``source:`` points, so it is treated as untrusted:

1. verify it (size/md5/sha256 when given, and always that it is a complete gzip tar);
2. check every member before writing anything: only regular files and folders, with no
   absolute path and no ``..``. Links (symbolic or hard) and special files (devices, fifos) are
   refused outright: an image dataset has no need of them, and a link is judged safe only by
   resolving every link before it (``b -> .``, ``a -> b/../..``, then ``a/x`` writes outside
   though each name looks harmless alone). The error names the offending member. Python's own
   ``filter="data"`` is applied on top as a second line, and extraction refuses to run on a
   Python without it (before 3.10.12 / 3.11.4, which ``requires-python`` excludes);
3. extract into a fresh ``<out_dir>/.extract-XXXX`` (same filesystem, so installing is a rename)
   and find the folder holding ``train/`` and ``val/``;
4. check the tree (same classes in both splits, no empty class) and decode every image
   (:mod:`.images`: a bad one rejects the archive, or with ``--bad-images skip`` is left out and
   listed in dataset.json), then move it to ``<out_dir>/<top folder>/`` (``data`` when the
   archive has no top folder), replacing a tree left by an earlier run only now that the new one
   is complete, and remove trees an earlier source left (:func:`.info.remove_stale_trees`);
5. write ``<out_dir>/dataset.json`` last: the workflow reads it as "ready".

On any failure the temporary folder is removed and the error names the archive, the member (as
the archive names it, never the temporary folder) and the check.

Command line::

    python -m nettebench datasets extract --archive PATH --out-dir DIR --name NAME
        [--size N] [--md5 HEX] [--sha256 HEX] [--source TEXT] [--kind archive|catalog]
        [--bad-images reject|skip] [--jobs N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from nettebench.vocabulary import commands
from nettebench.vocabulary.atomic import install_tree, make_work_dir, remove_tree
from nettebench.vocabulary.dataset_errors import DatasetError

from . import images
from .info import INFO_FILE, describe_tree, has_splits, remove_stale_trees, write_info
from .verify import check_expected, scan_archive

WORK_PREFIX = ".extract-"
DEFAULT_TREE = "data"
# tarfile.FilterError exists where the extraction filters do (3.10.12+, 3.11.4+); this module
# still imports on an older Python, where check_data_filter refuses to extract.
_FilterError = getattr(tarfile, "FilterError", ())
# Folders archivers add that are never the dataset (macOS resource forks).
_IGNORED_TOP = ("__MACOSX",)


def extract(
    archive: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    name: str,
    size: int | None = None,
    md5: str | None = None,
    sha256: str | None = None,
    source: str | None = None,
    kind: str = "archive",
    bad_images: str = "reject",
    jobs: int | None = None,
) -> dict[str, Any]:
    """Verify and unpack ``archive`` into ``out_dir``; return the dataset.json written.

    ``kind`` is recorded in dataset.json: "catalog" for a catalog download, "archive" for a
    user's own archive. ``source`` (a URL or path) is recorded as given. Images that do not
    decode reject the archive (``bad_images="reject"``) or are left out and listed
    (``"skip"``); ``jobs`` processes decode them.
    """
    if kind not in ("archive", "catalog"):
        raise ValueError(f"kind must be 'archive' or 'catalog', got {kind!r}")
    if bad_images not in images.BAD_IMAGE_POLICIES:
        raise ValueError(
            f"bad_images must be one of {images.BAD_IMAGE_POLICIES}, got {bad_images!r}"
        )
    archive = Path(archive)
    check_data_filter(archive)
    out_dir = Path(out_dir)
    # From here until the new dataset.json is written, the dataset is not "ready".
    (out_dir / INFO_FILE).unlink(missing_ok=True)

    scan = scan_archive(archive)
    check_expected(
        f"archive {archive}",
        actual_size=scan.size,
        actual_md5=scan.md5,
        actual_sha256=scan.sha256,
        size=size,
        md5=md5,
        sha256=sha256,
    )

    work = make_work_dir(out_dir, WORK_PREFIX)

    def member(path: Path) -> str:
        """A path of the extracted tree as the user can find it: the archive's member name."""
        rel = path.relative_to(work).as_posix()
        return f"{archive}, member {rel}" + ("/" if path.is_dir() else "")

    try:
        _unpack(archive, work)
        tree = _find_dataset_root(archive, work)
        stats = describe_tree(tree, name_of=member)
        bad = images.find_bad_images(tree, stats.classes, jobs=jobs)
        skipped = []
        if bad:
            if bad_images == "reject":
                raise DatasetError(images.rejection(bad, lambda b: member(b.path), name))
            skipped = images.skipped_entries(bad, lambda b: member(b.path))
            for image in bad:
                image.path.unlink()
                print(f"skipped {member(image.path)}: {image.error}", file=sys.stderr)
            stats = describe_tree(tree, name_of=member)
        final = out_dir / (DEFAULT_TREE if tree == work else tree.name)
        try:
            install_tree(tree, final)
        except OSError as exc:
            raise DatasetError(f"could not move the extracted tree to {final}: {exc}") from exc
    finally:
        remove_tree(work)

    for stale in remove_stale_trees(out_dir, keep=final):
        print(f"removed {stale}, the tree of the dataset's earlier source", file=sys.stderr)
    return write_info(
        out_dir,
        name=name,
        kind=kind,
        root=final.name,
        source=source,
        sha256=scan.sha256,
        stats=stats,
        skipped=skipped,
    )


def _unpack(archive: Path, dest: Path) -> None:
    """Extract every member of ``archive`` into ``dest`` after checking all of them."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            for member in members:
                refusal = unsafe_reason(member)
                if refusal:
                    raise DatasetError(
                        f"refusing to extract {archive}: member {member.name!r} {refusal}; "
                        "the archive is damaged or malicious, so nothing was extracted"
                    )
            tar.extractall(dest, members=members, filter="data")
    except DatasetError:
        raise
    except _FilterError as exc:
        member = getattr(exc, "tarinfo", None)
        which = repr(member.name) if member is not None else "a member"
        raise DatasetError(
            f"refusing to extract {archive}: {which} was rejected by tarfile's data filter "
            f"({exc}); the archive is damaged or malicious"
        ) from exc
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise DatasetError(f"could not extract {archive}: {exc}") from exc


def check_data_filter(archive: Path) -> None:
    """Refuse to extract where tarfile has no data filter (Python before 3.10.12 / 3.11.4).

    The member check below is the first line; the data filter is the second, which catches what
    a lexical check of one member cannot. Extracting an untrusted archive with one line only is
    not worth the risk, so such a Python is told to step aside rather than silently trusted.
    """
    if not hasattr(tarfile, "data_filter"):
        version = ".".join(str(part) for part in sys.version_info[:3])
        raise DatasetError(
            f"refusing to extract {archive}: this Python ({version}) has no tarfile data filter "
            "(added in 3.10.12, 3.11.4 and 3.12), which extraction needs to be safe against a "
            "hostile archive; run the workflow with a newer Python (envs/data.yaml pins one)"
        )


def unsafe_reason(member: tarfile.TarInfo) -> str | None:
    """Why ``member`` is refused, or None for a plain file or folder inside the root.

    Judged on the archive's own names, before anything is written: an absolute path or a
    ``..`` component could write outside; a link of either kind is refused whatever its target
    (a dataset of images needs none, and whether a link stays inside depends on every link
    extracted before it); a device file or fifo has no place in a dataset.
    """
    name = member.name
    if _is_absolute(name):
        return "has an absolute path"
    if ".." in PurePosixPath(name).parts:
        return "has a '..' component"
    if member.issym():
        return (
            f"is a symlink (to {member.linkname!r}); an image dataset needs no links, so "
            "archives holding any are refused"
        )
    if member.islnk():
        return (
            f"is a hardlink (to {member.linkname!r}); an image dataset needs no links, so "
            "archives holding any are refused"
        )
    if member.ischr() or member.isblk():
        return "is a device file"
    if member.isfifo():
        return "is a fifo"
    if not (member.isfile() or member.isdir()):
        return f"has an unsupported type ({member.type!r})"
    return None


def _is_absolute(name: str) -> bool:
    return name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":")


def _find_dataset_root(archive: Path, work: Path) -> Path:
    """The folder holding train/ and val/: ``work`` itself or its single top-level folder."""
    if has_splits(work):
        return work
    tops = sorted(
        entry
        for entry in work.iterdir()
        if entry.is_dir() and not entry.is_symlink() and entry.name not in _IGNORED_TOP
    )
    candidates = [entry for entry in tops if has_splits(entry) and entry.name != INFO_FILE]
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        raise DatasetError(
            f"{archive} holds several datasets ({', '.join(c.name for c in candidates)}); "
            "repack it with just one folder holding train/ and val/"
        )
    found = ", ".join(entry.name + "/" for entry in tops) or "no folders"
    raise DatasetError(
        f"{archive} has no folder holding both train/ and val/ at its top or one level down "
        f"(found {found}); an Imagenette-style archive looks like "
        "<name>/train/<class>/*.JPEG and <name>/val/<class>/*.JPEG"
    )


def main(argv: list[str] | None = None) -> int:
    parser = commands.Parser(
        prog="python -m nettebench datasets extract",
        description="Verify and safely extract a dataset archive, then write dataset.json.",
    )
    parser.add_argument("--archive", required=True, help="the .tgz to extract")
    parser.add_argument("--out-dir", required=True, help="folder that receives tree + json")
    parser.add_argument("--name", required=True, help="dataset name recorded in dataset.json")
    parser.add_argument("--size", type=int, help="expected archive size in bytes")
    parser.add_argument("--md5", help="expected archive md5 (hex)")
    parser.add_argument("--sha256", help="expected archive sha256 (hex)")
    parser.add_argument("--source", help="where the archive came from (URL or path), recorded")
    parser.add_argument("--kind", choices=("archive", "catalog"), default="archive")
    images.add_options(parser)
    return commands.run(parser, _extract, argv, errors=(DatasetError,), stream=sys.stdout)


def _extract(args: argparse.Namespace) -> Iterator[str]:
    info = extract(
        args.archive,
        args.out_dir,
        name=args.name,
        size=args.size,
        md5=args.md5,
        sha256=args.sha256,
        source=args.source,
        kind=args.kind,
        bad_images=args.bad_images,
        jobs=args.jobs,
    )
    yield (
        f"extracted {args.archive} -> {Path(args.out_dir) / info['root']} "
        f"({info['num_classes']} classes, {info['train_images']} train / "
        f"{info['val_images']} val images"
        + (f", {len(info['skipped_images'])} skipped" if info.get("skipped_images") else "")
        + ")"
    )


if __name__ == "__main__":  # run as python -m nettebench datasets extract
    sys.exit(commands.moved(__spec__.name))
