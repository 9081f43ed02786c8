"""The synthetic dataset: layout, image shapes, determinism, and evidence it is learnable."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from nettebench.datasets import load_data_root
from nettebench.datasets.synthetic import IMAGENETTE_WNIDS, class_names, generate
from nettebench.vocabulary.dataset_errors import DatasetError

QUICK = {"size": 64, "train_images": 400, "val_images": 100}  # the quick-start defaults


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic") / "quick"
    info = generate(out, name="quick", jobs=2, progress=False, **QUICK)
    return out, info


def _files(root):
    return sorted(p for p in root.rglob("*") if p.is_file())


def _load(data, split, res):
    """Images of ``split`` resized to res x res (float32), with their class indices."""
    images, labels = [], []
    for k, name in enumerate(data.classes):
        for path in sorted((data.root / split / name).iterdir()):
            with Image.open(path) as image:
                small = image.convert("RGB").resize((res, res), Image.BILINEAR)
            images.append(np.asarray(small, dtype=np.float32))
            labels.append(k)
    return np.stack(images), np.array(labels)


def _nearest_class_mean(train_x, train_y, val_x, val_y) -> float:
    means = np.stack([train_x[train_y == k].mean(0) for k in np.unique(train_y)])
    distances = ((val_x[:, None, :] - means[None]) ** 2).sum(-1)
    return float((distances.argmin(1) == val_y).mean())


def test_layout_counts_and_dataset_json(quick):
    out, info = quick
    assert sorted(p.name for p in out.iterdir()) == ["data", "dataset.json"]
    assert json.loads((out / "dataset.json").read_text()) == info
    assert info["kind"] == "synthetic" and info["root"] == "data"
    assert info["source"] is None and info["sha256"] is None
    assert info["classes"] == list(IMAGENETTE_WNIDS)
    assert (info["train_images"], info["val_images"]) == (400, 100)
    assert info["synthetic"]["seed"] == 0 and info["synthetic"]["size"] == 64
    for split, per_class in (("train", 40), ("val", 10)):
        folders = sorted((out / "data" / split).iterdir())
        assert [f.name for f in folders] == list(IMAGENETTE_WNIDS)
        for folder in folders:
            names = sorted(p.name for p in folder.iterdir())
            assert len(names) == per_class
            assert all(n.startswith(folder.name + "_") and n.endswith(".JPEG") for n in names)
    assert load_data_root(out).classes == tuple(IMAGENETTE_WNIDS)


def test_the_content_digest_is_a_local_folders_and_keys_the_store_without_a_walk(
    quick, monkeypatch
):
    """files_sha256, taken as the images were written, is what checking the tree as a local
    folder computes; the store keys on it (no stat of every image per cached cell)."""
    from nettebench.data import store
    from nettebench.datasets.images import check_images

    out, info = quick
    checked = check_images(out / "data", info["classes"], jobs=1)
    assert info["files_sha256"] == checked.files_sha256
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        assert not str(path).endswith(".JPEG"), f"stat-ed an image: {path}"
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    source = store.source_of(out / "dataset.json")
    assert source == {"kind": "files_sha256", "value": info["files_sha256"]}


def test_shortest_side_is_size_and_the_other_within_one_and_a_half(quick):
    out, _ = quick
    shapes = set()
    for path in _files(out / "data"):
        with Image.open(path) as image:
            assert image.format == "JPEG" and image.mode == "RGB"
            width, height = image.size
        assert min(width, height) == 64
        assert 64 <= max(width, height) <= 96
        shapes.add("landscape" if width > height else "portrait" if height > width else "square")
    assert {"landscape", "portrait"} <= shapes


def test_same_arguments_give_identical_bytes_whatever_the_jobs(tmp_path):
    args = {"name": "d", "size": 40, "train_images": 30, "val_images": 10, "progress": False}
    generate(tmp_path / "a", jobs=1, **args)
    generate(tmp_path / "b", jobs=2, **args)
    generate(tmp_path / "c", jobs=1, seed=1, **args)
    a, b, c = (_files(tmp_path / x / "data") for x in "abc")
    relative = [p.relative_to(tmp_path / "a") for p in a]
    assert relative == [p.relative_to(tmp_path / "b") for p in b]
    assert all(p.read_bytes() == q.read_bytes() for p, q in zip(a, b, strict=True))
    assert sum(p.read_bytes() == q.read_bytes() for p, q in zip(a, c, strict=True)) == 0


def test_classes_are_learnable_from_colour_distribution(quick):
    """A nearest-class-mean classifier on where-independent colour features beats chance by far.

    Features: per pixel of a 16x16 thumbnail, its chroma (RGB minus its grey level); per channel,
    16 quantiles of those values. This sees the class colour wherever the object lies, the way a
    CNN's pooled features can; chance is 10 %.
    """
    data = load_data_root(quick[0])

    def features(images):
        chroma = images - images.mean(-1, keepdims=True)
        flat = np.sort(chroma.reshape(len(images), -1, 3), axis=1)
        return flat[:, ::16].reshape(len(images), -1)

    train_x, train_y = _load(data, "train", 16)
    val_x, val_y = _load(data, "val", 16)
    assert _nearest_class_mean(features(train_x), train_y, features(val_x), val_y) > 0.5


def test_no_single_pixel_gives_the_class_away(quick):
    """Objects move, scale and rotate over varied backgrounds, so one pixel says little.

    Pixels near the centre are covered by the object more often (as in photos), so they do
    better than chance, but far worse than the whole image (previous test: > 50 %, 88 % seen).
    """
    data = load_data_root(quick[0])
    train_x, train_y = _load(data, "train", 16)
    val_x, val_y = _load(data, "val", 16)
    accuracy = np.array(
        [
            [
                _nearest_class_mean(train_x[:, y, x], train_y, val_x[:, y, x], val_y)
                for x in range(16)
            ]
            for y in range(16)
        ]
    )
    assert accuracy.mean() < 0.25
    assert accuracy.max() < 0.6
    # Images of one class differ a lot from each other (position, size, background, noise).
    for k in range(10):
        assert train_x[train_y == k].std(0).mean() > 20


def test_more_than_ten_classes_get_synthetic_wnids(tmp_path):
    assert class_names(12)[10:] == ["n90000010", "n90000011"]
    info = generate(
        tmp_path / "twelve",
        name="t",
        size=24,
        train_images=24,
        val_images=12,
        num_classes=12,
        jobs=1,
        progress=False,
    )
    assert info["classes"] == class_names(12)
    val = tmp_path / "twelve" / "data" / "val"
    assert [len(list((val / c).iterdir())) for c in info["classes"]] == [1] * 12


def test_rerun_replaces_old_tree_and_leaves_no_work_folder(tmp_path):
    out = tmp_path / "s"
    generate(out, name="s", size=16, train_images=10, val_images=10, jobs=1, progress=False)
    (out / "data" / "stale.txt").write_text("old")
    generate(out, name="s", size=16, train_images=10, val_images=10, jobs=1, progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["data", "dataset.json"]
    assert not (out / "data" / "stale.txt").exists()


def test_bad_arguments_are_refused_before_writing(tmp_path):
    with pytest.raises(DatasetError, match="at least the number of classes"):
        generate(tmp_path / "x", name="x", train_images=5, num_classes=10)
    assert not (tmp_path / "x").exists()


def test_cli(tmp_path):
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "nettebench",
            "datasets",
            "synthetic",
            "--out-dir",
            str(tmp_path / "s"),
            "--name",
            "s",
            "--size",
            "16",
            "--train-images",
            "4",
            "--val-images",
            "4",
            "--classes",
            "2",
            "--jobs",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert "generated 4 train / 4 val images (2 classes, 16 px)" in ok.stdout
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "nettebench",
            "datasets",
            "synthetic",
            "--out-dir",
            str(tmp_path / "b"),
            "--name",
            "b",
            "--classes",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1
    assert bad.stderr.startswith("error: a synthetic dataset needs at least 2 classes")
