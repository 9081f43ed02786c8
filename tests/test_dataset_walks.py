"""Every walk of a dataset tree lists the same files, in ImageFolder's order, and follows no
link out of or around the tree (real symlinks in tmp dirs; no mocks)."""

from __future__ import annotations

import os
import shutil

import pytest
from torchvision import datasets

from nettebench.data import store
from nettebench.data.pil import TreeImageFolder, load_image
from nettebench.datasets import images as image_check
from nettebench.datasets.info import describe_tree
from nettebench.datasets.local import register_directory
from nettebench.datasets.testing import TINY_CLASSES, make_image_tree
from nettebench.datasets.walk import class_images, split_samples, tree_images, tree_stamp
from nettebench.study.workflow import plan_dataset
from nettebench.vocabulary.dataset_errors import DatasetError

CLASSES = tuple(sorted(TINY_CLASSES))
SYNTHETIC = {"synthetic": {"size": 16, "train_images": 6, "val_images": 3}}


@pytest.fixture
def tree(tmp_path):
    return make_image_tree(tmp_path / "mine")


def _walks(root):
    """Every walk a dataset's files go through, each as a callable that lists or counts."""
    return {
        "describe_tree (dataset.json's counts)": lambda: describe_tree(root),
        "image check": lambda: image_check.image_files(root, CLASSES),
        "store": lambda: store.list_images(root / "train", CLASSES),
        "pil loader": lambda: TreeImageFolder(root / "train", loader=load_image),
        "stamp": lambda: tree_stamp(root),
    }


def _refusal(run) -> str:
    """The DatasetError message ``run`` raises ("" when it raises none)."""
    try:
        run()
    except DatasetError as error:
        return str(error)
    return ""


def test_the_issues_loop_is_refused_by_every_walk_naming_the_link(tree):
    """``train/n01/loop -> ..``: the old walks followed it until the system's link limit (the
    issue's tree of 2 train images was counted as 82)."""
    loop = tree / "train" / CLASSES[0] / "loop"
    loop.symlink_to("..")
    for walk, run in _walks(tree).items():
        assert _refusal(run).startswith(f"{loop} is a symbolic link (to '..')"), walk


def test_registering_a_folder_with_a_loop_fails_and_writes_no_dataset_json(tree, tmp_path):
    (tree / "val" / CLASSES[1] / "loop").symlink_to("../..")
    with pytest.raises(DatasetError, match="is a symbolic link"):
        register_directory(tree, tmp_path / "out", name="mine")
    assert not (tmp_path / "out" / "dataset.json").exists()


@pytest.mark.parametrize(
    "where",
    ["folder-out", "image-out", "image-across", "class-folder", "split-folder"],
)
def test_links_out_of_or_around_the_tree_are_refused(tree, tmp_path, where):
    outside = make_image_tree(tmp_path / "elsewhere")
    first = tree / "train" / CLASSES[0]
    if where == "folder-out":
        link, target = first / "more", outside / "train" / CLASSES[0]
    elif where == "image-out":
        link, target = first / "more.JPEG", next((outside / "train" / CLASSES[0]).iterdir())
    elif where == "image-across":  # the same image again, under another class
        link, target = first / "dup.JPEG", next((tree / "train" / CLASSES[1]).iterdir())
    elif where == "class-folder":
        shutil.rmtree(first)
        link, target = first, outside / "train" / CLASSES[0]
    else:
        shutil.rmtree(tree / "train")
        link, target = tree / "train", outside / "train"
    link.symlink_to(target)
    for walk, run in _walks(tree).items():
        assert _refusal(run).startswith(f"{link} is a symbolic link"), walk


def test_a_link_the_loaders_never_read_is_left_alone(tree, tmp_path):
    """A link to a non-image file (a README) is not part of the dataset: not refused."""
    (tmp_path / "notes.txt").write_text("hello")
    (tree / "train" / CLASSES[0] / "README").symlink_to(tmp_path / "notes.txt")
    assert describe_tree(tree).train_images == 6


def test_the_walk_is_imagefolders_order_and_the_loader_lists_the_same(tree):
    """Nested folders whose names sort differently as paths and as names ("a b" < "a" + "/"),
    so a walk that sorted differently from torchvision's make_dataset would differ."""
    cls = tree / "train" / CLASSES[0]
    for sub in ("a", "a b", "a-b", "a/z", "B"):
        (cls / sub).mkdir(parents=True)
        shutil.copy(next(cls.glob("*.JPEG")), cls / sub / "x.JPEG")
        shutil.copy(next(cls.glob("*.JPEG")), cls / sub / "X.jpeg")
    reference = datasets.ImageFolder(str(tree / "train")).samples
    assert split_samples(tree / "train", CLASSES) == reference
    assert TreeImageFolder(tree / "train", loader=load_image).samples == reference
    assert store.list_images(tree / "train", CLASSES) == reference
    assert [str(p) for p in image_check.image_files(tree, CLASSES)[: len(reference)]] == [
        p for p, _ in reference
    ]
    assert len(class_images(cls)) == 2 + 10


def test_the_loader_leaves_out_the_skipped_images(tree):
    skipped = str(sorted((tree / "train" / CLASSES[0]).iterdir())[0])
    folder = TreeImageFolder(tree / "train", loader=load_image, skip=frozenset({skipped}))
    assert skipped not in [p for p, _ in folder.samples] and len(folder.samples) == 5


def test_the_stamp_sees_a_replaced_image_that_kept_its_size_and_time(tree):
    """``cp -p`` of another image of the same size: path, size and mtime are as before; the
    change time is not, so the stamp (what the workflow compares while it parses) changes."""
    before = tree_stamp(tree, CLASSES)
    target = sorted((tree / "train" / CLASSES[0]).iterdir())[0]
    stat = target.stat()
    data = bytearray(target.read_bytes())
    data[-3] ^= 0xFF  # same size, other content
    target.write_bytes(bytes(data))
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert target.stat().st_mtime_ns == stat.st_mtime_ns and target.stat().st_size == stat.st_size
    assert tree_stamp(tree, CLASSES) != before
    assert tree_stamp(tree, CLASSES) == tree_stamp(tree)  # classes default to train/'s folders
    assert len(tree_images(tree, CLASSES)) == 9


def test_the_workflows_stamp_of_a_local_folder_moves_with_its_files(tree):
    """``dataset_register``'s parameter (taken while Snakemake parses): a new stamp when an
    image is added; a refused link gives a stamp that says so (the job then runs and names it)
    instead of a parse error."""
    plan = plan_dataset("mine", {"source": str(tree)})
    before = plan.folder_stamp()
    assert (
        before == tree_stamp(tree.resolve()) and plan_dataset("s", SYNTHETIC).folder_stamp() is None
    )
    shutil.copy(next((tree / "val" / CLASSES[0]).iterdir()), tree / "val" / CLASSES[0] / "n.png")
    assert plan.folder_stamp() != before
    (tree / "val" / CLASSES[0] / "loop").symlink_to("..")
    assert plan.folder_stamp() == "unreadable (DatasetError)"
