"""Use a dataset folder the user already has, without copying it.

The user's folder (``source:`` in config.yaml pointing at a directory) must hold ``train/`` and
``val/`` with the same class folders; it is checked, then ``<out_dir>/dataset.json`` records its
absolute path. Copying a multi-gigabyte tree would only cost time and disk, and the trainer reads
the folder in place. Every image is decoded once first (:mod:`.images`): one that does not
rejects the folder, naming the file, or with ``--bad-images skip`` is listed in dataset.json and
left out by the loaders (the user's files are never touched). Trees an earlier source of the
dataset left in ``out_dir`` are removed.

The folder is identified by its files, not its path and counts: the same read that decodes
each image digests its bytes, and dataset.json records ``files_sha256`` over every image's path
and content, so images replaced with the same counts change dataset.json (and with it every
cell that reads it, and the restore key that digests it). Re-reading every byte to notice a
change is for the register job, not for each parse of the workflow: the ``dataset_register``
rule takes :func:`nettebench.datasets.walk.tree_stamp` (path, size, modification and change time
of every image; one ``stat`` each) as a parameter, so Snakemake reruns the registration when
any image is added, removed, replaced or touched. A touched but unchanged file gives the same
dataset.json content, which the restore key then matches.

Command line::

    python -m nettebench datasets local --source DIR --out-dir DIR --name NAME
        [--bad-images reject|skip] [--jobs N]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nettebench.vocabulary import commands
from nettebench.vocabulary.dataset_errors import DatasetError

from . import images
from .info import INFO_FILE, describe_tree, remove_stale_trees, write_info


def register_directory(
    source_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    name: str,
    bad_images: str = "reject",
    jobs: int | None = None,
) -> dict[str, Any]:
    """Check ``source_dir`` holds train/ and val/ whose images decode and write
    ``<out_dir>/dataset.json`` for it."""
    out_dir = Path(out_dir)
    (out_dir / INFO_FILE).unlink(missing_ok=True)
    source = Path(source_dir).expanduser()
    if not source.is_dir():
        what = "does not exist" if not source.exists() else "is not a folder"
        raise DatasetError(
            f"dataset folder {source} {what}; set `source:` for dataset {name!r} in config.yaml "
            "to a folder holding train/ and val/, or to a .tgz archive or URL"
        )
    root = source.resolve()
    stats = describe_tree(root)
    checked = images.check_images(root, stats.classes, jobs=jobs)
    bad = checked.bad
    skipped = []
    if bad:
        if bad_images != "skip":
            raise DatasetError(images.rejection(bad, lambda b: str(b.path), name))
        skipped = images.skipped_entries(bad, lambda b: str(b.path))
        for image in bad:
            print(f"skipped {image.path}: {image.error}", file=sys.stderr)
        stats = describe_tree(root, exclude={str(image.path) for image in bad})
    for stale in remove_stale_trees(out_dir, keep=root):
        print(f"removed {stale}, the tree of the dataset's earlier source", file=sys.stderr)
    return write_info(
        out_dir,
        name=name,
        kind="directory",
        root=str(root),
        source=str(root),
        stats=stats,
        skipped=skipped,
        files_sha256=checked.files_sha256,
    )


def main(argv: list[str] | None = None) -> int:
    parser = commands.Parser(
        prog="python -m nettebench datasets local",
        description="Check a folder holding train/ and val/ and write dataset.json for it.",
    )
    parser.add_argument("--source", required=True, help="folder holding train/ and val/")
    parser.add_argument("--out-dir", required=True, help="where dataset.json is written")
    parser.add_argument("--name", required=True, help="dataset name recorded in dataset.json")
    images.add_options(parser)
    return commands.run(parser, _register, argv, errors=(DatasetError,), stream=sys.stdout)


def _register(args: argparse.Namespace) -> Iterator[str]:
    info = register_directory(
        args.source, args.out_dir, name=args.name, bad_images=args.bad_images, jobs=args.jobs
    )
    yield (
        f"using {info['root']} in place ({info['num_classes']} classes, "
        f"{info['train_images']} train / {info['val_images']} val images)"
    )


if __name__ == "__main__":  # run as python -m nettebench datasets local
    sys.exit(commands.moved(__spec__.name))
