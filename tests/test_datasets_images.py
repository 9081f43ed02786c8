"""Every image decodes before a cell reads it; a bad one is named where the user can find it, or
skipped on request and listed; a dataset folder keeps one tree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nettebench.data import store_build
from nettebench.data.pil import build_pil_loaders
from nettebench.datasets import load_data_root
from nettebench.datasets.extract import extract
from nettebench.datasets.images import find_bad_images
from nettebench.datasets.info import remove_stale_trees
from nettebench.datasets.local import register_directory
from nettebench.datasets.testing import make_image_tree, make_tgz
from nettebench.vocabulary.dataset_errors import DatasetError

BAD = "train/n01440764/n01440764_0.JPEG"
NOT_AN_IMAGE = "val/n02102040/n02102040_0.JPEG"


@pytest.fixture
def bad_tree(tmp_path):
    tree = make_image_tree(tmp_path / "tinynette", train_per_class=2, val_per_class=2)
    data = (tree / BAD).read_bytes()
    (tree / BAD).write_bytes(data[: len(data) // 2])  # a JPEG cut short
    (tree / NOT_AN_IMAGE).write_text("<html>not an image</html>")
    return tree


def test_every_bad_image_is_found_in_imagefolder_order(bad_tree):
    classes = sorted(p.name for p in (bad_tree / "train").iterdir())
    for jobs in (1, 2):
        bad = find_bad_images(bad_tree, classes, jobs=jobs)
        assert [b.rel for b in bad] == [BAD, NOT_AN_IMAGE]
        assert "Truncated" in bad[0].error or "truncated" in bad[0].error
        assert bad[1].error.startswith("UnidentifiedImageError")


def test_an_archive_with_a_bad_image_is_rejected_naming_the_member(bad_tree, tmp_path):
    archive = make_tgz(bad_tree, tmp_path / "tiny.tgz")
    out = tmp_path / "out"
    with pytest.raises(DatasetError) as caught:
        extract(archive, out, name="tiny")
    first = str(caught.value).splitlines()[0]
    assert first.startswith(f"{archive}, member tinynette/{BAD} does not decode")
    assert f"2 images do not decode; also {archive}, member tinynette/{NOT_AN_IMAGE}" in first
    assert "bad_images: skip" in first and "datasets.tiny" in first
    assert sorted(p.name for p in out.iterdir()) == []  # nothing half-made


def test_skip_leaves_them_out_and_lists_them(bad_tree, tmp_path):
    archive = make_tgz(bad_tree, tmp_path / "tiny.tgz")
    info = extract(archive, tmp_path / "out", name="tiny", bad_images="skip")
    assert [e["path"] for e in info["skipped_images"]] == [BAD, NOT_AN_IMAGE]
    assert info["skipped_images"][0]["source"] == f"{archive}, member tinynette/{BAD}"
    assert (info["train_images"], info["val_images"]) == (5, 5)
    tree = tmp_path / "out" / "tinynette"
    assert not (tree / BAD).exists() and not (tree / NOT_AN_IMAGE).exists()


def test_an_archive_whose_class_folder_is_empty_names_the_member(tmp_path):
    tree = make_image_tree(tmp_path / "tinynette", train_per_class=1, val_per_class=1)
    for image in (tree / "train" / "n02979186").iterdir():
        image.unlink()
    archive = make_tgz(tree, tmp_path / "tiny.tgz")
    with pytest.raises(DatasetError) as caught:
        extract(archive, tmp_path / "out", name="tiny")
    message = str(caught.value)
    assert message.startswith(f"{archive}, member tinynette/train/n02979186/ holds no images")
    assert ".extract-" not in message


def test_skipping_every_image_of_a_class_fails_naming_it(tmp_path):
    tree = make_image_tree(tmp_path / "tinynette", train_per_class=1, val_per_class=1)
    (tree / "val/n02979186/n02979186_0.JPEG").write_text("junk")
    archive = make_tgz(tree, tmp_path / "tiny.tgz")
    with pytest.raises(DatasetError, match="member tinynette/val/n02979186/ holds no images"):
        extract(archive, tmp_path / "out", name="tiny", bad_images="skip")


def test_a_local_folder_keeps_its_files_and_the_loaders_leave_the_skipped_out(bad_tree, tmp_path):
    with pytest.raises(DatasetError, match=rf"^{bad_tree / BAD} does not decode"):
        register_directory(bad_tree, tmp_path / "rejected", name="tiny")
    info = register_directory(bad_tree, tmp_path / "out", name="tiny", bad_images="skip")
    assert (bad_tree / BAD).exists()  # the user's files are never touched
    assert (info["train_images"], info["val_images"]) == (5, 5)
    root = load_data_root(tmp_path / "out" / "dataset.json")
    assert root.skipped == {str(bad_tree / BAD), str(bad_tree / NOT_AN_IMAGE)}
    loaders = build_pil_loaders(
        root.train_dir, root.val_dir, image_size=16, batch_size=2, workers=0,
        pin_memory=False, skip=root.skipped,
    )  # fmt: skip
    assert (len(loaders.train.dataset), len(loaders.val.dataset)) == (5, 5)
    for _ in loaders.val:  # every image left decodes
        pass
    manifest = store_build.build_store(
        tmp_path / "out" / "dataset.json", tmp_path / "store", resolution=16, jobs=1
    )
    assert (manifest["train_images"], manifest["val_images"]) == (5, 5)


def test_a_new_source_removes_the_trees_an_old_one_left(tmp_path):
    out = tmp_path / "data"
    old = make_image_tree(out / "imagenette2-320", train_per_class=1, val_per_class=1)
    new = make_image_tree(out / "imagenette2", train_per_class=1, val_per_class=1)
    (out / "store" / "res~37").mkdir(parents=True)
    (out / "notes").mkdir()
    assert remove_stale_trees(out, keep=new) == [old]
    assert sorted(p.name for p in out.iterdir()) == ["imagenette2", "notes", "store"]
    assert remove_stale_trees(out, keep=Path("/elsewhere")) == [new]


def test_extracting_again_from_another_archive_leaves_one_tree(tmp_path):
    tree = make_image_tree(tmp_path / "src" / "tinynette", train_per_class=1, val_per_class=1)
    out = tmp_path / "out"
    extract(make_tgz(tree, tmp_path / "a.tgz", arcname="alpha"), out, name="t")
    info = extract(make_tgz(tree, tmp_path / "b.tgz", arcname="beta"), out, name="t")
    assert sorted(p.name for p in out.iterdir()) == ["beta", "dataset.json"]
    assert json.loads((out / "dataset.json").read_text())["root"] == info["root"] == "beta"
