"""dataset.json: writing it, reading it back, and the user-folder route that only writes it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nettebench.datasets import load_data_root
from nettebench.datasets.info import INFO_KEYS, count_images, describe_tree, write_info
from nettebench.datasets.local import register_directory
from nettebench.datasets.testing import TINY_CLASSES, make_image_tree
from nettebench.vocabulary.dataset_errors import DatasetError

CLASSES = tuple(sorted(TINY_CLASSES))


@pytest.fixture
def tree(tmp_path):
    return make_image_tree(tmp_path / "imagenette2-320")


def test_write_info_records_the_tree_and_nothing_else(tree, tmp_path):
    info = write_info(tmp_path, name="tiny", kind="archive", root="imagenette2-320", sha256="ab")
    assert tuple(info) == INFO_KEYS
    assert info["classes"] == list(CLASSES) and info["num_classes"] == 3
    assert (info["train_images"], info["val_images"]) == (6, 3)
    assert json.loads((tmp_path / "dataset.json").read_text()) == info
    # Written via a temporary file that is gone afterwards.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset.json", "imagenette2-320"]


def test_write_info_rejects_unknown_kind(tree, tmp_path):
    with pytest.raises(ValueError, match="kind"):
        write_info(tmp_path, name="x", kind="zip", root="imagenette2-320")


@pytest.mark.parametrize("how", ["file", "folder"])
def test_load_data_root_from_dataset_json(tree, tmp_path, how):
    write_info(tmp_path, name="tiny", kind="archive", root="imagenette2-320")
    data = load_data_root(tmp_path / "dataset.json" if how == "file" else tmp_path)
    assert data.root == tree.resolve() and data.root.is_absolute()
    assert data.train_dir == data.root / "train" and data.val_dir == data.root / "val"
    assert data.classes == CLASSES
    assert data.name == "tiny"


def test_load_data_root_from_a_plain_imagefolder_tree(tree):
    data = load_data_root(tree / "train" / "..")
    assert data.root == tree.resolve()
    assert data.name == "imagenette2-320"
    assert data.classes == CLASSES


def test_load_data_root_names_what_it_looked_for(tree, tmp_path):
    with pytest.raises(DatasetError, match=r"did you mean .*imagenette2-320"):
        load_data_root(tmp_path)
    with pytest.raises(DatasetError, match="does not exist"):
        load_data_root(tmp_path / "nowhere")


def test_dataset_json_pointing_at_a_moved_tree(tree, tmp_path):
    write_info(tmp_path, name="tiny", kind="archive", root="imagenette2-320")
    tree.rename(tmp_path / "moved")
    with pytest.raises(DatasetError, match="prepare the dataset again"):
        load_data_root(tmp_path)


def test_dataset_json_whose_classes_changed(tree, tmp_path):
    write_info(tmp_path, name="tiny", kind="archive", root="imagenette2-320")
    make_image_tree(tree, classes=("n09999999",))
    with pytest.raises(DatasetError, match="tree changed since it was prepared"):
        load_data_root(tmp_path / "dataset.json")


def test_not_a_dataset_json(tmp_path):
    (tmp_path / "dataset.json").write_text("[1, 2]")
    with pytest.raises(DatasetError, match="is not a dataset.json"):
        load_data_root(tmp_path)
    (tmp_path / "dataset.json").write_text("{broken")
    with pytest.raises(DatasetError, match="could not read"):
        load_data_root(tmp_path)


def test_count_images_uses_imagefolder_extensions(tmp_path):
    for name in ("a.JPEG", "b.jpg", "c.png", "d.webp", "notes.txt", "e.json"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.Jpeg").write_bytes(b"")
    assert count_images(tmp_path) == 5


def test_describe_tree_errors_say_what_to_fix(tree):
    (tree / "val" / CLASSES[0]).rename(tree / "val" / "n00000000")
    with pytest.raises(DatasetError, match=r"only in train/: \['n01440764'\]"):
        describe_tree(tree)
    (tree / "val" / "n00000000").rename(tree / "val" / CLASSES[0])
    for image in (tree / "train" / CLASSES[1]).iterdir():
        image.unlink()
    with pytest.raises(DatasetError, match=f"{CLASSES[1]} holds no images"):
        describe_tree(tree)
    (tree / "train" / CLASSES[1]).rmdir()
    (tree / "train").rename(tree / "training")
    with pytest.raises(DatasetError, match="has no train/ folder"):
        describe_tree(tree)


def test_register_directory_writes_an_absolute_root_without_copying(tree, tmp_path):
    out = tmp_path / "prepared"
    info = register_directory(tree, out, name="mine")
    assert info["kind"] == "directory"
    assert info["root"] == str(tree.resolve()) and info["source"] == str(tree.resolve())
    assert sorted(p.name for p in out.iterdir()) == ["dataset.json"]
    assert load_data_root(out).root == tree.resolve()


def test_register_directory_points_at_the_right_subfolder(tree, tmp_path):
    with pytest.raises(DatasetError, match=r"did you mean .*imagenette2-320\?"):
        register_directory(tmp_path, tmp_path / "out", name="mine")
    with pytest.raises(DatasetError, match="does not exist"):
        register_directory(tmp_path / "nope", tmp_path / "out", name="mine")
    assert not (tmp_path / "out" / "dataset.json").exists()


def test_local_cli(tree, tmp_path):
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "nettebench",
            "datasets",
            "local",
            "--source",
            str(tree),
            "--out-dir",
            str(tmp_path / "o"),
            "--name",
            "mine",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert "3 classes, 6 train / 3 val images" in ok.stdout
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "nettebench",
            "datasets",
            "local",
            "--source",
            str(tree / "train"),
            "--out-dir",
            str(tmp_path / "o2"),
            "--name",
            "mine",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1
    assert bad.stderr.startswith("error: ") and "Traceback" not in bad.stderr
