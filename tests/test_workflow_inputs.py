"""End to end: the seed study's plan, datasets through the real rules, and bad data.

Bad data must fail naming the file and the check, leaving nothing half-made; finished cells
survive failures. (Bad config: tests/test_faults.py.)
"""

from __future__ import annotations

import json

import pytest

from nettebench.datasets.testing import LocalHTTPServer, make_image_tree, make_tgz
from tests.workflow_helpers import (
    copy_workflow,
    planned_jobs,
    run_study,
    snakemake,
    write_config,
)

pytestmark = pytest.mark.workflow


@pytest.fixture
def workdir(tmp_path):
    return copy_workflow(tmp_path / "wf")


@pytest.fixture(scope="module")
def tiny_archive(tmp_path_factory):
    root = tmp_path_factory.mktemp("archive")
    tree = make_image_tree(root / "tinynette", train_per_class=2, val_per_class=1)
    return make_tgz(tree, root / "tinynette.tgz")


def test_seed_study_config_plans_the_studys_cells(workdir):
    plan = snakemake(workdir, "-n", "--cores", "1", "--printshellcmds")
    jobs = planned_jobs(plan)
    # resnet18/34 at 256 and resnet50 at 128, each in O0..O3, three processes (seeds) each;
    # the resnet34 CPU baseline.
    assert jobs["cell_train"] == 3 * 4 * 3
    assert jobs["cpu_baseline_train"] == 1
    assert jobs["dataset_download"] == 1 and jobs["dataset_extract"] == 1
    text = plan.stdout + plan.stderr
    for precision in ("O0", "O1", "O2", "O3"):
        assert f"model~resnet50/precision~{precision}/batch~128/" in text
    assert "model~resnet50/precision~O0/batch~256/" not in text
    assert "results/cpu/imagenette2-320/model~resnet34/precision~fp32/batch~256/epochs~1/" in text
    assert "s3.amazonaws.com/fast-ai-imageclas/imagenette2-320.tgz" in text
    assert "--md5 1f1f74f133caff120e575856659b87a2" in text


def test_download_through_the_workflow_verifies_and_records_sha256(workdir, tiny_archive):
    data = tiny_archive.read_bytes()
    with LocalHTTPServer({"/tinynette.tgz": data}) as server:
        config = {
            "datasets": {"tinynette": {"source": server.url("/tinynette.tgz")}},
            "matrix": {"epochs": 1},
        }
        run_study(workdir, write_config(workdir, config), "results/data/tinynette/dataset.json")
    manifest = json.loads((workdir / "results/downloads/tinynette.tgz.json").read_text())
    assert len(manifest["sha256"]) == 64 and manifest["size"] == len(data)
    info = json.loads((workdir / "results/data/tinynette/dataset.json").read_text())
    assert info["num_classes"] == 3 and info["train_images"] == 6


def test_unreachable_url_points_to_source_and_synthetic(workdir):
    with LocalHTTPServer({}) as server:  # every path is a 404
        config = {
            "datasets": {"gone": {"source": server.url("/gone.tgz")}},
            "matrix": {"epochs": 1},
        }
        result = run_study(
            workdir,
            write_config(workdir, config),
            "results/data/gone/dataset.json",
            check=False,
        )
    assert result.returncode != 0
    log = (workdir / "results/logs/datasets/gone.download.log").read_text()
    assert "could not" in log.lower() and "source:" in log and "synthetic" in log
    assert not list((workdir / "results" / "downloads").glob("gone*"))


def test_corrupt_archive_names_the_file_and_leaves_no_dataset(workdir, tiny_archive, tmp_path):
    broken = tmp_path / "broken.tgz"
    broken.write_bytes(tiny_archive.read_bytes()[: len(tiny_archive.read_bytes()) // 2])
    config = {"datasets": {"broken": {"source": str(broken)}}, "matrix": {"epochs": 1}}
    result = run_study(
        workdir, write_config(workdir, config), "results/data/broken/dataset.json", check=False
    )
    assert result.returncode != 0
    log = (workdir / "results/logs/datasets/broken.extract.log").read_text()
    assert "broken.tgz" in log
    data_dir = workdir / "results" / "data" / "broken"
    leftovers = [p.name for p in data_dir.iterdir()] if data_dir.exists() else []
    assert leftovers == [], leftovers


def test_finished_cells_survive_a_failing_cell(workdir):
    """inception_v3 cannot take 32 px crops; the resnet18 cell's results must stay."""
    config = {
        "datasets": {"tiny": {"synthetic": {"size": 40, "train_images": 40, "val_images": 20}}},
        "matrix": {
            "model": ["resnet18", "inception_v3"],
            "epochs": 1,
            "batch_size": 20,
            "image_size": 32,
            "workers": 0,
        },
        "ceiling": False,  # what survives is the cell's record; its ceiling is tested elsewhere
    }
    path = write_config(workdir, config)
    result = run_study(workdir, path, "--keep-going", check=False)
    assert result.returncode != 0
    runs = workdir / "results" / "runs" / "tiny"
    assert (next(runs.glob("model~resnet18/**/metrics.json"))).is_file()
    assert not list(runs.glob("model~inception_v3/**/metrics.json"))
    assert planned_jobs(run_study(workdir, path, "-n")) == {
        "cell_train": 1,
        "tables_aggregate": 1,
        "figures_plot": 1,
        "front_page_write": 1,
    }


def test_cached_loader_cells_build_the_store_once_and_train(workdir):
    config = {
        "datasets": {"tiny": {"synthetic": {"size": 40, "train_images": 60, "val_images": 20}}},
        "matrix": {
            "model": "resnet18",
            "loader": "cached",
            "epochs": 1,
            "batch_size": 10,
            "image_size": 32,
            "workers": 0,
            "seed": [0, 1],  # two cells on the one store
        },
        "ceiling": False,
    }
    path = write_config(workdir, config)
    # --until: the cells and what they need, not the report (checked elsewhere)
    result = run_study(workdir, path, "--cores", "2", "--until", "cell_train")
    text = result.stdout + result.stderr
    assert "tables_aggregate" not in text
    assert text.count("rule store_build:") == 1  # one store for both cached cells
    manifest = json.loads((workdir / "results/data/tiny/store/res~37/store.json").read_text())
    assert manifest["resolution"] == 37 and manifest["train_images"] == 60
    runs = workdir / "results" / "runs" / "tiny"
    cached = sorted(runs.glob("**/loader~cached/**/metrics.json"))
    assert len(cached) == 2 == len(list(runs.glob("**/metrics.json")))
    # that a pil cell keeps the path it always had: tests/test_workflow.py (the quick start)
    record = json.loads(cached[0].read_text())
    assert record["status"] == "ok" and record["cell"]["loader"] == "cached"
