"""End to end with the real NVIDIA apex: 25.05 (the last release with ``apex.amp``), vendored as a
one-commit git repository beside the project (../shared/vendor), used as a `builds: apex:`
source through the real Snakemake, offline: clone, Python-only wheel, install; then
``amp_backend: apex`` cells on this CPU, which apex itself refuses (it needs CUDA): recorded as
``unsupported`` with apex's own words, never a traceback. On a GPU the same build trains apex
O1-O3 (tests/device/run.py)."""

from __future__ import annotations

import json
import subprocess
import tarfile

import pandas as pd
import pytest

from nettebench.vocabulary.cell import CellSpec
from tests.stages import builds_stage
from tests.vendored_apex import VENDORED_APEX
from tests.workflow_helpers import copy_workflow, run_study, write_config

pytestmark = [pytest.mark.workflow, *builds_stage("clones, builds and installs apex 25.05")]

BUILD = "25.05"
SHAPE = {"dataset": "tiny", "batch_size": 20, "epochs": 1, "image_size": 32, "workers": 0}
APEX_CELLS = {
    level: CellSpec(**SHAPE, precision=level, amp_backend="apex", apex=BUILD).path()
    for level in ("O0", "O1")
}
# apex 25.05's check_params_fp32, which amp.initialize runs first
APEX_OWN_WORDS = "expected torch.cuda.FloatTensor"


@pytest.fixture(scope="module")
def apex_study(tmp_path_factory):
    if not VENDORED_APEX.is_file():
        pytest.skip(f"the vendored apex source is not here: {VENDORED_APEX}")
    root = tmp_path_factory.mktemp("apex")
    with tarfile.open(VENDORED_APEX) as archive:
        archive.extractall(root / "vendor", filter="data")
    repo = root / "vendor" / "apex"
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", f"{BUILD}^{{commit}}"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    workdir = copy_workflow(root / "wf")
    config = {
        "datasets": {"tiny": {"synthetic": {"size": 40, "train_images": 40, "val_images": 20}}},
        "builds": {"apex": {BUILD: {"repo": str(repo), "ref": BUILD}}},
        "matrix": {
            "model": "resnet18",
            "epochs": 1,
            "batch_size": 20,
            "image_size": 32,
            "workers": 0,
            "amp_backend": "apex",
            "apex": BUILD,
            "precision": ["O0", "O1"],
        },
    }
    # the cells and runs.csv; the figures and the front page are tested elsewhere
    run_study(workdir, write_config(workdir, config), "--until", "tables_aggregate")
    return {"workdir": workdir, "commit": commit}


def test_the_vendored_apex_is_cloned_built_and_installed_offline(apex_study):
    builds = apex_study["workdir"] / "results" / "builds" / "apex" / BUILD
    source = json.loads((builds / "source.json").read_text())
    assert (source["ref"], source["commit"]) == (BUILD, apex_study["commit"])
    wheel = json.loads((builds / "wheel.json").read_text())
    assert json.dumps(wheel).count("apex-0.1-py3-none-any.whl") >= 1  # Python-only
    assert (builds / "prefix" / "apex" / "amp" / "frontend.py").is_file()


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_an_apex_cell_on_the_cpu_is_unsupported_in_apexs_own_words(apex_study, level):
    workdir = apex_study["workdir"]
    record = json.loads(
        (workdir / "results" / "runs" / APEX_CELLS[level] / "metrics.json").read_text()
    )
    assert record["status"] == "unsupported"
    assert record["message"].startswith("amp_backend apex cannot train on cpu: apex.amp refused")
    assert APEX_OWN_WORDS in record["message"] and "CUDA device" in record["message"]
    environment = record["environment"]
    assert (environment["apex"], environment["apex_build"]) == ("0.1", BUILD)
    assert environment["apex_commit"] == apex_study["commit"]
    log = workdir / "results" / "logs" / "runs" / f"{APEX_CELLS[level]}.log"
    assert "Traceback" not in log.read_text()
    ceiling = json.loads(
        (workdir / "results" / "runs" / APEX_CELLS[level] / "ceiling.json").read_text()
    )
    assert ceiling["status"] == "unsupported" and APEX_OWN_WORDS in ceiling["message"]


def test_the_tables_list_the_apex_cells_as_unsupported(apex_study):
    runs = pd.read_csv(apex_study["workdir"] / "results" / "tables" / "runs.csv")
    apex = runs[runs["amp_backend"] == "apex"]
    assert sorted(apex["precision"]) == ["O0", "O1"]
    assert set(apex["status"]) == {"unsupported"}
