"""Extraction of real .tgz archives: the happy path, hostile members, and corrupt archives."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tarfile

import pytest

from nettebench.datasets import load_data_root
from nettebench.datasets.extract import extract, main
from nettebench.datasets.testing import TINY_CLASSES, make_image_tree, make_tgz
from nettebench.vocabulary.dataset_errors import DatasetError


@pytest.fixture
def tree(tmp_path):
    return make_image_tree(tmp_path / "src" / "tiny-nette")


@pytest.fixture
def archive(tree, tmp_path):
    return make_tgz(tree, tmp_path / "tiny-nette.tgz")


def _entries(folder):
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _member(name, kind=tarfile.REGTYPE, linkname=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.mode = 0o644
    return info


def test_extracts_into_top_folder_and_writes_dataset_json(archive, tmp_path):
    out = tmp_path / "out"
    info = extract(archive, out, name="tiny", source="https://example.org/tiny.tgz")
    assert _entries(out) == ["dataset.json", "tiny-nette"]
    assert json.loads((out / "dataset.json").read_text()) == info
    assert info == {
        "name": "tiny",
        "kind": "archive",
        "root": "tiny-nette",
        "source": "https://example.org/tiny.tgz",
        "classes": sorted(TINY_CLASSES),
        "num_classes": 3,
        "train_images": 6,
        "val_images": 3,
        "sha256": hashlib.sha256(archive.read_bytes()).hexdigest(),
        "synthetic": None,
    }
    data = load_data_root(out)
    assert data.root == (out / "tiny-nette").resolve()
    assert data.classes == tuple(sorted(TINY_CLASSES))


def test_catalog_kind_and_matching_checksums_are_accepted(archive, tmp_path):
    payload = archive.read_bytes()
    info = extract(
        archive,
        tmp_path / "out",
        name="tiny",
        kind="catalog",
        size=len(payload),
        md5=hashlib.md5(payload, usedforsecurity=False).hexdigest(),
        sha256=hashlib.sha256(payload).hexdigest().upper(),
    )
    assert info["kind"] == "catalog"


def test_archive_without_top_folder_goes_to_data(tree, tmp_path):
    archive = tmp_path / "flat.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        for split in ("train", "val"):
            tar.add(tree / split, arcname=split)
    info = extract(archive, tmp_path / "out", name="flat")
    assert info["root"] == "data"
    assert (tmp_path / "out" / "data" / "train" / TINY_CLASSES[0]).is_dir()


def test_rerun_replaces_a_stale_tree(archive, tmp_path):
    out = tmp_path / "out"
    extract(archive, out, name="tiny")
    (out / "tiny-nette" / "stale.txt").write_text("from an earlier run")
    extract(archive, out, name="tiny")
    assert not (out / "tiny-nette" / "stale.txt").exists()
    assert _entries(out) == ["dataset.json", "tiny-nette"]


def test_checksum_mismatch_names_archive_and_check(archive, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(DatasetError) as caught:
        extract(archive, out, name="tiny", md5="0" * 32)
    assert str(archive) in str(caught.value) and "md5 check failed" in str(caught.value)
    assert _entries(out) == []


def test_corrupt_archive_leaves_no_tree_and_no_dataset_json(archive, tmp_path):
    out = tmp_path / "out"
    extract(archive, out, name="tiny")  # a good earlier run
    corrupt = tmp_path / "corrupt.tgz"
    corrupt.write_bytes(archive.read_bytes()[:-200])
    with pytest.raises(DatasetError) as caught:
        extract(corrupt, out, name="tiny")
    assert str(corrupt) in str(caught.value)
    assert "truncated or corrupt" in str(caught.value)
    assert not (out / "dataset.json").exists()  # no longer "ready"
    assert not any(name.startswith(".") for name in _entries(out))

    fresh = tmp_path / "fresh"
    with pytest.raises(DatasetError):
        extract(corrupt, fresh, name="tiny")
    assert _entries(fresh) == []


def _outside_marker(tmp_path):
    return tmp_path / "outside" / "evil"


HOSTILE = {
    "dotdot": lambda t: [(_member("tiny-nette/../../outside/evil"), b"x")],
    "absolute": lambda t: [(_member(str(_outside_marker(t))), b"x")],
    "symlink-absolute": lambda t: [
        (_member("tiny-nette/pw", tarfile.SYMTYPE, "/etc/passwd"), None)
    ],
    "symlink-up": lambda t: [(_member("tiny-nette/up", tarfile.SYMTYPE, "../.."), None)],
    "hardlink-out": lambda t: [
        (_member("tiny-nette/hl", tarfile.LNKTYPE, "../outside/evil"), None)
    ],
    "device": lambda t: [(_member("tiny-nette/dev", tarfile.CHRTYPE), None)],
    "fifo": lambda t: [(_member("tiny-nette/fifo", tarfile.FIFOTYPE), None)],
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_members_are_refused_before_anything_is_written(tree, tmp_path, kind):
    extra = HOSTILE[kind](tmp_path)
    archive = make_tgz(tree, tmp_path / "hostile.tgz", extra=extra)
    out = tmp_path / "out"
    with pytest.raises(DatasetError) as caught:
        extract(archive, out, name="tiny")
    message = str(caught.value)
    assert f"refusing to extract {archive}" in message
    assert repr(extra[0][0].name) in message
    assert _entries(out) == []
    assert not _outside_marker(tmp_path).exists()
    assert not (tmp_path / "outside").exists()


def test_the_issues_link_chain_is_refused_at_its_first_link(tree, tmp_path):
    """``b -> .``, ``a -> b/../..``, then ``a/x``: each name looks harmless alone (the old
    lexical check passed all three); only resolving the links in order shows ``a/x`` lands two
    levels above the root. Links are refused outright, so the first one stops it."""
    archive = make_tgz(
        tree,
        tmp_path / "chain.tgz",
        extra=[
            (_member("tiny-nette/b", tarfile.SYMTYPE, "."), None),
            (_member("tiny-nette/a", tarfile.SYMTYPE, "b/../.."), None),
            (_member("tiny-nette/a/x"), b"escaped"),
        ],
    )
    out = tmp_path / "work" / "out"
    with pytest.raises(DatasetError) as caught:
        extract(archive, out, name="tiny")
    message = str(caught.value)
    assert f"refusing to extract {archive}: member 'tiny-nette/b' is a symlink" in message
    assert _entries(out) == []
    assert not (tmp_path / "x").exists() and not (tmp_path / "work" / "x").exists()


@pytest.mark.parametrize(
    "member",
    [
        _member("tiny-nette/README", tarfile.SYMTYPE, "train"),  # inside, and still refused
        _member("tiny-nette/train/n01440764/copy.JPEG", tarfile.LNKTYPE, "tiny-nette/val"),
        _member("tiny-nette/loop", tarfile.SYMTYPE, ".."),
        _member("tiny-nette/blk", tarfile.BLKTYPE),
    ],
    ids=["symlink-inside", "hardlink-inside", "symlink-loop", "block-device"],
)
def test_every_link_and_special_file_is_refused_naming_the_member(tree, tmp_path, member):
    archive = make_tgz(tree, tmp_path / "links.tgz", extra=[(member, None)])
    out = tmp_path / "out"
    with pytest.raises(DatasetError) as caught:
        extract(archive, out, name="tiny")
    assert f"member {member.name!r}" in str(caught.value)
    assert _entries(out) == []


def test_extraction_refuses_to_run_without_tarfiles_data_filter(archive, tmp_path, monkeypatch):
    """Before Python 3.10.12 / 3.11.4 tarfile has no data filter; extraction says so and
    touches nothing (not even an old dataset.json, which stays as it was)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "dataset.json").write_text("{}")
    monkeypatch.delattr(tarfile, "data_filter")
    with pytest.raises(DatasetError) as caught:
        extract(archive, out, name="tiny")
    message = str(caught.value)
    assert message.startswith(f"refusing to extract {archive}: this Python (")
    assert "has no tarfile data filter (added in 3.10.12, 3.11.4 and 3.12)" in message
    assert _entries(out) == ["dataset.json"]


