"""The workflow on a real SLURM cluster (tests/slurm/cluster.sh: slurmctld, slurmd and munge on
this machine, with fake GPUs), through snakemake-executor-plugin-slurm and profiles/slurm.

1. The quick-start study submitted with the project's profile: every job but the local ones
   (aggregation, figures) runs as a SLURM job, records its job id, node and scheduler log, and
   the results have the shape of a local run's.
2. A training job killed mid-run with SIGKILL and requeued by the scheduler resumes from its
   last checkpoint: same SLURM job, restart count 1, metrics.json says where it resumed.

Needs root, Debian's slurm-wlm and munge (`tests/slurm/cluster.sh install`) and the plugin
(`pip install -e '.[slurm]'`); skipped, saying which is missing, without them. `.ci/run` has all
three and runs it in a virtual environment of its own.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from nettebench.records.environment import parse_scontrol
from nettebench.study import grid
from tests.workflow_helpers import REPO, copy_workflow, dry_run_jobs, run_study, write_config

pytestmark = [pytest.mark.slurm, pytest.mark.workflow]

CLUSTER = REPO / "tests" / "slurm" / "cluster.sh"
QUICKSTART = "profiles/quickstart/study.yaml"
# docs/slurm.md's cluster command for the quick-start study. Only the first status check comes
# sooner than the plugin's default 40 s, so a test of a few minutes does not idle for them.
SLURM_ARGS = (
    "--workflow-profile",
    "profiles/slurm",
    "--configfile",
    QUICKSTART,
    "--replace-workflow-config",
    "--slurm-init-seconds-before-status-checks",
    "5",
)
REMOTE_RULES = {
    "dataset_synthesize", "cell_train",  # no store: no `cached` cell; no `profile:` section
    "inference_measure", "inference_accuracy",  # the quick start's inference cells ([6/7])
}  # fmt: skip
LOCAL_RULES = {"tables_aggregate", "figures_plot", "front_page_write"}
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+) \(log: (\S+)\)")


def _missing() -> str | None:
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return "snakemake-executor-plugin-slurm is not installed: pip install -e '.[slurm]'"
    if not all(shutil.which(tool) for tool in ("slurmctld", "slurmd", "munged", "sbatch")):
        return "slurm-wlm and munge are not installed: tests/slurm/cluster.sh install (root)"
    if os.geteuid() != 0:
        return "the test cluster's daemons run as root"
    return None


@pytest.fixture(scope="module")
def cluster():
    """A running single-node cluster: the one already up (e.g. started by hand), or one
    started here and stopped afterwards."""
    reason = _missing()
    if reason and os.environ.get("NETTEBENCH_REQUIRE_SLURM"):
        pytest.fail(f"NETTEBENCH_REQUIRE_SLURM is set (.ci/run) but {reason}")
    if reason:
        pytest.skip(reason)
    if _run("scontrol", "ping", check=False).returncode == 0:
        yield
        return
    subprocess.run([str(CLUSTER), "start"], check=True)
    try:
        yield
    finally:
        subprocess.run([str(CLUSTER), "stop"], check=False)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("local"))
    run_study(workdir, workdir / QUICKSTART)
    return workdir


@pytest.fixture(scope="module")
def slurm_run(cluster, tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("slurm"))
    started = time.perf_counter()
    result = _snakemake(workdir, *SLURM_ARGS)
    print(f"quick start on SLURM: {time.perf_counter() - started:.1f} s")
    return workdir, result.stdout + result.stderr


def test_every_job_ran_under_slurm_and_says_where(slurm_run):
    workdir, output = slurm_run
    submitted = {int(job): log for job, log in SUBMITTED.findall(output)}
    rules = {re.search(r"/rule_(\w+)/", log).group(1) for log in submitted.values()}
    assert rules == REMOTE_RULES  # local rules ran on the submitting machine
    assert not rules & LOCAL_RULES

    records = [
        json.loads(path.read_text())
        for path in sorted((workdir / "results").rglob("*.json"))
        if path.name in ("metrics.json", "ceiling.json")
    ]
    # each cell (6: O0 and bf16, three seeds each) and its ceiling; no CPU baseline here
    study = yaml.safe_load((workdir / QUICKSTART).read_text())
    cells = len(grid.expand(study["matrix"], section="matrix", datasets=list(study["datasets"])))
    assert len(records) == 2 * cells == 12
    job_ids = [int(r["environment"]["slurm_job_id"]) for r in records if "summary" in r]
    assert len(set(job_ids)) == len(job_ids) == cells and set(job_ids) <= set(submitted)
    # a ceiling is measured in its cell's own job (benchmarks/cell_job.py), on the same node
    for path in (workdir / "results" / "runs").rglob("ceiling.json"):
        ceiling = json.loads(path.read_text())
        cell = json.loads((path.parent / "metrics.json").read_text())
        assert ceiling["environment"]["slurm_job_id"] == cell["environment"]["slurm_job_id"]
        assert ceiling["context"] == "cell job"
    for record in records:
        env = record["environment"]
        assert env["slurm_node"] == env["host"]
        assert env["slurm_restart_count"] == 0
        assert env["slurm_log"] == str(Path(submitted[int(env["slurm_job_id"])]).resolve())
        assert Path(env["slurm_log"]).is_file()

    # each training job's own log starts by naming its SLURM job and the scheduler's log
    for log in (workdir / "results" / "logs" / "runs").rglob("*.log"):
        first = log.read_text().splitlines()[0]
        assert first.startswith("SLURM job ") and "the scheduler's log of this job: /" in first


@pytest.fixture(scope="module")
def slurm_dry_run(cluster, tmp_path_factory):
    """The jobs the SLURM profile's dry run lists for the quick start (docs/slurm.md), in a
    copy of its own, keyed as the plugin names their logs: rule, wildcard values joined by _."""
    workdir = copy_workflow(tmp_path_factory.mktemp("slurm-dry"))
    result = _snakemake(workdir, *SLURM_ARGS, "-n")
    return {
        (job["rule"], "_".join(job["wildcards"].values()).replace("/", "_")): job["resources"]
        for job in dry_run_jobs(result.stdout + result.stderr)
    }


def test_each_job_asks_for_what_the_dry_run_showed_and_runs_with_those_cpus(
    slurm_run, slurm_dry_run
):
    """What the controller holds for each submitted job (`scontrol show job`: the CPUs and
    memory it was given, the GPUs it asked for, as its TRES leave GPUs out without an
    accounting database) is what the dry run showed for it, and every record a job wrote (a
    cell's metrics and ceiling, an inference cell's, an accuracy job's) ran with as many torch
    threads as the job was given CPUs. (`scontrol` still shows a finished job for an hour,
    tests/slurm/cluster.sh's MinJobAge.)"""
    workdir, output = slurm_run
    given = {}
    for job_id, log in SUBMITTED.findall(output):
        rule, wildcards = re.search(r"/rule_(\w+)/([^/]+)/\d+\.log$", log).groups()
        asked = slurm_dry_run[rule, wildcards]
        fields = parse_scontrol(_run("scontrol", "show", "job", job_id).stdout)
        tres = dict(item.split("=", 1) for item in fields["TRES"].split(","))
        assert int(fields["CPUs/Task"]) == int(fields["NumCPUs"]) == int(asked["cpus_per_task"])
        assert _megabytes(tres["mem"]) == int(asked["mem_mb"]), (rule, fields["TRES"], asked)
        assert _gpus(fields.get("TresPerJob")) == int(asked.get("gpu", 0)), (rule, fields)
        given[int(job_id)] = int(fields["NumCPUs"])

    threads = {}
    for path in sorted((workdir / "results").rglob("*.json")):
        if path.name in ("metrics.json", "ceiling.json", "inference.json", "accuracy.json"):
            record = json.loads(path.read_text())
            threads[path] = (
                record["device"]["threads"],
                int(record["environment"]["slurm_job_id"]),
            )
    assert len(threads) == 14  # 6 cells and their ceilings, the inference cell, its accuracy
    for path, (ran_with, job_id) in threads.items():
        assert ran_with == given[job_id], path
    # the quick start's cells have no loader workers (1 CPU); its inference cell has one (2)
    assert sorted(set(given[job] for _, job in threads.values())) == [1, 2]


def test_results_have_the_shape_of_a_local_run(slurm_run, local_run):
    workdir, _ = slurm_run
    identity = ["kind", "model", "precision", "batch_size", "epochs", "seed", "device"]
    cluster = pd.read_csv(workdir / "results" / "tables" / "runs.csv").sort_values(identity)
    local = pd.read_csv(local_run / "results" / "tables" / "runs.csv").sort_values(identity)
    assert list(cluster.columns) == list(local.columns)
    assert cluster[identity].values.tolist() == local[identity].values.tolist()
    assert set(cluster["status"]) == set(local["status"]) == {"ok"}
    assert cluster["env_slurm_job_id"].notna().all() and local["env_slurm_job_id"].isna().all()
    for name in ("epochs.csv",):
        assert (
            pd.read_csv(workdir / "results" / "tables" / name).shape
            == pd.read_csv(local_run / "results" / "tables" / name).shape
        )
    for folder in ("tables", "figures"):
        assert sorted(p.name for p in (workdir / "results" / folder).iterdir()) == sorted(
            p.name for p in (local_run / "results" / folder).iterdir()
        )


def test_nothing_to_do_after_the_cluster_run(slurm_run):
    workdir, _ = slurm_run
    result = _snakemake(workdir, *SLURM_ARGS, "-n")
    assert "Nothing to be done" in result.stdout + result.stderr


def test_a_killed_and_requeued_training_job_resumes_from_its_checkpoint(slurm_run):
    """SIGKILL to every process of a running training job, then `scontrol requeue`: SLURM runs
    the same job again (restart count 1), and the cell continues after its last epoch."""
    workdir, _ = slurm_run
    study = yaml.safe_load((workdir / QUICKSTART).read_text())
    study["matrix"].update(precision="O0", epochs=6, seed=1)
    study["matrix"].pop("include", None)
    # (its inference accuracy names seed 0, which this matrix lacks: no accuracy job, no error)
    study["ceiling"] = False
    config = write_config(workdir, study, "requeue.yaml")
    args = [a if a != QUICKSTART else str(config) for a in SLURM_ARGS]
    cell_dir = next(iter(_cell_dirs(workdir, "epochs~6")), None)
    assert cell_dir is None, "the requeue cell must be new"
    process = _snakemake(workdir, *args, background=True)
    try:
        job_id, cell_dir = _wait_for_first_checkpoint(workdir, process)
        # The kill and the requeue are two commands; between them the job shows CANCELLED for
        # a moment, which a scheduler's own preemption (one step in slurmctld) never shows.
        # Snakemake is paused across them so its status poll cannot land in that moment.
        os.kill(process.pid, signal.SIGSTOP)
        try:
            _run("scancel", "--signal=KILL", job_id)
            _wait_for_state(job_id, {"CANCELLED", "FAILED"})
            assert not (cell_dir / "metrics.json").exists()
            _run("scontrol", "requeue", job_id)
            # A requeued job waits 2 minutes before it is eligible again; start it in 2 seconds.
            # Not now: slurmd refuses to launch a job whose credential is no newer, to the
            # second, than its kill ("Job 14 already killed, do not launch batch job"; seen
            # once when the relaunch fell 0.27 s after the kill, in the same second), and the
            # job then fails for good and Snakemake's retry runs the cell as a new job.
            _run("scontrol", "update", f"jobid={job_id}", "StartTime=now+2")
            _wait_for_state(job_id, {"PENDING", "RUNNING"})
        finally:
            os.kill(process.pid, signal.SIGCONT)
        process.wait(timeout=1200)
    finally:
        if process.poll() is None:
            process.kill()
    output = (workdir / "snakemake-background.log").read_text()
    assert process.returncode == 0, output[-5000:]

    record = json.loads((cell_dir / "metrics.json").read_text())
    assert record["status"] == "ok"
    assert record["environment"]["slurm_job_id"] == job_id  # the same job, run again
    assert record["environment"]["slurm_restart_count"] == 1
    assert record["summary"]["resumed_from_epoch"] >= 1
    assert record["summary"]["epochs_run"] == 6
    assert list(pd.read_csv(cell_dir / "epochs.csv")["epoch"]) == list(range(1, 7))
    logs = (workdir / "results" / "logs" / "runs").rglob("*.log")
    log = next(p for p in logs if "epochs~6" in str(p) and "seed~1" in str(p))
    assert "resumed from the checkpoint after epoch" in log.read_text()
    # the requeued run appended to the same SLURM log (--open-mode=append in the profile)
    assert Path(record["environment"]["slurm_log"]).read_text().count("rule cell_train") >= 2


def _cell_dirs(workdir: Path, marker: str) -> list[Path]:
    runs = workdir / "results" / "runs"
    return [p for p in runs.rglob("*") if p.is_dir() and marker in str(p) and "seed~1" in str(p)]


def _wait_for_first_checkpoint(workdir: Path, process, timeout: float = 600):
    """The requeue cell's SLURM job id and directory, once its first epoch is checkpointed."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert process.poll() is None, "snakemake ended before the cell's first checkpoint"
        for cell_dir in _cell_dirs(workdir, "epochs~6"):
            if (cell_dir / "checkpoint.pt").exists():
                jobs = _run("squeue", "-h", "-t", "RUNNING", "-o", "%i|%k").stdout.split()
                ids = [j.split("|")[0] for j in jobs if "epochs~6" in j and "cell_train" in j]
                assert len(ids) == 1, jobs
                return ids[0], cell_dir
        time.sleep(0.5)
    raise AssertionError("the requeue cell wrote no checkpoint in time")


def _wait_for_state(job_id: str, states: set[str], timeout: float = 60) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        state = _run("squeue", "-h", "--states=all", "-j", job_id, "-o", "%T").stdout.strip()
        if state in states:
            return state
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not reach {states} (last: {state!r})")


def _megabytes(value: str) -> int:
    """A SLURM memory amount (`4864M`, `5G`) in MB."""
    return int(float(value[:-1]) * {"M": 1, "G": 1024, "T": 1024**2}[value[-1]])


def _gpus(tres_per_job: str | None) -> int:
    """GPUs in `scontrol`'s TresPerJob (`gres:gpu:1`, `gres/gpu:a100:2`; none: 0)."""
    if not tres_per_job:
        return 0
    return int(re.fullmatch(r"gres[:/]gpu(?::[\w.]+)?[:=](\d+)", tres_per_job).group(1))


def _run(*command: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, check=check, timeout=60)


def _snakemake(workdir: Path, *args: str, background: bool = False):
    """Snakemake as a user runs it on a login node (the plugin submits; jobs run this venv's
    interpreter, which rules/common.smk puts on the jobs' PATH)."""
    command = [sys.executable, "-m", "snakemake", *args]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if background:  # output to a file: a paused reader must not block a full pipe
        log = open(workdir / "snakemake-background.log", "w")  # noqa: SIM115 - closed by the OS
        return subprocess.Popen(command, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT)
    result = subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, timeout=1800
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    return result
