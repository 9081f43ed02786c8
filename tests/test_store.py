"""The decoded dataset store: layout, pixels, rebuild rule, failed builds, command line."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from PIL import Image

from nettebench.data import store as st
from nettebench.data import store_build as sb
from nettebench.datasets.synthetic import generate

RES = 32


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic")
    generate(out, name="tiny", size=48, train_images=60, val_images=20, seed=0, jobs=1)
    return out


@pytest.fixture(scope="module")
def built(dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("store")
    manifest = sb.build_store(dataset, out, resolution=RES, jobs=2, progress=False)
    return out, manifest


def reference_pixels(path, resolution):
    """What torchvision's Resize + CenterCrop make of the file (an independent code path)."""
    from torchvision import transforms

    with Image.open(path) as image:
        image = image.convert("RGB")
        out = transforms.CenterCrop(resolution)(transforms.Resize(resolution)(image))
    return np.asarray(out)


def test_layout_shapes_labels_follow_imagefolder(dataset, built):
    from torchvision.datasets import ImageFolder

    out, manifest = built
    assert sorted(os.listdir(out)) == sorted(
        ["store.json", "train.npy", "val.npy", "train_labels.npy", "val_labels.npy",
         "train_sizes.npy"]
    )  # fmt: skip
    opened = st.open_store(out)
    assert opened.manifest == json.loads((out / "store.json").read_text())
    assert opened.resolution == RES and manifest["resize_policy"] == "shorter_side"
    assert manifest["format_version"] == st.FORMAT_VERSION
    assert manifest["build_seconds"] > 0
    for split, count in (("train", 60), ("val", 20)):
        folder = ImageFolder(str(dataset / "data" / split))
        images, labels = getattr(opened, split), getattr(opened, f"{split}_labels")
        width = st.frame_width(RES) if split == "train" else RES
        assert images.shape == (count, RES, width, 3) and images.dtype == np.uint8
        assert labels.dtype == np.int64
        assert labels.tolist() == [label for _path, label in folder.samples]
        assert opened.classes == folder.classes == manifest["classes"]
        assert manifest[f"{split}_images"] == count
        assert [p for p, _ in st.list_images(dataset / "data" / split, folder.classes)] == [
            p for p, _ in folder.samples
        ]


def test_val_pixels_equal_torchvision_resize_and_centre_crop(dataset, built):
    from torchvision.datasets import ImageFolder

    opened = st.open_store(built[0])
    samples = ImageFolder(str(dataset / "data" / "val")).samples
    for index in (3, 19):
        expected = reference_pixels(samples[index][0], RES)
        np.testing.assert_array_equal(opened.val[index], expected)


def test_train_images_keep_their_whole_frame(dataset, built):
    """Train pixels equal torchvision's Resize of the file (no crop: the synthetic images are
    at most 3:2), portrait ones stored transposed, the rest of the slot the last column."""
    from torchvision import transforms
    from torchvision.datasets import ImageFolder

    opened = st.open_store(built[0])
    samples = ImageFolder(str(dataset / "data" / "train")).samples
    orientations = set()
    for index in range(len(samples)):
        with Image.open(samples[index][0]) as image:
            expected = np.asarray(transforms.Resize(RES)(image.convert("RGB")))
        height, width = opened.train_sizes[index]
        assert (height, width) == expected.shape[:2] and min(height, width) == RES
        stored = opened.train[index]
        if height > width:
            np.testing.assert_array_equal(stored[:width, :height].transpose(1, 0, 2), expected)
        else:
            np.testing.assert_array_equal(stored[:height, :width], expected)
        beyond = stored[:, max(height, width) :]
        assert (beyond == stored[:, max(height, width) - 1 : max(height, width)]).all()
        orientations.add(height > width)
    assert orientations == {True, False}  # both portrait and landscape files were checked


def test_frames_wider_than_three_to_two_keep_their_centre():
    rng = np.random.default_rng(0)
    wide = Image.fromarray(rng.integers(0, 256, (20, 60, 3), dtype=np.uint8))  # 3:1
    slot, size = sb.full_frame(wide, 10)
    assert slot.shape == (10, 15, 3) and size == (10, 15)
    from torchvision import transforms

    expected = transforms.CenterCrop((10, 15))(transforms.Resize(10)(wide))
    np.testing.assert_array_equal(slot, np.asarray(expected))