def test_archive_without_train_and_val_is_refused(tmp_path):
    (tmp_path / "junk" / "images").mkdir(parents=True)
    (tmp_path / "junk" / "images" / "a.txt").write_text("a")
    archive = make_tgz(tmp_path / "junk", tmp_path / "junk.tgz")
    with pytest.raises(DatasetError, match="no folder holding both train/ and val/.*junk/"):
        extract(archive, tmp_path / "out", name="junk")
    assert _entries(tmp_path / "out") == []


def test_mismatched_classes_are_refused(tree, tmp_path):
    (tree / "val" / TINY_CLASSES[0] / f"{TINY_CLASSES[0]}_0.JPEG").rename(tree / "x.JPEG")
    (tree / "val" / TINY_CLASSES[0]).rmdir()
    archive = make_tgz(tree, tmp_path / "mismatch.tgz")
    with pytest.raises(DatasetError, match="different class folders"):
        extract(archive, tmp_path / "out", name="tiny")
    assert _entries(tmp_path / "out") == []


def test_cli_reports_errors_in_one_line(tmp_path):
    bogus = tmp_path / "bogus.tgz"
    bogus.write_bytes(b"not an archive")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "nettebench",
            "datasets",
            "extract",
            "--archive",
            str(bogus),
            "--out-dir",
            str(tmp_path / "out"),
            "--name",
            "x",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: {bogus} is not a complete gzip-compressed tar")
    assert "Traceback" not in result.stderr


def test_cli_success(archive, tmp_path, capsys):
    assert main(["--archive", str(archive), "--out-dir", str(tmp_path / "o"), "--name", "t"]) == 0
    assert "3 classes, 6 train / 3 val images" in capsys.readouterr().out


def test_file_contents_survive_extraction(tree, archive, tmp_path):
    relative = f"train/{TINY_CLASSES[1]}/{TINY_CLASSES[1]}_1.JPEG"
    extract(archive, tmp_path / "out", name="t")
    assert (tmp_path / "out" / "tiny-nette" / relative).read_bytes() == (
        tree / relative
    ).read_bytes()
