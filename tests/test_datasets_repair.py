"""An image that no longer decodes, as the loaders and the store build meet it: the line names the
file first, then what brings it back, which depends on where the dataset came from
(nettebench.datasets.repair). The workflow's side (the first line in the terminal, the rebuild
planning one job, the cells already done staying done) is tests/test_faults.py's."""

from __future__ import annotations

import os

import pytest

from nettebench.data import store_build
from nettebench.data.pil import load_image
from nettebench.datasets import repair
from nettebench.datasets.extract import extract
from nettebench.datasets.local import register_directory
from nettebench.datasets.synthetic import generate
from nettebench.datasets.testing import make_image_tree, make_tgz
from nettebench.vocabulary import terminal
from nettebench.vocabulary.dataset_errors import DatasetError

NOT_AN_IMAGE = b"not a JPEG any more\n"


def first_train_image(root) -> str:
    """The first training image under ``root``, as the loaders name it: relative to the working
    directory (the workflow's), where the workflow's datasets lie."""
    found = sorted(p for p in root.rglob("*.JPEG") if "/train/" in p.as_posix())
    return os.path.relpath(found[0])


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def said(monkeypatch):
    """What is said in the terminal, read from the pipe standing in for it."""
    read, write = os.pipe()
    monkeypatch.setattr(terminal, "_FD", write)
    yield lambda: os.read(read, 1 << 16).decode()
    os.close(read)
    os.close(write)


def test_a_generated_datasets_image_names_the_file_then_the_one_rebuild(workdir, said):
    generate(workdir / "results/data/tiny", name="tiny", size=16, train_images=4, val_images=2,
             num_classes=2, jobs=1, progress=False)  # fmt: skip
    image = first_train_image(workdir / "results/data/tiny")
    with open(image, "wb") as handle:
        handle.write(NOT_AN_IMAGE)
    with pytest.raises(DatasetError) as raised:
        load_image(str(workdir / image))  # ImageFolder's absolute path
    message = str(raised.value)
    assert message.startswith(
        f"{image} does not decode (UnidentifiedImageError: cannot identify image file); "
        "the workflow generated this dataset: rebuild it alone, "
        "`snakemake --force results/data/tiny/dataset.json`"
    ), message
    assert str(workdir) not in message  # the path once, relative, and not in the decoder's words
    assert said() == f"nettebench: {message}\n"  # the same line, first, in the terminal


def test_an_extracted_datasets_image_is_extracted_again(workdir, tmp_path_factory):
    source = tmp_path_factory.mktemp("source")
    tree = make_image_tree(source / "tinynette", train_per_class=1, val_per_class=1)
    extract(make_tgz(tree, source / "tiny.tgz"), workdir / "results/data/tiny", name="tiny")
    image = first_train_image(workdir / "results/data/tiny")
    with open(image, "wb") as handle:
        handle.write(NOT_AN_IMAGE[:4])
    with pytest.raises(store_build.StoreError) as raised:  # the store build's decode
        store_build.decode_frame(image, 16)
    assert str(raised.value).startswith(f"{image} does not decode (")
    assert str(raised.value).endswith(
        "the workflow extracted this dataset from its verified archive: rebuild it alone, "
        "`snakemake --force results/data/tiny/dataset.json` with your run's "
        "--workflow-profile/--configfile, then run again (the same files come back: only the "
        "failed job and what depends on it rerun)"
    )


def test_a_folder_the_workflow_did_not_make_is_the_users_to_mend(workdir, tmp_path_factory):
    """A folder registered in place (its dataset.json is elsewhere) and a bare tree given by
    hand: no rebuild to offer, the file is the user's."""
    folder = make_image_tree(tmp_path_factory.mktemp("mine") / "tinynette")
    register_directory(folder, workdir / "results/data/mine", name="mine")
    bare = make_image_tree(workdir / "bare")
    for tree in (folder, bare):
        image = sorted((tree / "train").rglob("*.JPEG"))[0]
        image.write_bytes(NOT_AN_IMAGE)
        message = repair.undecodable(image, OSError("broken data stream"))
        assert message == (
            f"{repair.shown(image)} does not decode (OSError: broken data stream); replace or "
            "remove it, or prepare the dataset through the workflow, which checks every image "
            "first (and a registered folder again at each run)"
        )
    assert repair.shown(folder) == str(folder)  # outside the working directory: as it is
