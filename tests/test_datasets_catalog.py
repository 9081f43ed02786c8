"""The catalog names every fast.ai dataset the study uses, and the package stays light to import."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from nettebench.vocabulary.dataset_catalog import CATALOG, CatalogEntry, lookup
from nettebench.vocabulary.dataset_errors import DatasetError

EXPECTED = {
    # name: (size, md5) from fastai/data/checks.txt
    "imagenette2": (1557161267, "2c774ecb40005b35d7937d50f5d42336"),
    "imagenette2-160": (99003388, "c475f8f7617a200ba35b9facc48443c3"),
    "imagenette2-320": (341663724, "1f1f74f133caff120e575856659b87a2"),
    "imagewoof2": (1343715595, "2cc1c1e36e20cb6fd24ffb978edcb487"),
    "imagewoof2-160": (92612825, "3559b194123981a540b87132dbda412f"),
    "imagewoof2-320": (328387740, "7a1fd92672a559a85de76e4810a20c21"),
    "imagenette-320": (None, None),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_name_resolves_to_its_fastai_url_and_checksum(name):
    entry = lookup(name)
    assert entry.name == name
    assert entry.url == f"https://s3.amazonaws.com/fast-ai-imageclas/{name}.tgz"
    assert (entry.size, entry.md5) == EXPECTED[name]
    assert entry.sha256 is None
    assert entry.num_classes == 10


def test_catalog_holds_exactly_the_study_datasets():
    assert set(CATALOG) == set(EXPECTED)
    assert all(isinstance(entry, CatalogEntry) for entry in CATALOG.values())


def test_imagenette2_320_records_its_split_sizes():
    entry = lookup("imagenette2-320")
    assert (entry.train_images, entry.val_images) == (9469, 3925)


def test_entries_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        lookup("imagenette2-320").md5 = "0" * 32


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [("imagenette2-32", "imagenette2-320"), ("imagewoof-160", "imagewoof2-160")],
)
def test_unknown_name_suggests_close_matches_and_lists_all(typo, suggestion):
    with pytest.raises(DatasetError) as caught:
        lookup(typo)
    message = str(caught.value)
    assert repr(typo) in message
    assert f"did you mean {suggestion!r}" in message
    for name in EXPECTED:
        assert name in message
    assert "source:" in message and "synthetic:" in message


def test_unknown_name_without_close_match_still_lists_names():
    with pytest.raises(DatasetError) as caught:
        lookup("cifar10")
    assert "did you mean" not in str(caught.value)
    assert "imagenette2-320" in str(caught.value)


def test_importing_the_dataset_layer_loads_nothing_heavy():
    """Snakemake imports the catalog at parse time; torch/numpy there would slow every dry run."""
    code = (
        "import sys\n"
        "import nettebench.datasets, nettebench.datasets.info\n"
        "import nettebench.vocabulary.dataset_catalog\n"
        "import nettebench.datasets.fetch, nettebench.datasets.extract, nettebench.datasets.local\n"
        "heavy = {'torch', 'torchvision', 'pandas', 'numpy', 'PIL', 'tqdm'}\n"
        "light = sorted(heavy & set(sys.modules))\n"
        "import nettebench.datasets.synthetic\n"
        "synthetic = sorted({'torch', 'torchvision', 'pandas'} & set(sys.modules))\n"
        "print(light, synthetic)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[] []"
