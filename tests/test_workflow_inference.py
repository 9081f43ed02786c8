"""End to end on the CPU: a trained cell, then its inference cells and accuracy, via Snakemake."""

from __future__ import annotations

import json

import pytest

from tests.workflow_helpers import copy_workflow, planned_jobs, run_study, write_config

pytestmark = pytest.mark.workflow

STUDY = {
    "datasets": {
        "tiny": {"synthetic": {"size": 40, "train_images": 40, "val_images": 20, "classes": 4}}
    },
    "matrix": {
        "model": "resnet18",
        "precision": "O0",
        "batch_size": 8,
        "epochs": 1,
        "image_size": 32,
        "workers": 0,
        "device": "cpu",
    },
    "ceiling": False,
    "inference": {
        "model": "resnet18",
        "precision": "fp32",
        "batch_size": [1, 4],
        "image_size": 32,
        "workers": 0,
        "device": "cpu",
        "include": [{"precision": "bf16", "batch_size": 1}],
        "latency_queries": 30,
        "max_seconds": 1,
        "warmup": 1,
        "accuracy": True,
    },
}
TRAINED = "results/runs/tiny/model~resnet18/precision~O0/batch~8/epochs~1/seed~0/device~cpu/image_size~32/workers~0"  # noqa: E501


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("inference"))
    config = write_config(workdir, STUDY)
    run_study(workdir, config)
    return workdir, config


def test_inference_cells_ran_with_paths_that_omit_defaults(study):
    workdir, _ = study
    root = workdir / "results" / "inference" / "tiny" / "model~resnet18"
    found = sorted(p.relative_to(root).as_posix() for p in root.rglob("inference.json"))
    assert found == [
        "precision~bf16/batch~1/device~cpu/image_size~32/workers~0/inference.json",
        "precision~fp32/batch~1/device~cpu/image_size~32/workers~0/inference.json",
        "precision~fp32/batch~4/device~cpu/image_size~32/workers~0/inference.json",
    ]
    for path in root.rglob("inference.json"):
        record = json.loads(path.read_text())
        assert record["status"] == "ok" and record["offline"]["img_s"] > 0
        assert record["pipeline"]["images"] > 0
        assert (record["single_stream"] is None) == (record["cell"]["batch_size"] != 1)
        assert record["environment"]["cpu_capability"] and record["conditions"]["wall_s"] > 0


def test_the_trained_cells_final_weights_give_its_final_accuracy_in_fp32(study):
    workdir, _ = study
    metrics = json.loads((workdir / TRAINED / "metrics.json").read_text())
    assert (workdir / TRAINED / "weights.pt").stat().st_size > 40e6  # resnet18 in fp32
    accuracy = json.loads(
        (workdir / TRAINED.replace("runs/", "inference_accuracy/") / "accuracy.json").read_text()
    )
    rows = {row["precision"]: row for row in accuracy["rows"]}
    assert list(rows) == ["fp32", "bf16"]
    # the same weights and validation as the trainer's last epoch: the same top-1
    assert rows["fp32"]["top1"] == pytest.approx(metrics["summary"]["final_top1"])
    assert rows["bf16"]["top1_diff"] == pytest.approx(rows["bf16"]["top1"] - rows["fp32"]["top1"])


def test_tables_figure_and_front_page_show_inference(study):
    workdir, _ = study
    tables = workdir / "results" / "tables"
    table = (tables / "inference.md").read_text()
    assert table.count("| resnet18 |") == 3 and "SingleStream" in table
    assert (
        "| resnet18 | O0 | 0 | bf16 (channels_last) |"
        in (tables / "inference_accuracy.md").read_text()
    )
    assert (workdir / "results" / "figures" / "inference_latency_throughput.png").stat().st_size
    assert "Inference: at most" in (workdir / "results" / "front_page.html").read_text()


def test_nothing_to_do_after_the_run_and_accuracy_off_reruns_no_cell(study):
    workdir, config = study
    assert planned_jobs(run_study(workdir, config, "-n")) == {}
    off = {**STUDY, "inference": {**STUDY["inference"], "accuracy": False}}
    planned = planned_jobs(run_study(workdir, write_config(workdir, off, "off.yaml"), "-n"))
    # without weights.pt among cell_train's outputs its other outputs are still current
    assert planned == {"inference_tables": 1, "inference_figure": 1, "front_page_write": 1}