def test_policy_handles_portrait_and_landscape():
    rng = np.random.default_rng(0)
    for shape in ((50, 37, 3), (37, 50, 3), (40, 40, 3)):
        image = Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8))
        from torchvision import transforms

        expected = np.asarray(transforms.CenterCrop(24)(transforms.Resize(24)(image)))
        np.testing.assert_array_equal(np.asarray(sb._shorter_side(image, 24)), expected)


def test_store_opens_read_only(built):
    opened = st.open_store(built[0])
    assert isinstance(opened.train, np.memmap) and not opened.train.flags.writeable
    with pytest.raises(ValueError):
        opened.train[0, 0, 0, 0] = 1


def test_store_is_current_tracks_resolution_policy_and_data(tmp_path):
    data = tmp_path / "data"
    generate(data, name="tiny", size=48, train_images=20, val_images=10, seed=1, jobs=1)
    out = tmp_path / "store"
    assert not st.store_is_current(out, data, RES, "shorter_side")
    sb.build_store(data, out, resolution=RES, jobs=1, progress=False)
    assert st.store_is_current(out, data, RES, "shorter_side")
    assert st.store_is_current(out, data / "dataset.json", RES)
    assert not st.store_is_current(out, data, RES + 8, "shorter_side")
    assert not st.store_is_current(out, data, RES, "stretch")
    # a synthetic tree is keyed by the content digest its generation recorded (as an archive
    # by its sha256): other images, another key; a bare tree (no dataset.json) by its files
    generate(data, name="tiny", size=48, train_images=20, val_images=10, seed=2, jobs=1)
    assert not st.store_is_current(out, data, RES, "shorter_side")
    sb.build_store(data / "data", out, resolution=RES, jobs=1, progress=False)
    class_dir = next((data / "data" / "train").iterdir())
    Image.new("RGB", (48, 48)).save(class_dir / "extra.JPEG")
    assert not st.store_is_current(out, data / "data", RES, "shorter_side")


def test_archive_sha256_is_the_source(tmp_path):
    data = tmp_path / "data"
    generate(data, name="tiny", size=16, train_images=10, val_images=10, seed=2, jobs=1)
    info_path = data / "dataset.json"
    info = json.loads(info_path.read_text())
    info["sha256"] = "ab" * 32
    info_path.write_text(json.dumps(info))
    assert st.source_of(data) == {"kind": "archive_sha256", "value": "ab" * 32}
    out = tmp_path / "store"
    sb.build_store(data, out, resolution=16, jobs=1, progress=False)
    assert st.store_is_current(out, data, 16)
    info["sha256"] = "cd" * 32
    info_path.write_text(json.dumps(info))
    assert not st.store_is_current(out, data, 16)


def test_corrupt_image_fails_the_build_without_a_manifest(tmp_path):
    data = tmp_path / "data"
    generate(data, name="tiny", size=16, train_images=20, val_images=10, seed=3, jobs=1)
    out = tmp_path / "store"
    sb.build_store(data, out, resolution=16, jobs=1, progress=False)
    assert (out / "store.json").is_file()
    bad = next((data / "data" / "val").iterdir()) / "broken.JPEG"
    bad.write_bytes(b"\xff\xd8\xff\xe0 this is not a JPEG")
    with pytest.raises(st.StoreError, match="broken.JPEG"):
        sb.build_store(data, out, resolution=16, jobs=2, progress=False)
    assert not (out / "store.json").exists()
    assert not list(out.glob(st.WORK_PREFIX + "*"))
    assert not st.store_is_current(out, data, 16)
    with pytest.raises(st.StoreError, match="no finished store"):
        st.open_store(out)


def test_unknown_policy_names_the_allowed_ones(dataset, tmp_path):
    with pytest.raises(st.StoreError, match="resize_policy must be one of shorter_side; got"):
        sb.build_store(dataset, tmp_path, resolution=RES, resize_policy="stretch")
    assert not (tmp_path / "store.json").exists()


def test_command_line_builds_then_says_nothing_to_do(dataset, tmp_path, capsys):
    out = tmp_path / "store"
    argv = ["--data", str(dataset / "dataset.json"), "--out-dir", str(out), "--resolution", "16"]
    assert sb.main([*argv, "--jobs", "1"]) == 0
    first = capsys.readouterr().out
    assert "stored 60 train / 20 val images at 16 px" in first and "MB" in first
    assert sb.main(argv) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert (
        sb.main(["--data", str(tmp_path / "missing"), "--out-dir", str(out), "--resolution", "16"])
        == 1
    )
    assert "does not exist" in capsys.readouterr().err
