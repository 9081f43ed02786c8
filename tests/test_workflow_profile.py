"""End to end: the profile rules through the real Snakemake on a tiny synthetic study, asking
for the profiles only (nothing is trained), what a new window or a profiling-code edit reruns,
and a backend that cannot run here. (The quick start profiles nothing: its time.)"""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from tests.workflow_helpers import (
    copy_workflow,
    edit_module,
    planned_jobs,
    run_study,
    write_config,
)

pytestmark = pytest.mark.workflow

STUDY = {
    "datasets": {
        "tiny": {"synthetic": {"size": 32, "train_images": 24, "val_images": 8, "classes": 3}}
    },
    "matrix": {
        "model": "resnet18",
        "precision": ["O0", "bf16"],
        "batch_size": 4,
        "epochs": 1,
        "image_size": 32,
        "workers": 0,
    },
    "ceiling": False,
    "profile": {"cells": {"precision": ["O0", "bf16"]}, "warmup": 1, "steps": 2},
}
TARGETS = (
    "results/tables/top_kernels.md",
    "results/tables/top_kernels.html",
    "results/figures/kernel_categories.png",
    "results/figures/kernel_categories.svg",
)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("profiles"))
    config = write_config(workdir, STUDY)
    with pytest.MonkeyPatch.context() as env:
        env.delenv("KINETO_LOG_LEVEL", raising=False)  # what a user's shell has: not set
        result = run_study(workdir, config, *TARGETS)
    # the jobs' whole output (stdout and stderr), as the rule wrote it, before a later test
    # reruns the profiles into the same logs
    logs = workdir / "results" / "logs" / "profiles"
    result.job_logs = {str(log.relative_to(logs)): log.read_text() for log in logs.rglob("*.log")}
    return workdir, config, result


def test_only_the_profiles_and_their_aggregate_ran(profiled):
    _, _, result = profiled
    text = result.stdout + result.stderr
    assert "cell_profile" in text
    assert "rule cell_train" not in text and "rule cell_bench" not in text


def test_every_profiled_cell_has_every_file(profiled):
    workdir, _, _ = profiled
    summaries = sorted((workdir / "results" / "profiles").rglob("profile.json"))
    assert len(summaries) == 2
    for summary in summaries:
        for name in ("kernels.csv", "api.csv", "cpu_ops.csv", "categories.csv", "trace.json.gz"):
            assert (summary.parent / name).stat().st_size > 0, name
        record = json.loads(summary.read_text())
        assert record["status"] == "ok"
        assert record["window"]["steps_profiled"] == STUDY["profile"]["steps"]
        assert record["window"]["warmup_steps"] == STUDY["profile"]["warmup"]
        assert record["device"]["threads"] == 2  # the rule's threads
    categories = pd.read_csv(workdir / "results" / "tables" / "kernel_categories.csv")
    assert len(categories) == 6 * len(summaries)  # every category, each profiled cell
    assert sorted(set(categories["precision"])) == ["O0", "bf16"]
    shares = categories.groupby("precision")["share_pct"].sum()
    assert shares.round(3).eq(100).all(), shares
    for target in TARGETS:
        assert (workdir / target).stat().st_size > 500, target


def test_a_cpu_profile_log_holds_no_kineto_gpu_error(profiled):
    """A CUDA build of torch on a machine without a GPU driver made Kineto log "ERROR: ...
    gpuGetDeviceCount failed with code 35" into every CPU profile's log."""
    _, _, result = profiled
    assert len(result.job_logs) == 2
    for name, log in result.job_logs.items():
        assert "gpuGetDeviceCount" not in log and "ERROR" not in log, (name, log[-3000:])


def test_nothing_to_do_afterwards(profiled):
    workdir, config, _ = profiled
    assert planned_jobs(run_study(workdir, config, *TARGETS, "-n")) == {}


# What reruns: the profiles and their aggregate and figure, nothing else (dry runs; before the
# backend test below, whose failed run leaves the profiles to be made again).
RERUN = {"cell_profile": 2, "profiles_aggregate": 1, "profiles_plot": 1}


def test_a_new_profile_window_reruns_only_the_profiles(profiled):
    workdir, _, _ = profiled
    study = {**STUDY, "profile": {**STUDY["profile"], "steps": STUDY["profile"]["steps"] + 1}}
    longer = write_config(workdir, study, "longer_window.yaml")
    assert planned_jobs(run_study(workdir, longer, *TARGETS, "-n")) == RERUN


def test_editing_profiling_code_reruns_only_the_profiles(profiled):
    workdir, config, _ = profiled
    module = workdir / "scripts" / "nettebench" / "profiling" / "trace.py"
    text, status = module.read_text(), module.stat()
    edit_module(module)
    try:
        jobs = planned_jobs(run_study(workdir, config, *TARGETS, "-n"))
    finally:  # leave the copy as it was, for the tests after this one
        module.write_text(text)
        os.utime(module, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert jobs == RERUN


def test_a_backend_that_cannot_run_fails_saying_why_and_what_can(profiled):
    workdir, _, _ = profiled
    study = {**STUDY, "profile": {**STUDY["profile"], "backend": "nvprof", "steps": 1}}
    config = write_config(workdir, study, "nvprof.yaml")
    result = run_study(workdir, config, *TARGETS, check=False)
    assert result.returncode != 0
    logs = "".join(
        log.read_text() for log in (workdir / "results" / "logs" / "profiles").rglob("*.log")
    )
    assert "profiling backend nvprof cannot run here" in logs
    assert "Backends that can: torch" in logs
