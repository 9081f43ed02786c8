"""The one walk of a dataset tree: its image files in ImageFolder's order, following no link.

Every reader of a dataset's files (the counts in dataset.json, the image check, the content
digest and the stamp of a local folder, the decoded store, the ``pil`` loader) lists them
here, so they all see the same files in the same order: index ``i`` of the store is sample
``i`` of the loader, and the counts are the loader's.

The order is torchvision's ``make_dataset``: classes in the order given (sorted), and within a
class folder every sub-folder by its path, each folder's files sorted by name.

No link is followed. A symbolic link below the root to a folder, or to a file the loaders would
read (an image extension), is refused with an error naming it: a link to a folder above it
(``train/n01/loop -> ..``) made the old walk count 82 images in a tree of 2 until the system's
link limit stopped it, a link across the tree counts images twice or under another class, and
one out of the tree makes the dataset depend on files that dataset.json's identity does not
cover. (An archive cannot bring links at all: :mod:`.extract` refuses them.) The root itself may
be reached through a link: callers resolve it first. Standard library only (Snakemake imports
the datasets package while it parses).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Sequence

from nettebench.vocabulary.dataset_errors import DatasetError

# The extensions torchvision's ImageFolder accepts (torchvision.datasets.folder.IMG_EXTENSIONS),
# so the counts here match what the trainer will load.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
SPLITS = ("train", "val")


def is_image(name: str) -> bool:
    return name.lower().endswith(IMAGE_EXTENSIONS)


def refuse_link(path: str) -> DatasetError:
    """The error for a link found inside a dataset tree, naming it and its target."""
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return DatasetError(
        f"{path} is a symbolic link (to {target!r}); a dataset's files are read without "
        "following links (a link to a folder above it loops, one across the tree counts images "
        "twice, one out of it is not part of the dataset), so replace it by the file or folder "
        "itself (`cp -rL` copies a tree with its links resolved) or remove it"
    )


def class_images(class_dir: str | os.PathLike[str]) -> list[str]:
    """Every image file under ``class_dir`` (recursively), in ImageFolder's order.

    Raises DatasetError for ``class_dir`` being a link, or for a link below it to a folder or
    to an image file; links to other files are neither read nor refused.
    """
    top = os.fspath(class_dir)
    if os.path.islink(top):
        raise refuse_link(top)
    folders: list[tuple[str, list[str]]] = []
    pending = [top]
    while pending:
        folder = pending.pop()
        names = []
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_symlink():
                    if entry.is_dir() or is_image(entry.name):
                        raise refuse_link(entry.path)
                elif entry.is_dir(follow_symlinks=False):
                    pending.append(os.path.join(folder, entry.name))
                elif is_image(entry.name):
                    names.append(entry.name)
        folders.append((folder, sorted(names)))
    return [os.path.join(folder, name) for folder, names in sorted(folders) for name in names]


def split_samples(
    split_dir: str | os.PathLike[str],
    classes: Sequence[str],
    *,
    exclude: Collection[str] = (),
) -> list[tuple[str, int]]:
    """``[(path, class index), ...]`` of one split folder, as ImageFolder lists them;
    ``exclude``: paths (strings as listed here) left out, the images dataset.json skips."""
    split_dir = os.path.normpath(os.fspath(split_dir))
    if os.path.islink(split_dir):
        raise refuse_link(split_dir)
    return [
        (path, index)
        for index, name in enumerate(classes)
        for path in class_images(os.path.join(split_dir, name))
        if path not in exclude
    ]


def tree_images(root: str | os.PathLike[str], classes: Sequence[str]) -> list[str]:
    """Every image file of both splits, train first, each in ImageFolder's order."""
    root = os.fspath(root)
    return [
        path for split in SPLITS for path, _ in split_samples(os.path.join(root, split), classes)
    ]


def tree_stamp(root: str | os.PathLike[str], classes: Sequence[str] | None = None) -> str:
    """A sha256 over every image's path (under ``root``), size, modification and change time.

    Cheap (one ``stat`` per image, no reads), so the workflow computes it while it parses, to
    tell a local folder changed since its dataset.json was written: a replaced file has a new
    change time even when a copy kept its size and modification time. ``classes`` defaults to
    the class folders of ``train/``. Raises DatasetError for a link, as every walk here does.
    """
    root = os.fspath(root)
    if classes is None:
        with os.scandir(os.path.join(root, "train")) as entries:
            classes = sorted(entry.name for entry in entries if entry.is_dir())
    digest = hashlib.sha256()
    for path in tree_images(root, classes):
        stat = os.stat(path, follow_symlinks=False)
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        digest.update(f"{rel}\t{stat.st_size}\t{stat.st_mtime_ns}\t{stat.st_ctime_ns}\n".encode())
    return digest.hexdigest()
