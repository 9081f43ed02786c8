"""Timed jobs run one at a time locally, shown from a real run's own log.

The case that would break it: a many-core box where `--set-threads` gives a CPU baseline and a
matrix cell (which asks for the GPU) a core each, so the cores alone would let them run side by
side and each time the other. Every timed rule asks for `timed=1` and the local profiles allow
one at a time; Snakemake's log shows whether that held, and so do the records' own timed
windows (the timing-conditions table names any that overlapped). The same run with two timed
slots shows that the log does see jobs that overlap, and that the table names overlapping
windows exactly when the records' windows overlapped.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from tests.workflow_helpers import (
    concurrent_jobs,
    copy_workflow,
    run_study,
    snakemake_log,
    timed_job_count,
    write_config,
)

pytestmark = pytest.mark.workflow

STUDY = {
    "datasets": {
        "tiny": {
            "synthetic": {"size": 32, "train_images": 48, "val_images": 16, "classes": 4, "seed": 0}
        }
    },
    "matrix": {
        "model": "resnet18",
        "precision": "O0",
        "batch_size": 16,
        "epochs": 2,
        "image_size": 32,
        "workers": 0,
    },
    "cpu_baseline": {
        "model": "resnet18",
        "batch_size": 16,
        "epochs": 2,
        "image_size": 32,
        "workers": 0,
    },
}
# As on a many-core box: more cores than the two timed jobs need together.
MANY_CORES = ("--cores", "8", "--set-threads", "cell_train=1", "cpu_baseline_train=1")
# the cells and the tables these tests read; the figures and the front page are tested elsewhere
UNTIL_TABLES = ("--until", "tables_aggregate")


@pytest.fixture(scope="module")
def many_core_run(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("timed"))
    config = write_config(workdir, STUDY)
    run_study(workdir, config, *MANY_CORES, *UNTIL_TABLES)
    return workdir, config


def _records_overlap(workdir) -> bool:
    """Whether two jobs' timed windows in runs.csv (each job's epochs, and a matrix cell's
    ceiling) met in time, computed here from their edges, which every window has."""
    runs = pd.read_csv(workdir / "results" / "tables" / "runs.csv")
    windows = [
        (job, row[f"{prefix}timed_from"], row[f"{prefix}timed_to"])
        for job, row in runs.iterrows()
        for prefix in ("", "ceiling_")
        if prefix == "" or row["kind"] == "matrix"
    ]
    assert len(windows) == 3, windows  # the cell's epochs and ceiling, the baseline's epochs
    assert all(math.isfinite(t) for _, *edges in windows for t in edges), windows
    return any(
        a_job != b_job and a_from < b_to and b_from < a_to
        for a_job, a_from, a_to in windows
        for b_job, b_from, b_to in windows
    )


def test_a_cpu_baseline_never_runs_beside_a_gpu_cell(many_core_run):
    workdir, _ = many_core_run
    log = snakemake_log(workdir)
    assert 'timed=Resource("timed", 1)' in log  # the default profile's limit was in force
    assert timed_job_count(log) == 2
    assert concurrent_jobs(log) == []
    # the records agree: the cell's epochs, its ceiling and the baseline's epochs are apart
    assert not _records_overlap(workdir)
    text = (workdir / "results" / "tables" / "timing_conditions.md").read_text()
    assert "0 overlapped another timed window" in text


def test_with_two_timed_slots_the_log_shows_them_overlap(many_core_run, monkeypatch):
    workdir, config = many_core_run
    # --forcerun alone restores a finished cell from its finished.json: measure them again
    monkeypatch.setenv("NETTEBENCH_RETRAIN", "1")
    run_study(
        workdir,
        config,
        *MANY_CORES,
        *UNTIL_TABLES,
        "--resources",
        "gpu=1",
        "timed=2",
        "--forcerun",
        "cell_train",
        "cpu_baseline_train",
    )
    log = snakemake_log(workdir)
    assert timed_job_count(log) == 2
    assert len(concurrent_jobs(log)) == 1
    # NETTEBENCH_RETRAIN: each job trained its epochs again, none restored its finished result
    job_logs = [p.read_text() for p in (workdir / "results" / "logs").rglob("*.log")]
    trained = [text for text in job_logs if "epoch 2/2" in text]
    assert len(trained) == 2 and not any("restored" in text for text in trained), trained
    # Whether the two jobs' timed windows (a second or two each) then met in time depends on
    # how fast each job got going on this machine: the table names the overlapping windows
    # exactly when the records' windows overlapped (overlaps of made-up windows that always
    # meet: tests/test_caveats.py).
    text = (workdir / "results" / "tables" / "timing_conditions.md").read_text()
    overlapped = _records_overlap(workdir)
    assert ("0 overlapped" not in text) == overlapped, text
    assert not overlapped or "(cpu baseline) epochs" in text.split("## ")[1], text
