"""End to end: a local-folder dataset is identified by its files, so replacing its images with
the same counts reruns the registration and every cell that reads it (the real rules, a real
Snakemake run, then Snakemake's own rerun decision in dry runs)."""

from __future__ import annotations

import json
import os

import pytest
from PIL import Image

from nettebench.datasets.testing import TINY_CLASSES, make_image_tree
from tests.workflow_helpers import copy_workflow, planned_jobs, run_study, write_config

pytestmark = pytest.mark.workflow

INFO = "results/data/mine/dataset.json"
CELLS = ("--until", "cell_train")  # the registration and the cell; the report is tested elsewhere


def _replace(image, colour):
    """Write another picture under the same name (the count stays); keep its mtime, as a
    ``cp -p`` or an rsync of a same-sized file would."""
    stat = image.stat()
    with Image.open(image) as old:
        size = old.size
    Image.new("RGB", size, colour).save(image, "JPEG", quality=90)
    os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_replaced_images_with_the_same_counts_rerun_the_registration_and_the_cell(tmp_path):
    workdir = copy_workflow(tmp_path / "wf")
    tree = make_image_tree(tmp_path / "mine", size=40)
    config = {
        "datasets": {"mine": {"source": str(tree)}},
        "matrix": {
            "model": "resnet18",
            "epochs": 1,
            "batch_size": 6,
            "image_size": 32,
            "workers": 0,
        },
        "ceiling": False,
    }
    path = write_config(workdir, config)
    run_study(workdir, path, *CELLS)
    first = json.loads((workdir / INFO).read_text())
    assert first["kind"] == "directory" and len(first["files_sha256"]) == 64
    # nothing changed: nothing runs
    assert planned_jobs(run_study(workdir, path, "-n", *CELLS)) == {}

    # Touched, not changed: the registration reruns (Snakemake cannot tell without reading),
    # and writes the same dataset.json content, so the cell is left alone (Snakemake compares
    # the checksum it recorded of a small input; the restore key digests the same content).
    os.utime(next((tree / "val" / TINY_CLASSES[0]).iterdir()))
    assert planned_jobs(run_study(workdir, path, "-n", INFO)) == {"dataset_register": 1}
    run_study(workdir, path, INFO)
    assert json.loads((workdir / INFO).read_text()) == first
    assert planned_jobs(run_study(workdir, path, "-n", *CELLS)) == {}

    # Replaced: same names, same counts, other pictures.
    for image in sorted((tree / "train" / TINY_CLASSES[1]).iterdir()):
        _replace(image, (250, 10, 10))
    dry = planned_jobs(run_study(workdir, path, "-n", *CELLS))
    assert dry.get("dataset_register") == 1 and dry.get("cell_train") == 1
    run_study(workdir, path, INFO)  # the real register step
    second = json.loads((workdir / INFO).read_text())
    assert (second["train_images"], second["val_images"]) == (6, 3)
    assert second["files_sha256"] != first["files_sha256"]
    assert planned_jobs(run_study(workdir, path, "-n", *CELLS)).get("cell_train") == 1
