"""Records of one cell, seed and setup that are not byte-identical (two snapshots of a results
folder, two unlabelled clusters with the same hardware) are counted once, saying which was kept
and why; two machines or environments stay apart. Through the real aggregate (fake cells)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import record_factory as rf

from nettebench.report import aggregate as agg
from nettebench.report import format as T

T4 = {"gpu_name": "Tesla T4", "driver": "470.82.01"}


def _cell(root, seconds, *, written=None, env=None, epochs_run=None, **kwargs):
    """A resnet18 O0 seed-0 cell in its own tree; ``written``: its metrics.json's mtime;
    ``epochs_run``: a snapshot taken before the cell finished (its summary says so)."""
    path = rf.make_cell(root, time_for_epochs_s=seconds, env=env, **kwargs)
    if epochs_run is not None:
        record = json.loads(path.read_text())
        record["summary"]["epochs_run"] = epochs_run
        path.write_text(json.dumps(record))
    if written is not None:
        os.utime(path, (written, written))
    return path


def _aggregate(paths, out):
    merged = []
    written = agg.aggregate(paths, out, merged=merged)
    return pd.read_csv(written["runs"]), written, merged


def test_two_snapshots_of_one_results_folder_count_once_keeping_the_newer(tmp_path):
    older = _cell(tmp_path / "snap-monday", 150.0, written=1_800_000_000)
    newer = _cell(tmp_path / "snap-friday", 160.0, written=1_800_400_000, env={"process_id": 9})
    runs, written, merged = _aggregate([older, newer], tmp_path / "out")
    assert len(runs) == 1 and runs["time_for_epochs_s"].tolist() == [160.0]
    assert runs["path"].tolist() == [str(newer.parent)]
    assert [(m.dropped, m.kept) for m in merged] == [(str(older.parent), str(newer.parent))]
    assert merged[0].why.startswith("the newer record: written ")
    assert f"{T.SEEDS_TEXT} (n=1)" in written["time_by_model_precision"].read_text()
    epochs = pd.read_csv(written["epochs"])
    assert epochs["path"].unique().tolist() == [str(newer.parent)]


def test_a_snapshot_taken_mid_run_loses_to_the_finished_record_even_if_newer(tmp_path):
    finished = _cell(tmp_path / "a", 150.0, written=1_800_000_000)
    partial = _cell(tmp_path / "b", 100.0, written=1_800_400_000, epochs_run=2)
    runs, _, merged = _aggregate([partial, finished], tmp_path / "out")
    assert runs["path"].tolist() == [str(finished.parent)]
    assert merged[0].why == "it ran 3 epoch(s), the other 2"


def test_an_ok_record_is_kept_over_a_failed_one(tmp_path):
    oom = _cell(tmp_path / "a", None, status="oom", written=1_800_400_000)
    ok = _cell(tmp_path / "b", 150.0, written=1_800_000_000)
    runs, _, merged = _aggregate([oom, ok], tmp_path / "out")
    assert runs["status"].tolist() == ["ok"]
    assert merged[0].why == "its status is ok, the other's oom"


def test_two_unlabelled_clusters_with_the_same_hardware_count_once(tmp_path):
    """Different hosts, SLURM jobs and CPU sets; the same GPU, driver, libraries and code."""
    here = _cell(tmp_path / "a", 150.0, env={"host": "a-n01", "slurm_job_id": "11"})
    there = _cell(
        tmp_path / "b",
        151.0,
        env={"host": "b-gpu7", "slurm_job_id": "923", "platform": "Linux-5.14", "process_id": 3},
    )
    runs, _, merged = _aggregate([here, there], tmp_path / "out")
    assert len(runs) == 1 and len(merged) == 1


def test_different_machines_environments_and_seeds_stay_apart(tmp_path):
    paths = [
        _cell(tmp_path / "h200", 150.0),
        _cell(tmp_path / "t4", 400.0, env=T4, device_name="Tesla T4"),
        _cell(tmp_path / "pillow12", 151.0, env={"pillow": "12.3.0"}),
        _cell(tmp_path / "env-e", 152.0, extra_cell={"environment": "e"}),
        _cell(tmp_path / "labelled", 153.0, extra_cell={"machine": "site-b"}),
        _cell(tmp_path / "seed1", 154.0, seed=1),
        _cell(tmp_path / "torch", 155.0, env={"torch": "2.15.0"}),
    ]
    runs, _, merged = _aggregate(paths, tmp_path / "out")
    assert merged == [] and len(runs) == len(paths)


def test_the_command_says_which_record_it_kept_and_why(tmp_path):
    older = _cell(tmp_path / "a", 150.0, written=1_800_000_000)
    newer = _cell(tmp_path / "b", 160.0, written=1_800_400_000)
    result = subprocess.run(
        [sys.executable, "-m", "nettebench", "report", "tables", "--out-dir", str(tmp_path / "o")]
        + [str(older), str(newer)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert (
        f"counted once: {older.parent} and {newer.parent} describe the same cell, seed and "
        f"setup; kept {newer.parent} (the newer record: written "
    ) in result.stderr
    assert len(pd.read_csv(tmp_path / "o" / "runs.csv")) == 1
