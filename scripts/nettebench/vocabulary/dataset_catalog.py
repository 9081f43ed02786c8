"""The fast.ai image-classification datasets the study can download by name.

Imported when Snakemake parses the workflow, so it imports nothing but the standard library.

Sizes and md5 sums are fastai's own, from ``fastai/data/checks.txt`` in the fastai repository
(https://github.com/fastai/fastai/blob/master/fastai/data/checks.txt), which ``untar_data``
verifies downloads against. The study's original ``imagenette-320`` (the first Imagenette release,
superseded on 2019-12-06 by the "2" versions with a 70/30 split) is not listed there: its size and
checksum are unknown, so a fetch of it is checked structurally only and its sha256 recorded.

Image counts are from the TensorFlow Datasets catalog page for ``imagenette``
(https://www.tensorflow.org/datasets/catalog/imagenette): 9,469 train / 3,925 val for every
``imagenette2`` size, 12,894 / 500 for the first release. Imagewoof counts are left unknown.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from nettebench.vocabulary.dataset_errors import DatasetError

BASE_URL = "https://s3.amazonaws.com/fast-ai-imageclas"


@dataclass(frozen=True)
class CatalogEntry:
    """A downloadable dataset: where it is and what a correct download looks like."""

    name: str
    url: str
    size: int | None  # bytes of the .tgz; None when unknown
    md5: str | None  # of the .tgz, as published by fastai; None when unknown
    sha256: str | None = None  # nobody publishes one for these; kept for user-added entries
    num_classes: int = 10
    train_images: int | None = None
    val_images: int | None = None


def _entry(name: str, size: int | None, md5: str | None, **counts: int) -> CatalogEntry:
    return CatalogEntry(name=name, url=f"{BASE_URL}/{name}.tgz", size=size, md5=md5, **counts)


_IMAGENETTE2 = {"train_images": 9469, "val_images": 3925}

CATALOG: dict[str, CatalogEntry] = {
    entry.name: entry
    for entry in (
        _entry("imagenette2", 1557161267, "2c774ecb40005b35d7937d50f5d42336", **_IMAGENETTE2),
        _entry("imagenette2-320", 341663724, "1f1f74f133caff120e575856659b87a2", **_IMAGENETTE2),
        _entry("imagenette2-160", 99003388, "c475f8f7617a200ba35b9facc48443c3", **_IMAGENETTE2),
        _entry("imagewoof2", 1343715595, "2cc1c1e36e20cb6fd24ffb978edcb487"),
        _entry("imagewoof2-320", 328387740, "7a1fd92672a559a85de76e4810a20c21"),
        _entry("imagewoof2-160", 92612825, "3559b194123981a540b87132dbda412f"),
        _entry("imagenette-320", None, None, train_images=12894, val_images=500),
    )
}


def lookup(name: str) -> CatalogEntry:
    """The catalog entry called ``name``; an unknown name lists close matches and all names."""
    try:
        return CATALOG[name]
    except KeyError:
        pass
    close = difflib.get_close_matches(name, CATALOG, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    raise DatasetError(
        f"unknown dataset {name!r}: {hint}known datasets are {', '.join(CATALOG)}. "
        "For anything else, set `source:` for the dataset in config.yaml (a .tgz, a folder with "
        "train/ and val/, or a URL) or use a `synthetic:` dataset"
    )
