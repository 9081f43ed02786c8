"""``dataset.json``: the one file that says a dataset is ready, and what the trainer reads.

Every way of getting a dataset (catalog download, user archive, user folder, synthetic) ends by
writing ``<out_dir>/dataset.json`` last and atomically, so the workflow can depend on that file
alone. Its keys (``INFO_KEYS``)::

    name           str   the dataset's name in the study config
    kind           str   "catalog" | "archive" | "directory" | "synthetic"
    root           str   folder holding train/ and val/: relative to dataset.json's folder,
                         or absolute (a user's own folder, which is not copied)
    source         str | None   URL or path it came from (None for synthetic)
    classes        list[str]    sorted class folder names (= ImageFolder's class order)
    num_classes    int
    train_images   int   image files under train/ (extensions torchvision's ImageFolder reads)
    val_images     int
    sha256         str | None   sha256 of the archive it was extracted from
    synthetic      dict | None  generator parameters, for kind == "synthetic"
    skipped_images list  (optional: only when some were) images left out because they do not decode
                         (``bad_images: skip``): {path: under root, error, source: archive
                         member or file}; the counts above leave them out
    files_sha256   str   (optional: a local folder's or a synthetic tree's) sha256 over every
                         image's path under root and the sha256 of its bytes, in ImageFolder order
                         (:func:`.images.check_images`): the folder's identity, where an archive's
                         is its ``sha256``

The trainer calls :func:`load_data_root`, which also accepts a plain ImageFolder tree, so it can
run without the workflow on any folder with ``train/`` and ``val/``.

A dataset folder (``results/data/<name>/``) holds one tree: :func:`remove_stale_trees` removes
the trees an earlier source left there once the new one is in place.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nettebench.vocabulary.atomic import remove_tree, write_json_atomic
from nettebench.vocabulary.dataset_errors import DatasetError

from .walk import IMAGE_EXTENSIONS, SPLITS, class_images, split_samples

INFO_FILE = "dataset.json"
KINDS = ("catalog", "archive", "directory", "synthetic")
INFO_KEYS = (
    "name",
    "kind",
    "root",
    "source",
    "classes",
    "num_classes",
    "train_images",
    "val_images",
    "sha256",
    "synthetic",
)
OPTIONAL_KEYS = ("skipped_images", "files_sha256")  # written only when there is something to say


@dataclass(frozen=True)
class TreeStats:
    """Classes and image counts of a folder holding ``train/`` and ``val/``."""

    classes: tuple[str, ...]
    train_images: int
    val_images: int


@dataclass(frozen=True)
class DataRoot:
    """Where the trainer finds a dataset: absolute paths plus the class order."""

    root: Path
    train_dir: Path
    val_dir: Path
    classes: tuple[str, ...]
    name: str
    # images dataset.json says to leave out (they do not decode), as absolute path strings
    skipped: frozenset[str] = frozenset()


def has_splits(folder: str | os.PathLike[str]) -> bool:
    """True when ``folder`` has both ``train/`` and ``val/`` sub-folders."""
    folder = Path(folder)
    return all((folder / split).is_dir() for split in SPLITS)


def class_folders(split_dir: str | os.PathLike[str]) -> list[str]:
    """Sorted names of the sub-folders of ``split_dir``, exactly as ImageFolder orders classes."""
    with os.scandir(split_dir) as entries:
        return sorted(entry.name for entry in entries if entry.is_dir())


def describe_tree(
    root: str | os.PathLike[str],
    *,
    name_of: Callable[[Path], str] = str,
    exclude: Collection[str] = (),
) -> TreeStats:
    """Check ``root`` is a usable ImageFolder pair and count its images.

    Raises DatasetError when ``train/`` or ``val/`` is missing, the two hold different class
    folders, or a class folder holds no image: each would otherwise surface later as a
    confusing error (or silently shifted labels) inside the trainer. ``name_of`` names a folder
    in those errors the way the user knows it (an archive's member, not a temporary path).
    ``exclude``: image paths (as strings) left out of the counts (skipped images).
    """
    root = Path(root)
    missing = [split for split in SPLITS if not (root / split).is_dir()]
    if missing:
        raise DatasetError(
            f"{name_of(root)} has no {' or '.join(s + '/' for s in missing)} folder; a dataset "
            "folder must hold train/<class>/*.JPEG and val/<class>/*.JPEG" + _hint_children(root)
        )
    train_classes = class_folders(root / "train")
    val_classes = class_folders(root / "val")
    if not train_classes:
        raise DatasetError(f"{name_of(root / 'train')} has no class folders")
    if train_classes != val_classes:
        only_train = sorted(set(train_classes) - set(val_classes))
        only_val = sorted(set(val_classes) - set(train_classes))
        raise DatasetError(
            f"{name_of(root)}: train/ and val/ hold different class folders "
            f"(only in train/: {only_train or 'none'}; only in val/: {only_val or 'none'}); "
            "labels would not line up, so make the two folders hold the same classes"
        )
    counts = {}
    for split in SPLITS:
        # the loaders' own walk (.walk: no link followed, one refused)
        samples = split_samples(root / split, train_classes, exclude=exclude)
        per_class = Counter(index for _, index in samples)
        for index, name in enumerate(train_classes):
            if per_class[index] == 0:
                raise DatasetError(
                    f"{name_of(root / split / name)} holds no images (looked for "
                    f"{', '.join(IMAGE_EXTENSIONS)}); remove the folder or add its images"
                )
        counts[split] = len(samples)
    return TreeStats(tuple(train_classes), counts["train"], counts["val"])


def count_images(folder: str | os.PathLike[str], *, exclude: Collection[str] = ()) -> int:
    """Image files under class folder ``folder``, recursively, as the loaders list them
    (:mod:`.walk`: no link followed, one refused), but for the paths in ``exclude``."""
    return sum(1 for path in class_images(folder) if path not in exclude)


def write_info(
    out_dir: str | os.PathLike[str],
    *,
    name: str,
    kind: str,
    root: str | os.PathLike[str],
    source: str | None = None,
    sha256: str | None = None,
    synthetic: Mapping[str, Any] | None = None,
    stats: TreeStats | None = None,
    skipped: list[Mapping[str, str]] | None = None,
    files_sha256: str | None = None,
) -> dict[str, Any]:
    """Write ``<out_dir>/dataset.json`` atomically and return what was written.

    ``root`` is relative to ``out_dir`` or absolute. ``stats`` is computed from the tree when not
    given (callers that already validated the tree pass it to avoid a second walk); ``skipped``
    lists the images left out (the key is written only when there are some); ``files_sha256``
    is a local folder's content digest.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    out_dir = Path(out_dir)
    root_path = Path(root)
    if stats is None:
        stats = describe_tree(root_path if root_path.is_absolute() else out_dir / root_path)
    info = {
        "name": name,
        "kind": kind,
        "root": str(root),
        "source": None if source is None else str(source),
        "classes": list(stats.classes),
        "num_classes": len(stats.classes),
        "train_images": stats.train_images,
        "val_images": stats.val_images,
        "sha256": sha256,
        "synthetic": None if synthetic is None else dict(synthetic),
    }
    if skipped:
        info["skipped_images"] = [dict(entry) for entry in skipped]
    if files_sha256 is not None:
        info["files_sha256"] = files_sha256
    write_json_atomic(out_dir / INFO_FILE, info)
    return info


def remove_stale_trees(
    out_dir: str | os.PathLike[str], keep: str | os.PathLike[str] | None
) -> list[Path]:
    """Remove every folder of ``out_dir`` that holds ``train/`` and ``val/`` but ``keep``.

    A dataset's folder holds the tree of its current source only: after ``source:`` changes (an
    archive with another top folder, a local folder, generated data) the old tree would stay
    beside the new one (1.5 GB for imagenette2). Other folders (the decoded ``store/``) stay.
    """
    out_dir = Path(out_dir)
    kept = Path(keep).resolve() if keep is not None else None
    removed = []
    for entry in sorted(out_dir.iterdir()) if out_dir.is_dir() else ():
        if entry.is_symlink() or not entry.is_dir() or not has_splits(entry):
            continue
        if kept is not None and (entry.resolve() == kept or entry.resolve() in kept.parents):
            continue
        remove_tree(entry)
        removed.append(entry)
    return removed


def read_info(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse a dataset.json, with an error that names the file when it is not one."""
    path = Path(path)
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(f"could not read {path}: {exc}") from exc
    if not isinstance(info, dict) or "root" not in info:
        raise DatasetError(f"{path} is not a dataset.json (no 'root' key)")
    return info


def load_data_root(path: str | os.PathLike[str]) -> DataRoot:
    """Find the train/ and val/ folders for ``path``.

    ``path`` may be a dataset.json, a folder holding one, or a plain folder holding train/ and
    val/ (any ImageFolder tree, so the trainer also runs outside the workflow).
    """
    path = Path(path).expanduser()
    if path.is_file():
        return _from_info(path)
    if (path / INFO_FILE).is_file():
        return _from_info(path / INFO_FILE)
    if has_splits(path):
        root = path.resolve()
        return DataRoot(
            root=root,
            train_dir=root / "train",
            val_dir=root / "val",
            classes=tuple(class_folders(root / "train")),
            name=root.name,
        )
    if not path.exists():
        raise DatasetError(f"dataset path {path} does not exist")
    raise DatasetError(
        f"{path} is neither a dataset.json, nor a folder holding one, nor a folder with train/ "
        "and val/ sub-folders" + _hint_children(path)
    )


def _from_info(info_path: Path) -> DataRoot:
    info = read_info(info_path)
    root = Path(info["root"])
    if not root.is_absolute():
        root = info_path.parent / root
    root = root.resolve()
    if not has_splits(root):
        raise DatasetError(
            f"{info_path} says the data is in {root}, but that folder has no train/ and val/ "
            "sub-folders; it was moved or deleted: delete dataset.json and prepare the dataset "
            "again"
        )
    classes = tuple(class_folders(root / "train"))
    recorded = info.get("classes")
    if recorded is not None and tuple(recorded) != classes:
        raise DatasetError(
            f"{info_path} lists classes {list(recorded)} but {root / 'train'} holds "
            f"{list(classes)}; the tree changed since it was prepared: delete dataset.json and "
            "prepare the dataset again"
        )
    skipped = frozenset(
        str(root / entry["path"]) for entry in info.get("skipped_images") or () if "path" in entry
    )
    return DataRoot(
        root=root,
        train_dir=root / "train",
        val_dir=root / "val",
        classes=classes,
        name=str(info.get("name") or root.name),
        skipped=skipped,
    )


def _hint_children(folder: Path) -> str:
    """' (did you mean ...?)' naming sub-folders of ``folder`` that do hold train/ and val/."""
    try:
        children = sorted(c for c in folder.iterdir() if c.is_dir() and has_splits(c))
    except OSError:
        return ""
    if not children:
        return ""
    return f" (did you mean {', '.join(str(c) for c in children)}?)"
